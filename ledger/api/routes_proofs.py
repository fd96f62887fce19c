"""GET /v1/proofs/consistency: the RFC 9162 consistency proof between two stored
checkpoints, for readers who keep a trusted checkpoint (docs/reader.md).

Hashes and signed notes only, so every reading role (auditor, developer, agent) may ask;
nothing is signed for a request (``ledger.api.proofs``).
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Query, Request

from ledger.api.auth import Principal, require
from ledger.api.proofs import consistency_answer
from ledger.api.routes_read import MAX_SEQ, check_params
from ledger.api.schemas import READ_ERRORS

router = APIRouter(tags=["proofs"])


@router.get("/v1/proofs/consistency",
            summary="Consistency proof between two stored checkpoints (RFC 9162)",
            responses=READ_ERRORS)
def consistency(request: Request,
                old_size: int = Query(alias="from", ge=1, le=MAX_SEQ + 1,
                                      description="tree size of the older stored checkpoint"),
                new_size: int = Query(alias="to", ge=1, le=MAX_SEQ + 1,
                                      description="tree size of the newer stored checkpoint"),
                principal: Principal = require("checkpoint")) -> dict[str, Any]:
    """The ``ledger-consistency-proof/1`` bundle (docs/format-checkpoint.md): ``origin``,
    ``old`` and ``new`` (the two signed notes, with their stored cosignatures), ``path``
    (hex hashes), and ``timestamps`` when the newer one has any.  400 naming ``from``/``to``
    for a bad value or ``from > to``; 404 ``not_checkpointed`` naming the size no stored
    checkpoint has."""
    check_params(request, {"from", "to"})
    return consistency_answer(request.app.state.service, old_size, new_size)
