"""Request-size bounds, enforced before any parsing.

The request head (request line and headers, counted as raw bytes up to the blank line) is
capped at ``MAX_HEAD_BYTES`` (32 KiB) by the HTTP protocol ``ledger serve`` runs
(:class:`HeadLimitedHttpToolsProtocol`): a head that grows past it is answered at once with
431 ``header_too_large`` (a problem document, like every error) and the connection is
closed; no more of it is read or kept.

The same protocol bounds time and connections (:class:`ConnectionGuard`): a head must be
complete within ``head_timeout_s`` (10 s), a body within ``body_timeout_s`` (30 s) of its
head (408 ``head_timeout`` / ``body_timeout``, then the connection closes), and a process
holds at most ``connection_cap()`` connections (below its descriptor limit); beyond it the
connection that has waited longest for a request head is closed, so health probes are
answered whatever number of idle clients is connected.

A body larger than its route's limit is refused with 413 ``too_large`` (pure ASGI
middleware :class:`BodyLimit`): at once from ``Content-Length``, or, for a chunked body, as
soon as the bytes received pass the limit (the rest is never buffered).  Limits: a single
submission ``MAX_SUBMISSION_BYTES`` (1 MiB, the same limit as the CLI), a batch
``Settings.batch_max_bytes`` (8 MiB), anything else 64 KiB.
"""

from __future__ import annotations

import asyncio
import functools
import json
from collections.abc import Callable
from dataclasses import replace
from typing import Any, cast

from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol

from ledger.api.errors import PROBLEM_MEDIA_TYPE, problem_body
from ledger.api.settings import Settings
from ledger.errors import LedgerError, SubmissionTooLarge
from ledger.ops.limits import ConnectionGuard

OTHER_MAX_BYTES = 64 * 1024
MAX_HEAD_BYTES = 32 * 1024  # request line + headers of one request


def _send_json(status: int, body: dict[str, Any]) -> Callable[..., Any]:
    """Send ``body`` (``{"error": {"code", "message"}}``) as its problem document: this
    middleware answers before the application's error handlers could."""
    data = json.dumps(problem_body(status, **body["error"])).encode()

    async def respond(send: Callable[..., Any]) -> None:
        await send({"type": "http.response.start", "status": status,
                    "headers": [(b"content-type", PROBLEM_MEDIA_TYPE.encode()),
                                (b"content-length", str(len(data)).encode()),
                                (b"connection", b"close")]})
        await send({"type": "http.response.body", "body": data})

    return respond


class BodyLimit:
    """Wraps an ASGI app; ``limit_for(path)`` gives the byte limit of a request body."""

    def __init__(self, app: Any, limit_for: Callable[[str], int]) -> None:
        self.app = app
        self.limit_for = limit_for

    async def __call__(self, scope: dict[str, Any], receive: Callable[..., Any],
                       send: Callable[..., Any]) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self.limit_for(scope.get("path", ""))
        length = None
        for name, value in scope.get("headers", ()):
            if name == b"content-length":
                length = value
        if length is not None:
            text = length.decode("latin-1").strip()
            if not text.isdigit() or len(text) > 18:
                await _send_json(400, {"error": {"code": "bad_request",
                                                 "message": "invalid Content-Length"}})(send)
                return
            if int(text) > limit:
                await _send_json(413, {"error": {
                    "code": "too_large",
                    "message": f"request body is {int(text)} bytes; the limit here is "
                               f"{limit} bytes"}})(send)
                return
        received = 0

        async def limited_receive() -> dict[str, Any]:
            nonlocal received
            message: dict[str, Any] = await receive()
            if message.get("type") == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    raise SubmissionTooLarge(f"request body exceeds the limit of {limit} bytes")
            return message

        await self.app(scope, limited_receive, send)


@functools.cache
def process_guard() -> ConnectionGuard:
    """The guard of this server process (from the service settings; defaults without)."""
    try:
        guard = Settings.from_env().connection_guard()
    except LedgerError:
        guard = ConnectionGuard()
    return replace(guard, max_connections=guard.connection_cap())


def _problem_bytes(status: int, code: str, message: str) -> bytes:
    body = json.dumps(problem_body(status, code, message)).encode()
    return b"".join([STATUS_LINE[status], b"content-type: ", PROBLEM_MEDIA_TYPE.encode(),
                     b"\r\n", b"content-length: ", str(len(body)).encode(), b"\r\n",
                     b"connection: close\r\n\r\n", body])


class GuardedHttpToolsProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol, guarded against heads that never end and clients that
    never finish (what ``ledger serve`` runs):

    * the request head is capped at ``MAX_HEAD_BYTES``.  httptools itself has no such
      limit: uvicorn would buffer a header of any size.  Bytes are counted before they
      reach the parser; of a chunk that would pass the cap only what fits is parsed, and if
      the head did not end inside it the answer is 431 and the connection closes.  (The
      bytes of a pipelined next request that arrive in the chunk that ended the previous
      one are not counted: at most one read's worth.)
    * a head must be complete within ``head_timeout_s`` of the moment the connection
      started waiting for it (opened, or the previous response sent), however slowly its
      bytes trickle in: else 408 ``head_timeout`` and the connection closes.  uvicorn has no
      such timeout (its keep-alive timer stops at the first byte).
    * a body must be complete within ``body_timeout_s`` of its head: else 408
      ``body_timeout`` (if no response has started) and the connection closes.
    * at most ``connection_cap()`` connections per process.  A connection beyond the cap
      closes the one that has waited longest for a request head (an idle or slow client,
      never one whose request is being answered), so a health probe is answered however
      many idle connections are held open; when every connection has a request in
      progress the new one gets 503 ``too_many_connections``.  The cap stays below the
      descriptor limit, so accepting never fails for want of a descriptor.
    """

    max_head_bytes = MAX_HEAD_BYTES

    def connection_made(self, transport: Any) -> None:
        self._in_head, self._head_bytes, self._heads_done = True, 0, 0
        self._guard = process_guard()
        self._timer: asyncio.TimerHandle | None = None
        self._waiting_since: float | None = None
        super().connection_made(transport)
        if len(self.connections) > self._guard.connection_cap() and not self._evict_one():
            self.transport.write(_problem_bytes(
                503, "too_many_connections",
                "every connection this server may hold has a request in progress"))
            self.transport.close()
            return
        self._wait_for_head()

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_timer()
        self._waiting_since = None
        super().connection_lost(exc)

    # -- timers ------------------------------------------------------------------------
    def _cancel_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _wait_for_head(self) -> None:
        self._cancel_timer()
        self._waiting_since = self.loop.time()
        self._timer = self.loop.call_later(self._guard.head_timeout_s, self._timed_out,
                                           "head_timeout", "the request head was not"
                                           f" complete within {self._guard.head_timeout_s:g} s")

    def _timed_out(self, code: str, message: str) -> None:
        self._timer = None
        if self.transport.is_closing():
            return
        if code == "head_timeout" or not self.cycle.response_started:
            self.transport.write(_problem_bytes(408, code, message))
        self.transport.close()

    def _evict_one(self) -> bool:
        """Close the connection that has waited longest for a request head; False if
        none waits for one."""
        # (uvicorn types its connection set as any of its protocols: the ones with a
        # _waiting_since are of this class)
        waiting = cast("list[GuardedHttpToolsProtocol]", [
            c for c in self.connections if c is not self
            and getattr(c, "_waiting_since", None) is not None
            and not c.transport.is_closing()])
        if not waiting:
            return False
        oldest = min(waiting, key=lambda c: cast(float, c._waiting_since))  # not None: above
        oldest._waiting_since = None
        oldest._cancel_timer()
        oldest.transport.close()
        return True

    # -- parser callbacks ----------------------------------------------------------------
    def on_headers_complete(self) -> None:
        self._in_head, self._heads_done = False, self._heads_done + 1
        self._waiting_since = None
        self._cancel_timer()
        self._timer = self.loop.call_later(self._guard.body_timeout_s, self._timed_out,
                                           "body_timeout", "the request body was not"
                                           f" complete within {self._guard.body_timeout_s:g} s")
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        self._in_head, self._head_bytes = True, 0
        self._cancel_timer()
        super().on_message_complete()

    def on_response_complete(self) -> None:
        pipelined = bool(self.pipeline)  # super() starts the next one, already read
        super().on_response_complete()
        if not self.transport.is_closing() and not pipelined and self._in_head:
            self._wait_for_head()  # the next request's head, if the client sends one

    def data_received(self, data: bytes) -> None:
        if not self._in_head:
            super().data_received(data)
            return
        room = self.max_head_bytes - self._head_bytes
        self._head_bytes += min(len(data), room)
        if len(data) <= room:
            super().data_received(data)
            return
        heads = self._heads_done
        super().data_received(data[:room])
        if self.transport.is_closing():
            return
        if self._heads_done == heads:  # the head did not end within the cap
            self._send_431()
            return
        self.data_received(data[room:])

    def _send_431(self) -> None:
        self.transport.write(_problem_bytes(
            431, "header_too_large",
            f"the request line and headers exceed {self.max_head_bytes} bytes"))
        self.transport.close()
