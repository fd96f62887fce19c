"""GET /v1/entries/{seq} and GET /v1/entries: layered reads.

Every row leaves through ``ledger.ops.query.project`` with the caller's layer
(auditor: everything; developer: layers 1-2; agent: layer 1 only).  Filters
are layered too: a caller may filter only on fields its layer shows
(``LAYER_FIELDS``), since a filter on a hidden field would reveal that field
one yes/no at a time; anything else is 403 ``forbidden_filter``.

A token with a tenant reads that tenant's entries only (``principal.tenant`` goes down to
every query, count, pick-list and hash look-up): another tenant's entry is answered exactly
as a seq or hash that does not exist.  ``/v1/aggregates`` counts that tenant's entries
only for such a token (``ledger.ops.aggregates``: its covers name no seq or size of the
ledger).
"""

from __future__ import annotations

from typing import Any, Literal, TypedDict

from fastapi import APIRouter, Depends, Path, Query, Request

from ledger.api.auth import Principal, require
from ledger.api.proofs import entry_proof
from ledger.api.schemas import READ_ERRORS
from ledger.errors import BadRequest, Forbidden, NotFound
from ledger.ops.query import STRING_FILTERS, make_filters
from ledger.ops.view import LAYER_FIELDS

router = APIRouter(tags=["read"])

MAX_SEQ = 2**53 - 1  # beyond any ledger; keeps path/query integers inside SQL's bigint
LAYER_NAME = {3: "auditor", 2: "developer", 1: "agent"}


class _TextLimit(TypedDict):
    """The keyword arguments of ``Query`` that bound a text filter (``**TEXT``)."""

    max_length: int


TEXT: _TextLimit = {"max_length": 1024}


def entry_filters(
        kind: list[str] = Query([], **TEXT), engine: list[str] = Query([], **TEXT),
        status: list[str] = Query([], **TEXT), constraint_id: list[str] = Query([], **TEXT),
        proof_ref: list[str] = Query([], **TEXT), subject: list[str] = Query([], **TEXT),
        producer: list[str] = Query([], **TEXT), att_verdict: list[str] = Query([], **TEXT),
        att_kid: list[str] = Query([], **TEXT),
        since: str | None = Query(None, max_length=64, description="RFC 3339, inclusive",
                                  json_schema_extra={"format": "date-time"}),
        until: str | None = Query(None, max_length=64, description="RFC 3339, exclusive",
                                  json_schema_extra={"format": "date-time"}),
) -> dict[str, Any]:
    """The query filters shared by the list and export endpoints (each text filter is
    repeatable: any of its values; different filters must all match)."""
    return {"kind": kind, "engine": engine, "status": status, "constraint_id": constraint_id,
            "proof_ref": proof_ref, "subject": subject, "producer": producer,
            "att_verdict": att_verdict, "att_kid": att_kid, "since": since, "until": until}
def layer_of(principal: Principal) -> str:
    return LAYER_NAME[principal.layer]


def check_params(request: Request, allowed: set[str]) -> None:
    unknown = sorted(set(request.query_params.keys()) - allowed)
    if unknown:
        raise BadRequest(f"unknown query parameter {unknown[0]!r}", code="unknown_parameter",
                         field=unknown[0])


def filter_args(given: dict[str, Any]) -> dict[str, Any]:
    """``make_filters`` arguments from the query: a text filter given no value is no filter;
    ``since``/``until`` go as given, so an empty one is refused like any other value that
    is not an RFC 3339 time (400 ``usage`` naming it), never read as "no filter"."""
    return {k: v if k in ("since", "until") else (v or None) for k, v in given.items()}


def check_filters(layer: str, given: dict[str, Any]) -> None:
    """Filtering on a field the layer cannot see is refused (it would leak it)."""
    visible = set(LAYER_FIELDS[layer])
    for name, value in given.items():
        if not value:
            continue
        column = {"since": "recorded_at", "until": "recorded_at",
                  "has_findings": "findings"}.get(name, name)
        if column not in visible:
            raise Forbidden(f"the {layer} layer cannot filter on {name}",
                            code="forbidden_filter", field=name)


