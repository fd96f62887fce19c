"""Structured logs of ``ledger serve --log-format json|text`` and the request id.

JSON: one object per line, ``time`` (RFC 3339, UTC, ms), ``level``, ``logger``,
``event``, ``message``, ``request_id`` (when logged while answering a request) and, for
the ``request`` event, ``method``, ``route`` (the route *template*, e.g.
``/v1/entries/{seq}``: never a query string), ``status``, ``latency_ms``, ``producer``
(the token's subject) and ``role``.  What is never logged: the Authorization header or
any token, request or response bodies, payloads, evidence, query strings.

``X-Request-ID``: a request's id is taken from the header when it is 1..128 characters
of ``[A-Za-z0-9._:-]`` (anything else is replaced, not echoed), else a new one is made;
it is returned in the ``X-Request-ID`` response header and logged with every line
written while the request is answered.
"""

from __future__ import annotations

import contextvars
import itertools
import json
import logging
import os
import re
import time
from datetime import UTC, datetime
from typing import Any

REQUEST_ID_HEADER = b"x-request-id"
_REQUEST_ID_RE = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")
request_id: contextvars.ContextVar[str | None] = contextvars.ContextVar("request_id",
                                                                       default=None)
log = logging.getLogger("ledger.request")
# extra fields a log call may carry (logger.info(..., extra={...})); nothing else is copied
FIELDS = ("event", "method", "route", "status", "latency_ms", "producer", "role", "kind",
          "witness", "outcome", "attempt", "url", "size", "findings", "error_code", "seq")


def _time(record: logging.LogRecord) -> str:
    return datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds") \
        .replace("+00:00", "Z")


class JsonFormatter(logging.Formatter):
    """One JSON object per line."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {"time": _time(record), "level": record.levelname.lower(),
                               "logger": record.name,
                               "event": getattr(record, "event", None) or "log",
                               "message": record.getMessage()}
        rid = request_id.get()
        if rid is not None:
            out["request_id"] = rid
        for name in FIELDS[1:]:
            value = getattr(record, name, None)
            if value is not None:
                out[name] = value
        if record.exc_info:
            out["exception"] = self.formatException(record.exc_info)
        return json.dumps(out, ensure_ascii=False, default=str)


class TextFormatter(logging.Formatter):
    """``time level event message key=value ...`` on one line."""

    def format(self, record: logging.LogRecord) -> str:
        parts = [_time(record), record.levelname.lower(),
                 getattr(record, "event", None) or record.name, record.getMessage()]
        rid = request_id.get()
        if rid is not None:
            parts.append(f"request_id={rid}")
        parts += [f"{n}={getattr(record, n)}" for n in FIELDS[1:]
                  if getattr(record, n, None) is not None]
        line = " ".join(str(p) for p in parts if p != "")
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return line


_ID_PREFIX = os.urandom(8).hex()  # per process; a counter after it (no urandom per request)
_ID_COUNTER = itertools.count(1)


def new_request_id() -> str:
    """32 hex digits, unique per process start: a random prefix and a counter."""
    return f"{_ID_PREFIX}{next(_ID_COUNTER) & 0xFFFFFFFFFFFFFFFF:016x}"


def accepted_request_id(raw: bytes | None) -> str:
    """The caller's id if it is well-formed, else a new one."""
    if raw is not None:
        try:
            text = raw.decode("ascii")
        except UnicodeDecodeError:
            text = ""
        if _REQUEST_ID_RE.match(text):
            return text
    return new_request_id()


_LATENCY: dict[str, Any] = {}


def _append_latency(route: str) -> Any:
    """The latency histogram child of ``route`` (looked up once per route)."""
    child = _LATENCY.get(route)
    if child is None:
        from ledger.service.metrics import APPEND_LATENCY

        child = _LATENCY[route] = APPEND_LATENCY.labels(route)
    return child


class RequestLog:
    """ASGI middleware: the request id (header in, header out, context variable), the
    ``request`` log event, and the append latency histogram."""

    APPEND_ROUTES = ("/v1/entries", "/v1/entries/batch")

    def __init__(self, app: Any, *, access_log: bool = True) -> None:
        self.app = app
        self.access_log = access_log

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        raw = dict(scope.get("headers") or []).get(REQUEST_ID_HEADER)
        rid = accepted_request_id(raw)
        scope.setdefault("state", {})  # shared with the request, where auth puts the principal
        token = request_id.set(rid)
        started = time.perf_counter()
        status = {"code": 500}

        async def send_with_id(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                status["code"] = message["status"]
                headers = [(k, v) for k, v in message.get("headers", [])
                           if k.lower() != REQUEST_ID_HEADER]
                headers.append((REQUEST_ID_HEADER, rid.encode("ascii")))
                message = {**message, "headers": headers}
            await send(message)

        try:
            await self.app(scope, receive, send_with_id)
        finally:
            elapsed = time.perf_counter() - started
            route = getattr(scope.get("route"), "path", None) or "unmatched"
            if scope.get("method") == "POST" and route in self.APPEND_ROUTES:
                _append_latency(route).observe(elapsed)
            if self.access_log:
                principal = (scope.get("state") or {}).get("principal")
                log.info("%s %s %d", scope.get("method"), route, status["code"], extra={
                    "event": "request", "method": scope.get("method"), "route": route,
                    "status": status["code"], "latency_ms": round(elapsed * 1000, 3),
                    "producer": getattr(principal, "subject", None),
                    "role": getattr(principal, "role", None)})
            request_id.reset(token)
