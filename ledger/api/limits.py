"""Request-size bounds, enforced before any parsing.

The request head (request line and headers, counted as raw bytes up to the blank line) is
capped at ``MAX_HEAD_BYTES`` (32 KiB) by the HTTP protocol ``ledger serve`` runs
(:class:`HeadLimitedHttpToolsProtocol`): a head that grows past it is answered at once with
431 ``header_too_large`` (a problem document, like every error) and the connection is
closed; no more of it is read or kept.

A body larger than its route's limit is refused with 413 ``too_large`` (pure ASGI
middleware :class:`BodyLimit`): at once from ``Content-Length``, or, for a chunked body, as
soon as the bytes received pass the limit (the rest is never buffered).  Limits: a single
submission ``MAX_SUBMISSION_BYTES`` (1 MiB, the same limit as the CLI), a batch
``Settings.batch_max_bytes`` (8 MiB), anything else 64 KiB.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol

from ledger.api.errors import PROBLEM_MEDIA_TYPE, problem_body
from ledger.errors import SubmissionTooLarge

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
            message = await receive()
            if message.get("type") == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    raise SubmissionTooLarge(f"request body exceeds the limit of {limit} bytes")
            return message

        await self.app(scope, limited_receive, send)


class HeadLimitedHttpToolsProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with the request head capped at ``MAX_HEAD_BYTES``.

    httptools itself has no such limit: uvicorn would buffer a header of any size.  Bytes are
    counted before they reach the parser; of a chunk that would pass the cap only what fits
    is parsed, and if the head did not end inside it the answer is 431 and the connection
    closes.  (The bytes of a pipelined next request that arrive in the chunk that ended the
    previous one are not counted: at most one read's worth.)
    """

    max_head_bytes = MAX_HEAD_BYTES

    def connection_made(self, transport: Any) -> None:  # type: ignore[override]
        self._in_head, self._head_bytes, self._heads_done = True, 0, 0
        super().connection_made(transport)

    def on_headers_complete(self) -> None:
        self._in_head, self._heads_done = False, self._heads_done + 1
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        self._in_head, self._head_bytes = True, 0
        super().on_message_complete()

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
        body = json.dumps(problem_body(
            431, "header_too_large",
            f"the request line and headers exceed {self.max_head_bytes} bytes")).encode()
        self.transport.write(b"".join([
            STATUS_LINE[431], b"content-type: ", PROBLEM_MEDIA_TYPE.encode(), b"\r\n",
            b"content-length: ", str(len(body)).encode(), b"\r\n",
            b"connection: close\r\n\r\n", body]))
        self.transport.close()
