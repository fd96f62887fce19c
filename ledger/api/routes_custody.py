"""Redactions and legal holds over HTTP, for the ``custodian`` role (docs/http.md).

* ``POST /v1/redactions`` erases payloads through redaction entries (``dry_run`` lists
  them); ``report: true`` adds the signed erasure report.
* ``POST /v1/holds`` puts entries under a legal hold; ``POST /v1/holds/{seq}/release``
  releases one; ``GET /v1/holds`` lists the holds in force (custodians and auditors).

The entries' ``producer`` and ``requested_by`` are the token subject; the role recorded
is ``custodian``.  Bodies are strict JSON objects with the fields below and nothing else.

A token with a tenant is scoped to it (docs/tenants.md, "Custody per tenant"): it redacts
and holds its tenant's entries only (another tenant's seq is answered exactly as a missing
one), its redaction and hold entries join its tenant's chain, it releases the holds placed
in its tenant, it lists the holds over its tenant's entries, and it may not override the
operator's minimum retention (403 ``tenant_scope``, field ``override_minimum``).
"""

from __future__ import annotations

import os
from typing import Any

from fastapi import APIRouter, Path, Request
from starlette.concurrency import run_in_threadpool

from ledger.api.auth import TENANT_SCOPE_CODE, Principal, require
from ledger.api.schemas import CUSTODY_ERRORS, READ_ERRORS, custody_body
from ledger.core.strict import StrictError, closed, loads
from ledger.errors import BadRequest, Forbidden
from ledger.ops.custody import Ask, load_retention

router = APIRouter(tags=["custody"])
MAX_SEQ = 2**53 - 1
RETENTION_ENV = "LEDGER_RETENTION_POLICY"
REDACT_FIELDS = ("subject", "seqs", "payloads", "reason", "reference", "keep_attestation",
                 "override_minimum", "dry_run", "report")
HOLD_FIELDS = ("subject", "seqs", "reason", "reference")
RELEASE_FIELDS = ("reason", "reference")


async def _body(request: Request, fields: tuple[str, ...]) -> dict[str, Any]:
    try:
        doc = loads(await request.body())
        if not isinstance(doc, dict):
            raise BadRequest("the body must be a JSON object", code="bad_body")
        closed(doc, fields)
    except StrictError as exc:
        raise BadRequest(f"bad body: {exc.message}", code="bad_body", field=exc.field) from None
    for name in ("seqs", "payloads"):
        v = doc.get(name, [])
        if not isinstance(v, list) or (name == "seqs" and not all(
                type(s) is int and 0 <= s <= MAX_SEQ for s in v)) or \
                (name == "payloads" and not all(isinstance(p, str) for p in v)):
            raise BadRequest(f"{name} must be a list of "
                             f"{'seqs' if name == 'seqs' else 'payload names'}",
                             code="bad_body", field=name)
    for name in ("keep_attestation", "dry_run", "report"):
        if not isinstance(doc.get(name, False), bool):
            raise BadRequest(f"{name} must be true or false", code="bad_body", field=name)
    return doc


def _ask(doc: dict[str, Any], principal: Principal) -> Ask:
    return Ask(doc.get("reason"), doc.get("reference"), principal.subject,  # type: ignore[arg-type]
               "custodian", principal.subject, principal.tenant)


@router.post("/v1/redactions", summary="Erase payloads through redaction entries",
             responses=CUSTODY_ERRORS, openapi_extra=custody_body(REDACT_FIELDS))
async def redact(request: Request, principal: Principal = require("redact")) -> dict[str, Any]:
    """One object per entry (``seq``, ``payloads`` erased, ``already_erased``,
    ``redaction_seq``), the redaction seqs, and with ``report: true`` the signed erasure
    report.  409 ``entry_on_hold`` / ``minimum_retention``: nothing was erased."""
    doc = await _body(request, REDACT_FIELDS)
    if doc.get("subject") is None and not doc.get("seqs"):
        raise BadRequest("give subject and/or seqs", code="bad_body", field="seqs")
    if principal.tenant is not None and doc.get("override_minimum") is not None:
        raise Forbidden("the minimum retention is the operator's policy: only an "
                        "operator-level custodian overrides it", code=TENANT_SCOPE_CODE,
                        field="override_minimum",
                        detail={"rule": "a token with a tenant may not override the "
                                        "minimum retention", "refused": "override_minimum"})
    service = request.app.state.service
    ask = _ask(doc, principal)

    def work() -> dict[str, Any]:
        ledger = service.ledger
        out = ledger.redact(ask, subject=doc.get("subject"), seqs=doc.get("seqs", []),
                            payloads=doc.get("payloads") or ["all"],
                            keep_attestation=doc.get("keep_attestation", False),
                            override_minimum=doc.get("override_minimum"),
                            retention=load_retention(service.settings.retention_policy
                                                     or os.environ.get(RETENTION_ENV)),
                            dry_run=doc.get("dry_run", False), keyring=service.keyring)
        body: dict[str, Any] = {"entries": out.lines(), "redaction_seqs": out.redaction_seqs,
                                "dry_run": out.dry_run}
        if doc.get("report") and not out.dry_run:
            body["report"] = ledger.erasure_report(
                out, ask, service.keyring, keep_attestation=doc.get("keep_attestation", False),
                override_minimum=doc.get("override_minimum"))
        return body

    return await run_in_threadpool(work)


@router.post("/v1/holds", status_code=201, summary="Put entries under a legal hold",
             responses=CUSTODY_ERRORS, openapi_extra=custody_body(HOLD_FIELDS))
async def hold_add(request: Request, principal: Principal = require("hold")) -> dict[str, Any]:
    """``{"hold_seq"}``: the hold entry.  A subject is resolved to its entries now."""
    doc = await _body(request, HOLD_FIELDS)
    ledger = request.app.state.service.ledger
    seq = await run_in_threadpool(ledger.hold_add, _ask(doc, principal),
                                  subject=doc.get("subject"), seqs=doc.get("seqs", []))
    return {"hold_seq": seq}


@router.post("/v1/holds/{hold_seq:int}/release", summary="Release a legal hold",
             responses=CUSTODY_ERRORS, openapi_extra=custody_body(RELEASE_FIELDS))
async def hold_release(request: Request, hold_seq: int = Path(ge=0, le=MAX_SEQ),
                       principal: Principal = require("hold")) -> dict[str, Any]:
    """``{"hold_seq", "release_seq"}``; 404 ``no_such_hold`` when it is not in force."""
    doc = await _body(request, RELEASE_FIELDS)
    ledger = request.app.state.service.ledger
    seq = await run_in_threadpool(ledger.hold_release, _ask(doc, principal), hold_seq)
    return {"hold_seq": hold_seq, "release_seq": seq}


@router.get("/v1/holds", summary="The legal holds in force", responses=READ_ERRORS)
def holds(request: Request, principal: Principal = require("holds")) -> dict[str, Any]:
    """``{"holds": [{"hold_seq", "entries": [...]}]}``."""
    got = request.app.state.service.ledger.holds(principal.tenant)
    return {"holds": [{"hold_seq": h, "entries": e} for h, e in got.items()]}
