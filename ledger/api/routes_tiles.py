"""C2SP tlog-tiles (docs/tiles.md): ``GET /checkpoint``, ``GET /tile/<L>/<N>[.p/<W>]`` and
``GET /tile/entries/<N>[.p/<W>]``, bounded by the latest stored checkpoint.

Hashes and signed notes, like the proofs, so every reading role may fetch the checkpoint
and the hash tiles; entry bundles carry every payload (export records), so auditors only
(as ``/v1/export?format=records``).  Full hash tiles never change and are served with a
one-year immutable cache lifetime; partial tiles and the checkpoint must not be cached;
full entry bundles may be cached for a day (an erasure rewrites them).  A bad path is a
400 ``bad_tile_path`` naming the element (``L``, ``N``, ``W``), a tile beyond the
checkpoint a 404 ``tile_not_found``.

A token with a tenant may read the checkpoint and the hash tiles (the tree is global: hashes
and the tree size), never entry bundles (every tenant's records; 403 ``tenant_scope``).
"""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import PlainTextResponse, Response

from ledger.api.auth import Principal, operator_level, require
from ledger.api.routes_read import layer_of
from ledger.api.schemas import READ_ERRORS
from ledger.core.tiles import parse_tile_path
from ledger.errors import Forbidden, NotFound

router = APIRouter(tags=["tiles"])

IMMUTABLE = "public, max-age=31536000, immutable"
NO_CACHE = "no-cache"
BUNDLE = "private, max-age=86400"
OCTETS = "application/octet-stream"


@router.get("/checkpoint", summary="The latest signed checkpoint (C2SP tlog-tiles)",
            response_class=PlainTextResponse,
            responses={200: {"content": {"text/plain": {}}}, **READ_ERRORS})
def checkpoint(request: Request, principal: Principal = require("checkpoint"),
               ) -> PlainTextResponse:
    """The signed note of ``/v1/checkpoint``, at the path tile clients expect; not
    cacheable.  404 ``no_checkpoint`` before the first one."""
    note = request.app.state.service.reader.latest_cosigned_note()
    if note is None:
        raise NotFound("no checkpoint has been signed yet", code="no_checkpoint")
    return PlainTextResponse(note, media_type="text/plain; charset=utf-8",
                             headers={"Cache-Control": NO_CACHE})


@router.get("/tile/{path:path}", summary="A Merkle tile or an entry bundle (C2SP tlog-tiles)",
            response_class=Response,
            responses={200: {"content": {OCTETS: {}}}, **READ_ERRORS})
def tile(path: str, principal: Principal = require("checkpoint"), *,
         request: Request) -> Response:
    """``tile/<L>/<N>[.p/<W>]``: the W (full: 256) hashes at Merkle level 8·L from node
    256·N; ``tile/entries/<N>[.p/<W>]``: the export record lines of those leaves."""
    t = parse_tile_path("tile/" + path)
    if t.level is None and layer_of(principal) != "auditor":
        raise Forbidden("entry bundles carry every payload: auditors only",
                        code="forbidden_bundle", field="L")
    if t.level is None:
        operator_level(principal, "entry bundles (/tile/entries)")
    data = request.app.state.service.reader.tile(t)
    cache = (IMMUTABLE if t.level is not None else BUNDLE) if t.full else NO_CACHE
    return Response(data, media_type=OCTETS, headers={"Cache-Control": cache})
