"""Verified reads from C2SP tlog-tiles, without I/O (docs/reader.md#reading-from-tiles).

The tiles (docs/tiles.md) are published by ``ledger tiles write DIR`` (static files behind
any web server, or the directory itself) or served by ``ledger serve`` (``/checkpoint``,
``/tile/...``).  A reader holding a trusted state (``ledger.client.trust_state``) needs no
proof endpoint: it fetches the signed checkpoint and the few tiles a proof needs, and
computes every proof itself.  No tile is trusted as fetched:

* the *right-edge* tiles of a tree (the partial tile of every level) must reproduce the
  signed root: every hash they hold is a leaf of the RFC 6962 fold of the tree's maximal
  complete subtrees (``ledger.core.merkle.range_nodes`` / ``hash_range``);
* a *full* tile (256 hashes) must hash (RFC 6962 MTH of its hashes) to its entry in the
  tile one level up, itself verified the same way, up to an edge tile -- as Go's
  ``sumdb/tlog.TileHashReader`` does.

A tile whose hashes do not check is refused with ``TileRejected`` (``tile_hash_mismatch``),
one of the wrong length with ``tile_size_mismatch``, one that is absent with
``tile_missing``.  From verified hashes the inclusion proof of a leaf
(``merkle.inclusion_ids`` / ``fold_inclusion``) and the consistency proof between two
sizes (``merkle.consistency_nodes`` / ``resolve_proof``) are assembled and verified with the
ledger's own verifiers (``merkle.verify_consistency``, ``verify.proof``): an entry is
proven from its record in the entry bundle as a ``ledger-inclusion-proof/1`` bundle made of
that record, the path computed from the tiles and the trusted checkpoint.

The flows yield :class:`ledger.client.reader_core.Fetch` steps with paths relative to the
tile prefix (``checkpoint``, ``tile/0/x001/234.p/7``) and ``raw=True``; the driver answers
``(status, bytes)``.
"""

from __future__ import annotations

import json
from collections.abc import Generator
from typing import Any

from ledger.client.reader_core import (
    Fetch,
    Save,
    Step,
    VerifiedEntry,
    judge_checkpoint,
    proof_error,
)
from ledger.client.reader_http import refusal
from ledger.client.trust_state import TrustedState
from ledger.core.entry import hash_hex
from ledger.core.merkle import (
    CompactRange,
    NodeId,
    consistency_nodes,
    fold_inclusion,
    hash_range,
    inclusion_ids,
    node_ids,
    range_nodes,
    resolve_proof,
)
from ledger.core.merkle import verify_consistency as merkle_consistency
from ledger.core.tenant import DEFAULT_TENANT
from ledger.core.tiles import (
    CHECKPOINT,
    HASH_SIZE,
    TILE_HEIGHT,
    TILE_WIDTH,
    Tile,
    level_width,
    split_tile,
    tree_levels,
)
from ledger.errors import (
    EntryUnverified,
    Forked,
    NotFound,
    ProofError,
    RolledBack,
    TileRejected,
)
from ledger.verify.proof import (
    ENTRY_KEYS,
    INCLUSION_FORMAT,
    PAYLOAD_KEYS,
    TENANT_ENTRY_KEYS,
    verify_inclusion_bundle,
)

TILES_LAYER = "tiles"  # VerifiedEntry.layer of an entry read from an entry bundle

Flow = Generator[Step, Any, Any]


def answered(path: str, status: int, data: Any) -> bytes:
    """The bytes of a tile prefix's answer for ``path``.  401/403 are AccessDenied and 5xx
    LedgerUnavailable (``reader_http.refusal``: not the tiles' fault); any other answer
    without the bytes is TileRejected ``tile_missing``."""
    if status in (401, 403) or status >= 500:
        try:  # the problem document of a ledger serve, if that is what answered
            doc = json.loads(data) if isinstance(data, bytes) else None
        except ValueError:
            doc = None
        if isinstance(doc, dict) and "error" not in doc:
            doc = {"error": doc}
        exc = refusal(status, doc)
        assert exc is not None
        raise exc
    if status >= 300 or not isinstance(data, bytes):
        raise TileRejected(f"{path} is missing (answered {status})", code="tile_missing",
                           field="tile", detail={"tile": path, "status": status})
    return data


