"""Health, the ledger's JWKS, the latest checkpoint, and the OpenAPI document.

Only ``/v1/health`` and ``/.well-known/jwks.json`` answer without a token.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, PlainTextResponse

from ledger.api.auth import Principal, require
from ledger.api.errors import error_body
from ledger.api.schemas import READ_ERRORS
from ledger.errors import LedgerError, NotFound, StoreUnavailable

router = APIRouter(tags=["meta"])


@router.get("/v1/health", summary="Database reachable; head size and hash (no token)",
            responses={503: READ_ERRORS[503]})
def health(request: Request) -> JSONResponse:
    """200 ``{"status": "ok", "database": "reachable", size, head_hash, ...}`` or 503."""
    service = request.app.state.service
    try:
        head = service.ledger.head()
        q = service.ledger.quarantine_status()
    except LedgerError as exc:
        return _down(exc)
    except Exception:  # noqa: BLE001 - any driver failure means "not reachable"
        return _down(StoreUnavailable("the database is unreachable"))
    # totals only: per-producer counts are for operators (`ledger quarantine status`)
    quarantine = {k: q[k] for k in ("rows", "dropped", "pruned", "max_rows",
                                    "max_per_producer")}
    body = {"status": "ok", "database": "reachable", **head,
            "pending_appends": service.committer.pending, "quarantine": quarantine}
    if service.replica is not None:
        body["read_database"] = read_database(service)
    return JSONResponse(body)


def read_database(service: Any) -> dict[str, Any]:
    """The read replica's state (``--read-db``): ``reachable`` with its position and lag,
    or ``unreachable`` (its reads answer 503 then; appends go on)."""
    try:
        return {"status": "reachable", **service.ledger.replica_status(service.replica)}
    except LedgerError as exc:
        return {"status": "unreachable", "code": exc.code}


def _down(exc: LedgerError) -> JSONResponse:
    """503: the store is down (or not initialized), with ``database: unreachable``."""
    body = error_body(exc.code, exc.message)
    body["database"] = "unreachable"
    return JSONResponse(body, status_code=503, headers={"Retry-After": "1"})


@router.get("/.well-known/jwks.json", summary="The ledger's public keys (no token)")
def jwks(request: Request) -> JSONResponse:
    """Every ledger key, active and retired: receipts, checkpoints and self-issued tokens
    verify against these."""
    return JSONResponse(request.app.state.service.signer.jwks(),
                        headers={"Cache-Control": "max-age=300"})


@router.get("/v1/checkpoint", summary="The latest signed checkpoint (C2SP signed note)",
            response_class=PlainTextResponse,
            responses={200: {"content": {"text/plain": {}}}, **READ_ERRORS})
def checkpoint(request: Request, principal: Principal = require("checkpoint"),
               ) -> PlainTextResponse:
    """The signed-note text of the stored checkpoint with the largest tree size
    (docs/format-checkpoint.md), with the witness cosignature lines stored for it
    (docs/anchoring.md); 404 ``no_checkpoint`` before the first one."""
    note = request.app.state.service.reader.latest_cosigned_note()
    if note is None:
        raise NotFound("no checkpoint has been signed yet", code="no_checkpoint")
    return PlainTextResponse(note, media_type="text/plain; charset=utf-8")


@router.get("/openapi.json", include_in_schema=False)
def openapi(request: Request, principal: Principal = require("schema")) -> dict[str, Any]:
    schema: dict[str, Any] = request.app.openapi()
    return schema
