"""Every HTTP error is JSON: ``{"error": {"code", "message", "field"?, "detail"?}}``.

``LedgerError`` -> its category's status (``ledger.errors.CATEGORY_STATUS``) and its
stable code, the same codes the CLI prints.  Request validation -> 422
``invalid_request`` (400 ``bad_request`` for a malformed path/query); unknown
routes -> 404 ``no_such_route``; wrong method -> 405 ``method_not_allowed``;
anything unexpected -> 500 ``internal_error`` (logged, no detail leaked).

Authentication and authorization are HTTP-only categories, so they live here:
401 (``missing_token``, ``invalid_token``, ``token_expired``) with a
``WWW-Authenticate: Bearer`` header, and 403 ``forbidden``.
"""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from ledger.errors import LedgerError

log = logging.getLogger("ledger.api")

# Rejected submissions come back as AppendResult.error dicts (code, no category).
REJECTION_STATUS = {"idempotency_conflict": 409, "too_large": 413}


class Unauthenticated(LedgerError):
    """No token, or a token that does not verify (401)."""

    category = "unauthenticated"
    default_code = "invalid_token"


class Forbidden(LedgerError):
    """A valid token whose role may not use this endpoint (403)."""

    category = "forbidden"
    default_code = "forbidden"


class BadRequest(LedgerError):
    """A malformed request outside the submission rules (400)."""

    category = "usage"
    default_code = "bad_request"


class Overloaded(LedgerError):
    """The append queue is full (503, ``Retry-After: 1``)."""

    category = "unavailable"
    default_code = "overloaded"


def error_body(code: str, message: str, field: str | None = None,
               detail: dict[str, Any] | None = None) -> dict[str, Any]:
    err: dict[str, Any] = {"code": code, "message": message}
    if field is not None:
        err["field"] = field
    if detail:
        err["detail"] = detail
    return {"error": err}


def rejection_status(error: dict[str, Any]) -> int:
    """HTTP status of a rejected submission (its error dict from ``AppendResult``)."""
    return REJECTION_STATUS.get(error.get("code", ""), 422)


def ledger_error_response(exc: LedgerError) -> JSONResponse:
    headers = {}
    if isinstance(exc, Unauthenticated):
        headers["WWW-Authenticate"] = ("Bearer" if exc.code == "missing_token" else
                                       f'Bearer error="invalid_token", '
                                       f'error_description="{exc.code}"')
    elif isinstance(exc, Forbidden):
        headers["WWW-Authenticate"] = 'Bearer error="insufficient_scope"'
    elif isinstance(exc, Overloaded):
        headers["Retry-After"] = "1"
    return JSONResponse({"error": exc.to_dict()}, status_code=exc.http_status, headers=headers)


def _loc(loc: Any) -> str:
    return ".".join(str(p) for p in loc if p not in ("body",)) or "body"


def install(app: FastAPI) -> None:
    """Register the handlers that make every error the JSON shape above."""

    @app.exception_handler(LedgerError)
    async def _ledger(_: Request, exc: LedgerError) -> JSONResponse:
        if exc.http_status >= 500 and exc.category == "internal":
            log.error("internal error: %s", exc, exc_info=exc)
        return ledger_error_response(exc)

    @app.exception_handler(RequestValidationError)
    async def _validation(_: Request, exc: RequestValidationError) -> JSONResponse:
        errors = exc.errors()
        first = errors[0] if errors else {}
        loc = first.get("loc", ())
        where = loc[0] if loc else "body"
        status, code = (422, "invalid_request") if where == "body" else (400, "bad_request")
        msg = str(first.get("msg", "invalid request"))
        return JSONResponse(error_body(code, f"{_loc(loc)}: {msg}", _loc(loc)),
                            status_code=status)

    @app.exception_handler(StarletteHTTPException)
    async def _http(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        code = {404: "no_such_route", 405: "method_not_allowed"}.get(exc.status_code,
                                                                      "http_error")
        msg = exc.detail if isinstance(exc.detail, str) else "request failed"
        return JSONResponse(error_body(code, msg), status_code=exc.status_code,
                            headers=getattr(exc, "headers", None))

    @app.exception_handler(Exception)
    async def _unexpected(_: Request, exc: Exception) -> JSONResponse:
        log.error("unhandled error", exc_info=exc)
        return JSONResponse(error_body("internal_error", "internal server error"),
                            status_code=500)
