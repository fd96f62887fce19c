"""GET /v1/export: stream matching entries as JSON Lines (memory: one page).

``format=rows`` (default): one ``ledger.ops.query.project``-ed row per line in
the caller's layer (what ``ledger query --all --format jsonl`` prints).
``format=records`` (auditors only): the ``entries.jsonl`` records of a
``ledger export`` bundle (envelope, payload bytes in base64, body/prev/entry
hashes), so every digest and chain link can be recomputed offline.  The
offline-verifiable *bundle* (manifest, proofs, signed checkpoint) is
``ledger export``; this endpoint is its streaming view.

The range is fixed when the request starts (``X-Ledger-Export-End``: the head
size then), so an export never chases concurrent appends.

A token with a tenant exports that tenant's rows only (``rows``, ``csv``, ``json``); the
record form that carries every payload -- ``format=records`` -- is refused to it (403
``tenant_scope``); its bundle is the tenant's complete export (``ledger export --tenant``,
docs/tenants.md), without filters, and -- for a tenant without entries -- without the proof
of its absence, which would name the tenants next to it (so it verifies not complete).
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from typing import Any

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import FileResponse, StreamingResponse
from starlette.background import BackgroundTask

from ledger.api.auth import Principal, operator_level, require
from ledger.api.routes_read import (
    MAX_SEQ,
    check_filters,
    check_params,
    entry_filters,
    filter_args,
    layer_of,
    visible_kinds,
)
from ledger.api.schemas import READ_ERRORS
from ledger.core.bundle import dump_line
from ledger.errors import Forbidden, UsageError
from ledger.ops.query import STRING_FILTERS, csv_lines, make_filters, with_window

router = APIRouter(tags=["read"])
CHUNK_BYTES = 64 * 1024
PAGE = 1000


def _chunks(lines: Iterator[bytes]) -> Iterator[bytes]:
    """Lines gathered into ~64 KiB writes (each write is one thread hop)."""
    buf: list[bytes] = []
    size = 0
    for line in lines:
        buf.append(line)
        size += len(line)
        if size >= CHUNK_BYTES:
            yield b"".join(buf)
            buf, size = [], 0
    if buf:
        yield b"".join(buf)


@router.get("/v1/export", summary="Stream matching entries as JSON Lines",
            response_class=StreamingResponse,
            responses={200: {"content": {"application/x-ndjson": {}}}, **READ_ERRORS})
def export(
        request: Request,
        given: dict[str, Any] = Depends(entry_filters),
        start: int = Query(0, ge=0, le=MAX_SEQ, description="first seq"),
        end: int | None = Query(None, ge=0, le=MAX_SEQ, description="seq end (exclusive)"),
        limit: int | None = Query(None, ge=1, le=MAX_SEQ, description="at most this many"),
        format: str = Query("rows", pattern="^(rows|records|csv|json)$"),
        has_findings: bool = Query(False, description="only entries the audit runs in "
                                   "scope found something on (developers, auditors)"),
        principal: Principal = require("export")) -> StreamingResponse:
    """Every matching entry in seq order (the caller's layer), streamed: JSON Lines
    (``rows``, ``records``), CSV with a header (``csv``: the columns of ``ledger query
    --format csv``) or one JSON array (``json``)."""
    check_params(request, set(STRING_FILTERS) | {"since", "until", "start", "end", "limit",
                                                 "format", "has_findings"})
    layer = layer_of(principal)
    if format == "records" and layer != "auditor":
        raise Forbidden("format=records carries every payload: auditors only",
                        code="forbidden_format", field="format")
    if format == "records":
        operator_level(principal, "/v1/export?format=records")
    check_filters(layer, {**given, "has_findings": has_findings})
    given["kind"] = visible_kinds(layer, given["kind"])
    f = make_filters(**filter_args(given), start=start, end=end, has_findings=has_findings)
    ledger = request.app.state.service.reader
    f = with_window(f, 0, ledger.head()["size"])
    rows: Iterator[Any] = ledger.export_records(f) if format == "records" else \
        ledger.iter_query(f, layer=layer, page=PAGE, tenant=principal.tenant)
    if limit is not None:
        rows = (row for _, row in zip(range(limit), rows, strict=False))
    media = {"csv": "text/csv; charset=utf-8", "json": "application/json"}.get(
        format, "application/x-ndjson")
    if format == "csv":
        lines = csv_lines(rows, layer)
    elif format == "json":
        lines = _array(rows)
    else:
        lines = rows if format == "records" else (dump_line(r) for r in rows)
    return StreamingResponse(_chunks(lines), media_type=media,
                             headers={"X-Ledger-Layer": layer,
                                      "X-Ledger-Export-End": str(f.end)})


def _array(rows: Iterator[dict[str, Any]]) -> Iterator[bytes]:
    """One JSON array, one row a line."""
    yield b"["
    sep = b"\n"
    for r in rows:
        yield sep + dump_line(r).rstrip(b"\n")
        sep = b",\n"
    yield b"\n]\n"


@router.get("/v1/export/bundle", summary="The signed export bundle of the matching entries, "
            "as a zip (auditors)", response_class=FileResponse,
            responses={200: {"content": {"application/zip": {}}}, **READ_ERRORS})
def export_bundle(
        request: Request,
        given: dict[str, Any] = Depends(entry_filters),
        start: int = Query(0, ge=0, le=MAX_SEQ, description="first seq"),
        end: int | None = Query(None, ge=0, le=MAX_SEQ, description="seq end (exclusive)"),
        principal: Principal = require("export")) -> FileResponse:
    """What ``ledger export --out DIR`` writes for the same filters (manifest signed by the
    ledger key, entries with every payload, inclusion proofs, the signed checkpoint, the
    JWKS), in one zip: unpack it and run ``ledger verify-export DIR``.  Auditors only (the
    records carry every payload); signs a checkpoint when none stored covers the range.
    There is no ``has_findings``: a bundle is verified offline against its filters, and the
    audit runs that selection depends on are not in it."""
    check_params(request, set(STRING_FILTERS) | {"since", "until", "start", "end"})
    layer = layer_of(principal)
    if layer != "auditor":
        raise Forbidden("an export bundle carries every payload: auditors only",
                        code="forbidden_format", field="format")
    check_filters(layer, given)
    service = request.app.state.service
    f = make_filters(**filter_args(given), start=start, end=end)
    if principal.tenant is not None and (f != make_filters() or start or end is not None):
        raise UsageError("a tenant's bundle is its complete chain (docs/tenants.md): no "
                         "filter, no --from/--to", code="tenant_export_filtered", field="tenant")
    work = tempfile.mkdtemp(prefix="ledger-export-")
    try:
        # no absence proof for a tenant token: it would show the tenant its neighbours
        path, manifest = service.ledger.export_zip(service.settings.keys_dir, f, work,
                                                   tenant=principal.tenant,
                                                   absence_proof=False)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    return FileResponse(path, media_type="application/zip", filename=path.name,
                        headers={"X-Ledger-Export-End": str(manifest["range"]["end"]),
                                 "X-Ledger-Export-Entries": str(manifest["counts"]["entries"])},
                        background=BackgroundTask(shutil.rmtree, work, True))
