"""Request-size bounds, enforced before any parsing (pure ASGI middleware).

A body larger than its route's limit is refused with 413 ``too_large``: at once
from ``Content-Length``, or, for a chunked body, as soon as the bytes received
pass the limit (the rest is never buffered).  Limits: a single submission
``MAX_SUBMISSION_BYTES`` (1 MiB, the same limit as the CLI), a batch
``Settings.batch_max_bytes`` (8 MiB), anything else 64 KiB.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from ledger.api.errors import PROBLEM_MEDIA_TYPE, problem_body
from ledger.errors import SubmissionTooLarge

OTHER_MAX_BYTES = 64 * 1024


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