def visible_kinds(layer: str, kinds: list[str]) -> list[str]:
    """Agents see verification results only, never key events or audit runs (operational
    internals): their queries are limited to ``kind=result``, and asking for another kind
    is 403 ``forbidden_filter``.  Other layers: as asked."""
    if layer != "agent":
        return kinds
    if any(k != "result" for k in kinds):
        raise Forbidden("the agent layer sees result entries only", code="forbidden_filter",
                        field="kind")
    return ["result"]


@router.get("/v1/entries/{seq:int}", summary="One entry (layered), optionally with its proof",
            responses=READ_ERRORS)
def get_entry(request: Request, seq: int = Path(ge=0, le=MAX_SEQ),
              proof: bool = Query(False, description="add the inclusion proof against the "
                                  "latest stored checkpoint (or the one of tree_size)"),
              tree_size: int | None = Query(None, ge=1, le=MAX_SEQ + 1,
                                            description="with proof=true: prove to the "
                                            "stored checkpoint of this tree size"),
              principal: Principal = require("read")) -> dict[str, Any]:
    """The entry at ``seq`` projected for the caller's layer.  ``proof=true``: auditors get
    the full ``ledger-inclusion-proof/1`` bundle; other readers get the audit path, the
    entry hash and the signed checkpoint (no envelope: it names layer-3 fields).  With
    ``tree_size=N`` the proof leads to the stored checkpoint of size N (404
    ``not_checkpointed`` naming ``tree_size`` if none; nothing is ever signed for it);
    without, to the latest stored checkpoint (docs/http.md: when one is signed for it)."""
    check_params(request, {"proof", "tree_size"})
    if tree_size is not None and not proof:
        raise BadRequest("tree_size needs proof=true", field="tree_size")
    service = request.app.state.service
    layer = layer_of(principal)
    f = make_filters(start=seq, end=seq + 1, kind=visible_kinds(layer, []) or None)
    page = service.reader.query_page(f, limit=1, layer=layer, tenant=principal.tenant)
    if not page.rows:  # also another tenant's entry: the same answer as a missing seq
        raise NotFound(f"no entry with seq {seq}", field="seq")
    out = {"layer": layer, "entry": page.rows[0]}
    if proof:
        out["proof"] = entry_proof(service, seq, layer, tree_size)
    return out


@router.get("/v1/entries", summary="Query entries (filters, keyset pagination)",
            responses=READ_ERRORS)
def list_entries(
        request: Request,
        given: dict[str, Any] = Depends(entry_filters),
        after: int = Query(-1, ge=-1, le=MAX_SEQ, description="keyset: rows with seq > after"),
        limit: int = Query(100, ge=1, le=1000),
        has_findings: bool = Query(False, description="only entries the latest complete "
                                   "audit run (or a later partial run) found something on"),
        order: Literal["asc", "desc"] = Query("asc", description="asc: oldest first from "
                                              "after; desc: newest first from below before"),
        before: int | None = Query(None, ge=0, le=MAX_SEQ + 1,
                                   description="keyset (order=desc): rows with seq < before"),
        count: bool = Query(False, description="add index_total: how many entries the "
                            "indexed columns select (candidates, not verified matches)"),
        principal: Principal = require("read")) -> dict[str, Any]:
    """One page of matching entries in seq order, projected for the caller's layer, each
    checked against what was hashed on the way out (its ``integrity`` object,
    docs/reads.md).  Each text filter is repeatable (any of the values); different filters
    must all match.  ``next_after`` is the ``after`` of the next page (null: no more rows
    now); ``flagged``, ``matched`` and ``with_findings`` count this page's rows that are
    not verified, whose proven values match the filters, and that have audit findings."""
    names = set(STRING_FILTERS) | {"since", "until", "after", "limit", "has_findings",
                                   "order", "before", "count"}
    check_params(request, names)
    if order == "asc" and before is not None:
        raise BadRequest("before is the keyset of order=desc (use after with order=asc)",
                         code="invalid_value", field="before")
    if order == "desc" and after != -1:
        raise BadRequest("after is the keyset of order=asc (use before with order=desc)",
                         code="invalid_value", field="after")
    service = request.app.state.service
    layer = layer_of(principal)
    check_filters(layer, {**given, "has_findings": has_findings})
    given["kind"] = visible_kinds(layer, given["kind"])
    limit = min(limit, service.settings.page_max)
    f = make_filters(**filter_args(given), has_findings=has_findings)  # UsageError: 400
    page = service.reader.query_page(f, after=after, limit=limit, layer=layer, order=order,
                                     before=before, tenant=principal.tenant)
    out = {"layer": layer, "entries": page.rows, "next_after": page.next_after,
           **page.counts()}
    if order == "desc":
        out["order"], out["next_before"] = "desc", page.next_before
    if count:
        out["index_total"] = service.reader.count_index_matches(f, principal.tenant)
    return out


