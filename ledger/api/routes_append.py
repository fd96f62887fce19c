"""POST /v1/entries (one submission, group-committed) and POST /v1/entries/batch.

The body of a single append is one submission, exactly as the CLI takes it
(docs/submissions.md); the body of a batch is a JSON array of them.  Each item
is handed to the ledger as its own exact bytes, so a rejected item is
quarantined byte for byte, as with ``ledger append`` -- with an
``Idempotency-Key`` too: the body is then parsed once, here, to carry the key,
and handed over together with its bytes (``Received``).

``Idempotency-Key`` header: the submission's ``idempotency_key`` (batch item i:
``<key>#<i>``).  A body that names its own, different key is refused (422
``idempotency_key_mismatch``).  Retrying with the same key and the same body
returns the same entry (``replayed: true``, HTTP 200); another body: 409.

``Prefer: receipt=batch`` (RFC 7240): the receipts of the answer are batch receipts
(``ledger.api.receipts``, docs/format-receipt.md) -- one signature for every such caller of a
group-committed batch, or for all items of a ``/v1/entries/batch`` call -- and the answer says
``Preference-Applied: receipt=batch``.  Without it each appended item gets its own JWT.

A token with a tenant appends to that tenant's chain (docs/http.md, "Tenants"); one without
to the ``default`` tenant's.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Header, Request
from fastapi.responses import JSONResponse
from starlette.concurrency import run_in_threadpool

from ledger.api.auth import Principal, require
from ledger.api.errors import rejection_response
from ledger.api.groupcommit import append_scope
from ledger.api.receipts import PREFER_BATCH, wants_batch
from ledger.api.schemas import APPEND_RESPONSES, BATCH_BODY, BATCH_RESPONSES, SUBMISSION_BODY
from ledger.core.jsonseq import split_array
from ledger.core.submission import loads
from ledger.errors import SubmissionError
from ledger.ops.append import Received

router = APIRouter(tags=["append"])

IDEMPOTENCY_KEY_RE = r"^[!-~]{1,200}$"  # visible ASCII; "#<i>" must still fit in 256
_APPLIED = {"Preference-Applied": PREFER_BATCH}  # RFC 7240: the batch receipt was given


def _with_key(raw: bytes, key: str | None, where: str = "") -> bytes | Received:
    """``raw`` itself, or ``raw`` with the submission it parses to, carrying ``key``.

    A body that is not JSON stays bytes (the ledger rejects and quarantines it as it is);
    one that is JSON but not an object goes on parsed, to be rejected without a second
    parse.  Raises SubmissionError when the body names another key.
    """
    if key is None:
        return raw
    try:
        obj = loads(raw)
    except SubmissionError:
        return raw
    if not isinstance(obj, dict):
        return Received(raw, obj)
    own = obj.get("idempotency_key")
    if own is not None and own != key:
        raise SubmissionError("the Idempotency-Key header and the body's idempotency_key "
                              "differ", code="idempotency_key_mismatch",
                              field=f"{where}idempotency_key")
    obj["idempotency_key"] = key
    return Received(raw, obj)


@router.post("/v1/entries", status_code=201, summary="Append one submission",
             openapi_extra=SUBMISSION_BODY, responses=APPEND_RESPONSES)
async def append_one(request: Request, principal: Principal = require("append"),
                     idempotency_key: str | None = Header(None, alias="Idempotency-Key",
                                                          pattern=IDEMPOTENCY_KEY_RE),
                     prefer: str | None = Header(None, include_in_schema=False),
                     ) -> JSONResponse:
    """Append one submission; the response (201, or 200 for a replay) carries the seq,
    entry hash, recorded_at and a signed receipt, and is sent only after the entry's
    transaction has committed.  Concurrent calls are group-committed."""
    raw = await request.body()
    item = _with_key(raw, idempotency_key)
    batch = wants_batch(prefer)
    scope = append_scope(principal.subject, principal.tenant)
    outcome = await request.app.state.service.committer.submit(item, scope, batch)
    if not outcome["ok"]:
        return rejection_response(outcome["error"])
    return JSONResponse(outcome, status_code=200 if outcome.get("replayed") else 201,
                        headers=_APPLIED if batch else None)


@router.post("/v1/entries/batch", summary="Append a batch (one transaction)",
             openapi_extra=BATCH_BODY, responses=BATCH_RESPONSES)
async def append_batch(request: Request, principal: Principal = require("append"),
                       idempotency_key: str | None = Header(None, alias="Idempotency-Key",
                                                            pattern=IDEMPOTENCY_KEY_RE),
                       prefer: str | None = Header(None, include_in_schema=False),
                       ) -> JSONResponse:
    """Append a JSON array of submissions under one lock and one commit.  200 with one
    result per item, in order: ``{"ok": true, seq, entry_hash, recorded_at, receipt}``
    or ``{"ok": false, "error": {...}}`` (rejected items are quarantined; they do not
    stop the others)."""
    service = request.app.state.service
    raw_items = split_array(await request.body(), service.settings.batch_max_items)
    items = [_with_key(raw, None if idempotency_key is None else f"{idempotency_key}#{i}",
                       f"[{i}].") for i, raw in enumerate(raw_items)]
    scope = append_scope(principal.subject, principal.tenant)
    batch = wants_batch(prefer)

    def work() -> list[dict[str, Any]]:
        results = service.append_many(items, scope) if items else []
        answers: list[dict[str, Any]] = service.finish(results, [scope] * len(results),
                                                       [batch] * len(results))
        return answers

    return JSONResponse({"results": await run_in_threadpool(work)},
                        headers=_APPLIED if batch else None)