def subtree_hash(hashes: list[bytes]) -> bytes:
    """RFC 6962 MTH of ``hashes`` taken as the leaves of a tree (a tile's hashes are the
    nodes of one level; their MTH is the node of that range ``TILE_HEIGHT`` levels up)."""
    edge = CompactRange()
    edge.extend(hashes)
    return edge.root()


def _tile_path(tile: Tile) -> str:
    return tile.path


class TreeTiles:
    """The verified hashes of the tree of ``size`` leaves with ``root`` (a verified
    checkpoint's), fetched tile by tile.  Every hash handed out (:meth:`node`) comes from a
    tile that was checked against ``root``; ``fetched`` lists the paths read, in order."""

    def __init__(self, size: int, root: bytes) -> None:
        self.size, self.root = size, root
        self.verified: dict[tuple[int, int], list[bytes]] = {}  # (level, index) -> hashes
        self.fetched: list[str] = []
        self._edge_checked = False

    def _width(self, level: int, index: int) -> int:
        return min(TILE_WIDTH, level_width(self.size, level) - index * TILE_WIDTH)

    def _fetch(self, tile: Tile) -> Generator[Step, Any, list[bytes]]:
        status, data = yield Fetch(_tile_path(tile), raw=True)
        self.fetched.append(tile.path)
        data = answered(tile.path, status, data)
        if len(data) != tile.width * HASH_SIZE:
            raise TileRejected(f"{tile.path} has {len(data)} bytes, a tile of width"
                               f" {tile.width} has {tile.width * HASH_SIZE}",
                               code="tile_size_mismatch", field="tile",
                               detail={"tile": tile.path, "bytes": len(data),
                                       "expected": tile.width * HASH_SIZE})
        return split_tile(data)

    def check_edge(self) -> Flow:
        """Fetch the right-edge (partial) tile of every level and check that they
        reproduce the root.  Raises TileRejected (``tile_hash_mismatch``)."""
        if self._edge_checked or self.size == 0:
            return
        got: dict[tuple[int, int], list[bytes]] = {}
        for level in tree_levels(self.size):
            width = level_width(self.size, level) % TILE_WIDTH
            if width:
                index = level_width(self.size, level) // TILE_WIDTH
                got[(level, index)] = yield from self._fetch(Tile(level, index, width))
        parts = [self._block(got, node) for node in range_nodes(0, self.size)]
        if hash_range(parts) != self.root:
            paths = [Tile(lv, ix, len(h)).path for (lv, ix), h in got.items()]
            raise TileRejected(f"the right-edge tiles of tree size {self.size} do not hash to"
                               f" the signed root {self.root.hex()}", code="tile_hash_mismatch",
                               field="tile", detail={"tiles": paths, "tree_size": self.size})
        self.verified.update(got)
        self._edge_checked = True

    @staticmethod
    def _block(tiles: dict[tuple[int, int], list[bytes]], node: NodeId) -> bytes:
        """The hash of stored node ``node`` from the tile holding its descendants at the
        tile level below it (that tile must be in ``tiles``)."""
        level, idx = node
        band, rest = divmod(level, TILE_HEIGHT)
        first = idx << rest
        tile_index, pos = divmod(first, TILE_WIDTH)
        hashes = tiles[(band, tile_index)]
        block = hashes[pos:pos + (1 << rest)]
        if len(block) != 1 << rest:
            raise KeyError(node)
        return block[0] if rest == 0 else subtree_hash(block)

    def tile(self, level: int, index: int) -> Generator[Step, Any, list[bytes]]:
        """The verified hashes of tile (``level``, ``index``) of this tree."""
        key = (level, index)
        if key in self.verified:
            return self.verified[key]
        width = self._width(level, index)
        if width <= 0:
            raise ValueError(f"tile {level}/{index} is beyond tree size {self.size}")
        if width < TILE_WIDTH:  # the right edge: checked against the root
            yield from self.check_edge()
            return self.verified[key]
        hashes = yield from self._fetch(Tile(level, index))
        parent = yield from self.node((TILE_HEIGHT * (level + 1), index))
        if subtree_hash(hashes) != parent:
            path = Tile(level, index).path
            raise TileRejected(f"{path} does not hash to its entry in the tile above it"
                               f" (tree size {self.size}, signed root {self.root.hex()})",
                               code="tile_hash_mismatch", field="tile",
                               detail={"tile": path, "tree_size": self.size})
        self.verified[key] = hashes
        return hashes

    def node(self, node: NodeId) -> Generator[Step, Any, bytes]:
        """The verified hash of the complete subtree ``node`` (``ledger.core.merkle`` id)."""
        level, idx = node
        band, rest = divmod(level, TILE_HEIGHT)
        yield from self.tile(band, (idx << rest) // TILE_WIDTH)
        return self._block(self.verified, node)

    def nodes(self, ids: list[NodeId]) -> Generator[Step, Any, dict[NodeId, bytes]]:
        yield from self.check_edge()
        out: dict[NodeId, bytes] = {}
        for i in ids:
            out[i] = yield from self.node(i)
        return out


def inclusion_path_from_tiles(tree: TreeTiles, index: int) -> Generator[Step, Any, list[bytes]]:
    """The RFC 9162 inclusion proof of leaf ``index`` in ``tree``, from verified tiles."""
    ids, ephemeral = inclusion_ids(index, tree.size)
    nodes = yield from tree.nodes(ids)
    return fold_inclusion(ids, ephemeral, nodes)


def consistency_from_tiles(tree: TreeTiles, old_size: int) -> Generator[Step, Any, list[bytes]]:
    """The RFC 9162 consistency proof from ``old_size`` to ``tree.size``, from verified
    tiles of the larger tree."""
    specs = consistency_nodes(old_size, tree.size)
    nodes = yield from tree.nodes(node_ids(specs))
    return resolve_proof(specs, nodes)


# -- the flows (driven by LedgerReader / AsyncLedgerReader with tiles=True) ---------------
def tiles_refresh_flow(state: TrustedState) -> Generator[Step, Any, TrustedState]:
    """Fetch ``checkpoint`` from the tile prefix and accept it only as a consistent
    extension of the trusted one, the consistency proof computed from its tiles (saved
    before returning).  Raises RolledBack, Forked, CheckpointRejected, TileRejected."""
    status, body = yield Fetch(CHECKPOINT, raw=True)
    if status == 404 and state.tree_size > 0:
        raise RolledBack(f"the tiles have no checkpoint; the verified size is"
                         f" {state.tree_size}", field="tree_size")
    body = answered(CHECKPOINT, status, body)
    try:
        note = body.decode("utf-8")
    except UnicodeDecodeError:
        note = body.decode("utf-8", "replace")
    cp = judge_checkpoint(state, note)
    if cp is None:
        return state
    tree = TreeTiles(cp.size, cp.root_hash)
    yield from tree.check_edge()
    if state.tree_size > 0:
        path = yield from consistency_from_tiles(tree, state.tree_size)
        try:
            merkle_consistency(state.tree_size, cp.size, path, state.root_hash, cp.root_hash)
        except ProofError as exc:
            raise Forked(f"the tiles of size {cp.size} do not extend the verified size"
                         f" {state.tree_size}: {exc.message}", code="consistency_invalid",
                         field="tree_size") from exc
    new = state.advanced(cp, note)
    yield Save(new)
    return new


def _record(seq: int, data: bytes, path: str) -> dict[str, Any]:
    lines = data.split(b"\n")
    pos = seq % TILE_WIDTH
    if lines[-1] != b"" or pos >= len(lines) - 1:
        raise TileRejected(f"{path} does not hold {seq % TILE_WIDTH + 1} records ending in"
                           " LF", code="bundle_malformed", field="tile", detail={"tile": path})
    try:
        record = json.loads(lines[pos])
    except ValueError:
        record = None
    if not isinstance(record, dict) or record.get("seq") != seq:
        raise TileRejected(f"line {pos} of {path} is not the record of seq {seq}",
                           code="bundle_malformed", field="tile", detail={"tile": path})
    return record


def proof_bundle(state: TrustedState, seq: int, record: dict[str, Any],
                 path: list[bytes]) -> dict[str, Any]:
    """The ``ledger-inclusion-proof/1`` bundle of an entry bundle's record, the inclusion
    path computed from tiles and the trusted checkpoint (verified by
    ``ledger.verify.proof.verify_inclusion_bundle`` as any proof bundle is)."""
    entry = {k: record.get(k) for k in ENTRY_KEYS if k != "payloads"}
    if record.get("tenant", DEFAULT_TENANT) != DEFAULT_TENANT:  # a record that names its
        entry.update({k: record.get(k) for k in TENANT_ENTRY_KEYS})  # tenant and tseq
    payloads = record.get("payloads")
    if isinstance(payloads, dict):
        entry["payloads"] = {n: ({k: v for k, v in p.items() if k in PAYLOAD_KEYS}
                                 if isinstance(p, dict) else p) for n, p in payloads.items()}
    else:
        entry["payloads"] = payloads
    try:
        env = json.loads(str(record.get("envelope")))
    except ValueError:
        env = None
    ledger_id = state.ledger_id or (env.get("ledger") if isinstance(env, dict) else None)
    return {"format": INCLUSION_FORMAT, "origin": state.origin, "ledger_id": str(ledger_id),
            "seq": seq, "tree_size": state.tree_size, "leaf_index": seq, "entry": entry,
            "inclusion_path": [h.hex() for h in path], "checkpoint": state.checkpoint}


def tiles_get_flow(state: TrustedState, seq: int,
                   ) -> Generator[Step, Any, tuple[VerifiedEntry, TrustedState]]:
    """Entry ``seq`` from its entry bundle, proven in the trusted tree from tiles (the
    state advanced first when it does not cover ``seq``).  Returns the verified entry (its
    ``entry``: the export record, docs/export.md) and the (possibly new) state."""
    if seq >= state.tree_size:
        state = yield from tiles_refresh_flow(state)
    if seq >= state.tree_size:
        raise NotFound(f"no checkpoint covers seq {seq} yet (latest size"
                       f" {state.tree_size})", code="not_checkpointed", field="seq")
    tree = TreeTiles(state.tree_size, state.root_hash)
    path = yield from inclusion_path_from_tiles(tree, seq)
    index = seq // TILE_WIDTH
    bundle = Tile(None, index, min(TILE_WIDTH, state.tree_size - index * TILE_WIDTH))
    status, data = yield Fetch(bundle.path, raw=True)
    record = _record(seq, answered(bundle.path, status, data), bundle.path)
    doc = proof_bundle(state, seq, record, path)
    try:
        got = verify_inclusion_bundle(doc, state.keys)
    except ProofError as exc:
        raise proof_error(exc) from exc
    if got.root_hash != state.root_hash or got.tree_size != state.tree_size:
        raise Forked("the trusted checkpoint changed under the read", field="root_hash")
    redacted = [str(n) for n, p in (record.get("payloads") or {}).items()
                if isinstance(p, dict) and p.get("data_b64") is None]
    unmarked = [n for n in redacted if not isinstance(record["payloads"][n].get("redacted_by"),
                                                      int)]
    if unmarked:
        raise EntryUnverified(f"entry {seq}: payload {unmarked[0]} is absent without a"
                              " redaction naming it", code="payload_missing", field=unmarked[0],
                              detail={"codes": ["payload_missing"], "reported_by": "reader",
                                      "problems": [{"code": "payload_missing", "field": n}
                                                   for n in unmarked]})
    verified = VerifiedEntry(seq, TILES_LAYER, record, hash_hex(got.entry_hash or b""),
                             got.tree_size, got.root_hash, True, redacted)
    if state.ledger_id is None and isinstance(doc["ledger_id"], str):
        state = state.with_ledger_id(doc["ledger_id"])
        yield Save(state)
    return verified, state
