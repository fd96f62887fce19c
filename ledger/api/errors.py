"""Every HTTP error is an RFC 9457 problem document (``application/problem+json``)::

    {"type": "urn:ledger:problem:<code>", "title": <HTTP reason phrase>, "status": <int>,
     "detail": <message>, "code": <code>, "field": <field>?,
     "error": {"code", "message", "field"?, "detail"?}}

``code`` (and ``field``, when the error is about one) are extension members, the same
stable codes the CLI prints; ``error`` is the shape served before problem documents, kept
so that clients reading ``error.code`` keep working.

``LedgerError`` -> its category's status (``ledger.errors.CATEGORY_STATUS``, the one
table); a rejected submission (an ``ErrorInfo``) -> the status of its category too.
Request validation -> 422 ``invalid_request`` (400 ``bad_request`` for a malformed
path/query/header); unknown routes -> 404 ``no_such_route``; wrong method -> 405
``method_not_allowed`` (``Allow``: every method served at that path); anything unexpected
-> 500 ``internal_error`` (logged, no detail leaked).  A client that goes away before its
request body is complete is no error of the ledger's: one INFO ``client_disconnect`` line
(no traceback), nothing sent (there is no one to send it to); the access log records
status 499 (nginx's "client closed request").  401s carry
``WWW-Authenticate: Bearer``, 403s ``insufficient_scope``, 503 ``overloaded``
``Retry-After: 1``.
"""

from __future__ import annotations

import logging
from http import HTTPStatus
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import ClientDisconnect
from starlette.routing import Match

from ledger.errors import CATEGORY_STATUS, Forbidden, LedgerError, Overloaded, Unauthenticated

log = logging.getLogger("ledger.api")

PROBLEM_MEDIA_TYPE = "application/problem+json"
PROBLEM_TYPE_PREFIX = "urn:ledger:problem:"
CLIENT_CLOSED_REQUEST = 499  # never sent: what the access log records for a client gone


def problem_body(status: int, code: str, message: str, field: str | None = None,
                 detail: dict[str, Any] | None = None) -> dict[str, Any]:
    """The problem document of an error (see the module docstring)."""
    body: dict[str, Any] = {"type": PROBLEM_TYPE_PREFIX + code, "title": _title(status),
                            "status": status, "detail": message, "code": code}
    if field is not None:
        body["field"] = field
    body.update(error_body(code, message, field, detail))
    return body


def _title(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return "Error"


class ProblemResponse(JSONResponse):
    media_type = PROBLEM_MEDIA_TYPE


def problem_response(status: int, error: dict[str, Any],
                     headers: dict[str, str] | None = None) -> ProblemResponse:
    """A response for ``error``, an error object ``{"code", "message", "field"?,
    "detail"?}`` (``LedgerError.to_dict()``)."""
    body = problem_body(status, error["code"], error["message"], error.get("field"),
                        error.get("detail"))
    return ProblemResponse(body, status_code=status, headers=headers)


def error_body(code: str, message: str, field: str | None = None,
               detail: dict[str, Any] | None = None) -> dict[str, Any]:
    """The error object before problem documents, ``{"error": {...}}`` (status-free)."""
    err: dict[str, Any] = {"code": code, "message": message}
    if field is not None:
        err["field"] = field
    if detail:
        err["detail"] = detail
    return {"error": err}


def rejection_response(error: dict[str, Any]) -> ProblemResponse:
    """The answer to a rejected submission, its ``AppendResult.error``: the status of the
    error's category (an ``ErrorInfo`` carries it; a bare dict counts as invalid)."""
    category = getattr(error, "category", "invalid")
    return problem_response(CATEGORY_STATUS[category][1], error)


def ledger_error_response(exc: LedgerError) -> ProblemResponse:
    """The answer to a raised ``LedgerError``, with its authentication/retry headers."""
    headers = {}
    if isinstance(exc, Unauthenticated):
        headers["WWW-Authenticate"] = ("Bearer" if exc.code == "missing_token" else
                                       f'Bearer error="invalid_token", '
                                       f'error_description="{exc.code}"')
    elif isinstance(exc, Forbidden):
        headers["WWW-Authenticate"] = 'Bearer error="insufficient_scope"'
    elif isinstance(exc, Overloaded):
        headers["Retry-After"] = "1"
    elif exc.code == "not_checkpointed" and isinstance(exc.detail.get("retry_after_s"), int):
        headers["Retry-After"] = str(exc.detail["retry_after_s"])  # ledger.api.proofs
    return problem_response(exc.http_status, exc.to_dict(), headers)


HTTP_METHODS = ("DELETE", "GET", "HEAD", "OPTIONS", "PATCH", "POST", "PUT")


def allowed_methods(request: Request) -> list[str]:
    """Every method some route serves at the request's path (RFC 9110 §15.5.6: a 405's
    ``Allow`` lists them all; the router names only those of the first route that matched
    the path, e.g. ``POST`` alone where another route serves ``GET``).  Asked of the routes
    themselves (``matches``), so routers included in routers count too."""
    routes = request.app.router.routes
    return [m for m in HTTP_METHODS
            if any(r.matches({**request.scope, "method": m})[0] == Match.FULL
                   for r in routes)]


def _loc(loc: Any) -> str:
    return ".".join(str(p) for p in loc if p not in ("body",)) or "body"


def install(app: FastAPI) -> None:
    """Register the handlers that make every error the problem document above."""

    @app.exception_handler(LedgerError)
    async def _ledger(_: Request, exc: LedgerError) -> ProblemResponse:
        if exc.http_status >= 500 and exc.category == "internal":
            log.error("internal error: %s", exc, exc_info=exc)
        return ledger_error_response(exc)

    @app.exception_handler(RequestValidationError)
    async def _validation(_: Request, exc: RequestValidationError) -> ProblemResponse:
        errors = exc.errors()
        first = errors[0] if errors else {}
        loc = first.get("loc", ())
        where = loc[0] if loc else "body"
        status, code = (422, "invalid_request") if where == "body" else (400, "bad_request")
        msg = str(first.get("msg", "invalid request"))
        return problem_response(status, {"code": code, "message": f"{_loc(loc)}: {msg}",
                                         "field": _loc(loc)})

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> ProblemResponse:
        code = {404: "no_such_route", 405: "method_not_allowed"}.get(exc.status_code,
                                                                      "http_error")
        msg = exc.detail if isinstance(exc.detail, str) else "request failed"
        headers = dict(getattr(exc, "headers", None) or {})
        if exc.status_code == 405:
            headers["Allow"] = ", ".join(allowed_methods(request))
        return problem_response(exc.status_code, {"code": code, "message": msg},
                                headers or None)

    @app.exception_handler(ClientDisconnect)
    async def _gone(request: Request, _: ClientDisconnect) -> Response:
        # a producer that keeps hanging up must not flood the error log: INFO, no traceback
        principal = (request.scope.get("state") or {}).get("principal")
        log.info("client disconnected before its request body was complete", extra={
            "event": "client_disconnect", "method": request.method,
            "route": getattr(request.scope.get("route"), "path", None) or "unmatched",
            "producer": getattr(principal, "subject", None),
            "role": getattr(principal, "role", None)})
        return Response(status_code=CLIENT_CLOSED_REQUEST)

    @app.exception_handler(Exception)
    async def _unexpected(_: Request, exc: Exception) -> ProblemResponse:
        log.error("unhandled error", exc_info=exc)
        return problem_response(500, {"code": "internal_error",
                                      "message": "internal server error"})
