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
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import StreamingResponse

from ledger.api.auth import Principal, require
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
from ledger.errors import Forbidden
from ledger.ops.query import (
    STRING_FILTERS,
    Filters,
    make_filters,
    with_window,
)

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


def _rows(ledger: Any, f: Filters, layer: str) -> Iterator[bytes]:
    for row in ledger.iter_query(f, layer=layer, page=PAGE):
        yield dump_line(row)


@router.get("/v1/export", summary="Stream matching entries as JSON Lines",
            response_class=StreamingResponse,
            responses={200: {"content": {"application/x-ndjson": {}}}, **READ_ERRORS})
def export(
        request: Request,
        given: dict[str, Any] = Depends(entry_filters),
        start: int = Query(0, ge=0, le=MAX_SEQ, description="first seq"),
        end: int | None = Query(None, ge=0, le=MAX_SEQ, description="seq end (exclusive)"),
        limit: int | None = Query(None, ge=1, le=MAX_SEQ, description="at most this many"),
        format: str = Query("rows", pattern="^(rows|records)$"),
        principal: Principal = require("export")) -> StreamingResponse:
    """JSON Lines of every matching entry in seq order (the caller's layer), streamed."""
    check_params(request, set(STRING_FILTERS) | {"since", "until", "start", "end", "limit",
                                                 "format"})
    layer = layer_of(principal)
    if format == "records" and layer != "auditor":
        raise Forbidden("format=records carries every payload: auditors only",
                        code="forbidden_format", field="format")
    check_filters(layer, given)
    given["kind"] = visible_kinds(layer, given["kind"])
    f = make_filters(**filter_args(given), start=start, end=end)
    ledger = request.app.state.service.reader
    f = with_window(f, 0, ledger.head()["size"])
    lines = ledger.export_records(f) if format == "records" else _rows(ledger, f, layer)
    if limit is not None:
        lines = (line for _, line in zip(range(limit), lines, strict=False))
    return StreamingResponse(_chunks(lines), media_type="application/x-ndjson",
                             headers={"X-Ledger-Layer": layer,
                                      "X-Ledger-Export-End": str(f.end)})
