"""GET /v1/checkpoints, GET /v1/audits and GET /v1/reverify-runs: read-only listings of the
ledger's own history.

``/v1/checkpoints`` lists what ``/v1/checkpoint`` already shows one at a time (signed
notes, their cosigners and timestamp tokens' times) to the same roles.  ``/v1/audits``
lists the recorded audit runs with their findings (codes, seqs, expected and actual
hashes): auditors only, like every other layer-3 value.  ``/v1/reverify-runs`` lists the
re-verification runs recorded in the chain (``reverify_run`` entries, read checked) with
their disagreements, projected for the reader's layer (``ops.reverify_history.project``).

A token with a tenant sees only the runs recorded for its tenant (``ledger audit --tenant T
--record``, ``ledger reverify --tenant T --record``): never a run of the whole ledger, whose
findings may name other tenants' seqs.  Without such a run its lists are empty, and any
other run id is answered as a missing one (404), whatever the ledger holds.
"""

from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter, Path, Query, Request, Response

from ledger.api.auth import Principal, require
from ledger.api.routes_read import MAX_SEQ, check_params, layer_of
from ledger.api.schemas import READ_ERRORS
from ledger.ops.history import FindingSelection, findings_csv
from ledger.ops.reverify_history import MAX_RUNS, project

router = APIRouter(tags=["history"])


@router.get("/v1/checkpoints", summary="Stored checkpoints, smallest tree first",
            responses=READ_ERRORS)
def list_checkpoints(
        request: Request,
        after: int = Query(-1, ge=-1, le=MAX_SEQ, description="keyset: sizes > after"),
        limit: int = Query(100, ge=1, le=1000),
        consistency: bool = Query(False, description="add each checkpoint's consistency "
                                  "proof from the one before it"),
        principal: Principal = require("checkpoint")) -> dict[str, Any]:
    """``{"checkpoints": [{size, created_at, origin, root_b64, root_hex, signers,
    cosigners, timestamps, note, consistency?}], "next_after"}``: pass ``next_after`` as
    ``after`` for the next page.  ``consistency=true``: each also carries ``{"from",
    "path"}``, the RFC 9162 proof from the previous checkpoint's size to its own, from the
    stored tree (null for the first checkpoint)."""
    check_params(request, {"after", "limit", "consistency"})
    return request.app.state.service.reader.checkpoints(  # type: ignore[no-any-return]
        after, limit, consistency)


@router.get("/v1/audits", summary="Recorded audit runs, newest first (auditors)",
            responses=READ_ERRORS)
def list_audits(
        request: Request,
        before: int | None = Query(None, ge=1, le=MAX_SEQ,
                                   description="keyset: run ids < before"),
        limit: int = Query(100, ge=1, le=1000),
        principal: Principal = require("audits")) -> dict[str, Any]:
    """``{"runs": [{run_id, state, started_at, updated_at, range, next_seq, summary,
    findings, abstentions, ...}], "next_before"}``."""
    check_params(request, {"before", "limit"})
    return request.app.state.service.reader.audit_runs(  # type: ignore[no-any-return]
        before, limit, principal.tenant)


@router.get("/v1/audits/{run_id:int}", summary="One recorded audit run with its findings",
            responses=READ_ERRORS)
def get_audit(request: Request, run_id: int = Path(ge=1, le=MAX_SEQ, examples=[1]),
              code: str | None = Query(None, max_length=200,
                                       description="only findings of this code"),
              cls: str | None = Query(None, alias="class", max_length=64,
                                      description="only findings of this class"),
              field: str | None = Query(None, max_length=200,
                                        description="only findings about this field"),
              sort: Literal["seq", "-seq", "code", "severity"] = Query("seq"),
              offset: int = Query(0, ge=0, le=MAX_SEQ),
              limit: int | None = Query(None, ge=1, le=10_000,
                                        description="default: every selected finding"),
              format: Literal["json", "csv"] = Query("json", description="csv: the "
                                                     "selected findings as CSV"),
              principal: Principal = require("audits")) -> Any:
    """The run with ``incidents`` (its findings grouped by code, class and field, each with
    its count, seq ranges and explanation), ``finding_list`` (the selected findings, a page
    of ``finding_total``) and ``abstention_list``; 404 ``not_found``."""
    check_params(request, {"code", "class", "field", "sort", "offset", "limit", "format"})
    sel = FindingSelection(code=code, cls=cls, field=field, sort=sort, offset=offset,
                           limit=limit)
    doc = request.app.state.service.reader.audit_run(run_id, sel, principal.tenant)
    if format == "csv":
        return Response(findings_csv(doc), media_type="text/csv; charset=utf-8", headers={
            "Content-Disposition": f'attachment; filename="audit-run-{run_id}-findings.csv"'})
    return doc


@router.get("/v1/reverify-runs", summary="Recorded re-verification runs, newest first",
            responses=READ_ERRORS)
def list_reverify_runs(
        request: Request,
        before: int | None = Query(None, ge=1, le=MAX_SEQ, description="keyset: seqs < before"),
        limit: int = Query(20, ge=1, le=MAX_RUNS),
        principal: Principal = require("reverify_runs")) -> dict[str, Any]:
    """``{"layer", "runs": [{seq, recorded_at, integrity, outcome, summary, range,
    outcomes_proven, disagreements, ...}], "next_before"}``: the ``reverify_run`` entries,
    each read through the read check (``integrity``; a document that did not check is not
    served), with the disagreements of its run, ``outcomes_proven`` saying whether the
    stored outcomes are the ones its recorded digest proves.  Agents get the verdict, the
    counts and the seqs that disagree; developers also the engines, re-executors and
    differing fields (the values of status and developer fields only); auditors all."""
    check_params(request, {"before", "limit"})
    layer = layer_of(principal)
    page = request.app.state.service.reader.reverify_runs(before, limit, principal.tenant)
    return {"layer": layer, "runs": [project(r, layer) for r in page["runs"]],
            "next_before": page["next_before"]}