@router.get("/v1/entries/values", summary="Pick-list of a filter: the values the index holds",
            responses=READ_ERRORS)
def filter_values(request: Request,
                  field: Literal["kind", "status", "engine", "producer", "att_verdict",
                                 "att_kid"] = Query(...),
                  principal: Principal = require("read")) -> dict[str, Any]:
    """``{"field", "values", "truncated"}``: the distinct values the indexed column holds
    (sorted, at most 200), to offer as filter choices.  They are what the index can find,
    not entries' values (a column rewritten behind the ledger's back lists its stored
    value; the rows it finds come back flagged).  403 ``forbidden_filter`` for a field the
    caller's layer cannot filter on."""
    check_params(request, {"field"})
    layer = layer_of(principal)
    check_filters(layer, {field: True})
    return request.app.state.service.reader.filter_values(  # type: ignore[no-any-return]
        field, layer, principal.tenant)


@router.get("/v1/entries/by-hash/{entry_hash}", summary="The seq of an entry hash (auditors)",
            responses=READ_ERRORS)
def entry_by_hash(request: Request,
                  entry_hash: str = Path(min_length=64, max_length=71,
                                         description="64 hex digits, optionally sha256:"),
                  principal: Principal = require("read")) -> dict[str, Any]:
    """``{"seq"}`` of the entry whose stored entry hash is ``entry_hash``; read it with
    ``GET /v1/entries/{seq}`` (checked like any read).  Auditors only (hashes are layer 3);
    404 ``not_found``."""
    check_params(request, set())
    layer = layer_of(principal)
    check_filters(layer, {"entry_hash": True})
    seq = request.app.state.service.reader.seq_of_entry_hash(entry_hash, principal.tenant)
    if seq is None:
        raise NotFound("no entry has this entry hash", field="entry_hash")
    return {"seq": seq}


@router.get("/v1/aggregates", summary="Counts of result entries over time, for charts",
            responses=READ_ERRORS)
def aggregates(
        request: Request,
        since: str | None = Query(None, max_length=64, description="RFC 3339, inclusive"),
        until: str | None = Query(None, max_length=64, description="RFC 3339, exclusive"),
        bucket: Literal["auto", "hour", "day", "week"] = Query("auto"),
        engine: list[str] = Query([], **TEXT), producer: list[str] = Query([], **TEXT),
        principal: Principal = require("read")) -> dict[str, Any]:
    """Bucketed counts of the result entries over the whole ledger (a token with a tenant:
    over its tenant's entries only, each read-checked now) at the caller's layer
    (agents: by status; developers: status x engine; auditors: status x engine x producer,
    attestation verdicts and audit findings), from the latest complete audit run's
    aggregates and the entries after it checked now; ``covers`` says which run, up to which
    seq and how many live rows (docs/http.md).  A row that did not verify is counted as
    ``flagged``, never under its values."""
    check_params(request, {"since", "until", "bucket", "engine", "producer"})
    layer = layer_of(principal)
    check_filters(layer, {"engine": engine, "producer": producer})
    return request.app.state.service.reader.aggregates(  # type: ignore[no-any-return]
        layer, since=since, until=until, bucket=bucket, engines=engine, producers=producer,
        tenant=principal.tenant)
