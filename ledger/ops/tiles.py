"""C2SP tlog-tiles from the stored tree: one tile or entry bundle, and ``ledger tiles
write DIR`` (docs/tiles.md).

Every tile is bounded by the latest stored checkpoint: its hashes are the stored Merkle
nodes at levels 0, 8, 16, ... (``ledger.store.tree``), read in one range scan per tile.
An entry bundle is the export records (``entries.jsonl`` lines, docs/export.md) of its
leaves.  The directory writer is incremental: it reads the checkpoint it published last
(``DIR/checkpoint``), checks that the stored tree still has that root, writes only the
full tiles completed since and the partial tiles of the new size, rewrites the bundles a
redaction entry appended since has erased payloads of, and publishes the new checkpoint
last (atomic renames throughout), so a crash leaves the previous publication whole.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from ledger.core.note import parse_checkpoint_body, parse_note
from ledger.core.tiles import (
    CHECKPOINT,
    TILE_WIDTH,
    Tile,
    covered,
    tiles_for_size,
    tree_levels,
)
from ledger.errors import CheckpointError, NoteError, NotFound, TreeIntegrityError, UsageError
from ledger.ops.checkpoint import latest_checkpoint, latest_cosigned_note, sync_tree, tree_root
from ledger.ops.context import LedgerContext
from ledger.ops.query import iter_pages, make_filters
from ledger.ops.redaction_map import load_redaction_map
from ledger.ops.view import export_line
from ledger.store.db import connect
from ledger.store.tree import read_store

BUNDLE_PAGE = 1000


def published_size(ctx: LedgerContext) -> int:
    """Tree size of the latest stored checkpoint (what tiles may be served for).
    Raises NotFound ``no_checkpoint`` before the first one."""
    row = latest_checkpoint(ctx)
    if row is None:
        raise NotFound("no checkpoint has been signed yet", code="no_checkpoint")
    return row.size


def _require_covered(tile: Tile, size: int) -> None:
    if not covered(tile, size):
        raise NotFound(f"{tile.path} is beyond the latest checkpoint (tree size {size})",
                       code="tile_not_found", field="N")


def tile_bytes(ctx: LedgerContext, tile: Tile, size: int | None = None) -> bytes:
    """The concatenated hashes of a Merkle tile (``tile.level`` not None) within the tree
    of ``size`` leaves (default: the latest checkpoint's).  Raises NotFound
    (``tile_not_found``) beyond it, TreeIntegrityError when a stored node is missing."""
    if tile.level is None:
        raise UsageError("an entry bundle is not a hash tile", code="bad_tile_path", field="L")
    size = published_size(ctx) if size is None else size
    _require_covered(tile, size)
    with read_store(ctx.engine) as store:
        if store.tree_size() < size:
            sync_tree(ctx.engine)
        run = store.node_run(tile.node_level, tile.first_node, tile.first_node + tile.width)
    if [i for i, _ in run] != list(range(tile.first_node, tile.first_node + tile.width)):
        raise TreeIntegrityError(f"stored tree lacks nodes of {tile.path}",
                                 code="tree_node_missing")
    return b"".join(h for _, h in run)


def _bundles(ctx: LedgerContext, start: int, end: int) -> Iterator[tuple[int, list[bytes]]]:
    """``(index, export lines)`` of the bundles of leaves ``[start, end)``, ``start`` a
    multiple of 256; the last one may be partial."""
    lines: list[bytes] = []
    index = start // TILE_WIDTH
    expected = start
    with connect(ctx.engine) as conn:
        redactions = load_redaction_map(conn)
        for page in iter_pages(conn, make_filters(start=start, end=end), page=BUNDLE_PAGE):
            for row, blobs in page:
                if row.seq != expected:
                    raise TreeIntegrityError(f"entry {expected} is missing",
                                             code="entry_gap", detail={"seq": expected})
                lines.append(export_line(row, blobs, redactions))
                expected += 1
                if len(lines) == TILE_WIDTH:
                    yield index, lines
                    lines, index = [], index + 1
    if expected != end:
        raise TreeIntegrityError(f"entry {expected} is missing", code="entry_gap",
                                 detail={"seq": expected})
    if lines:
        yield index, lines


def entry_bundle(ctx: LedgerContext, tile: Tile, size: int | None = None) -> bytes:
    """The entry bundle ``tile`` (``tile.level`` None): the export record lines of its
    leaves.  Raises NotFound beyond the latest checkpoint (or ``size``)."""
    if tile.level is not None:
        raise UsageError("a hash tile is not an entry bundle", code="bad_tile_path", field="L")
    size = published_size(ctx) if size is None else size
    _require_covered(tile, size)
    start = tile.first_node
    return b"".join(line for _, lines in _bundles(ctx, start, start + tile.width)
                    for line in lines)


@dataclass
class TilesReport:
    """What ``write_tiles`` did: sizes before and after, the paths written (relative)."""

    previous_size: int
    size: int
    tiles: list[str] = field(default_factory=list)
    bundles: list[str] = field(default_factory=list)
    rewritten: list[str] = field(default_factory=list)  # bundles rewritten after erasure
    bytes: int = 0

    def to_dict(self) -> dict[str, object]:
        return {"previous_size": self.previous_size, "size": self.size,
                "tiles": len(self.tiles), "bundles": len(self.bundles),
                "rewritten": self.rewritten, "bytes": self.bytes}


def _write(root: Path, rel: str, data: bytes, report: TilesReport) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)
    report.bytes += len(data)


def _previous(ctx: LedgerContext, root: Path, size: int) -> int:
    """Tree size of the checkpoint published in ``root`` (0 if none), checked: same
    origin, not larger than ``size``, and the stored tree still has its root."""
    path = root / CHECKPOINT
    if not path.exists():
        return 0
    try:
        old = parse_checkpoint_body(parse_note(path.read_text("utf-8")).text)
    except (NoteError, UnicodeDecodeError, ValueError) as exc:
        raise UsageError(f"{path} is not a checkpoint: {exc}", code="tiles_bad_checkpoint",
                         field="dir") from exc
    if old.origin != ctx.meta.origin:
        raise UsageError(f"{root} holds tiles of {old.origin!r}, not of {ctx.meta.origin!r}",
                         code="tiles_other_log", field="dir")
    if old.size > size:
        raise CheckpointError(f"{root} publishes tree size {old.size}, larger than the "
                              f"latest checkpoint ({size})", code="checkpoint_truncated")
    if tree_root(ctx, old.size) != old.root_hash:
        raise CheckpointError(f"the stored tree no longer has the root published in {path}",
                              code="checkpoint_inconsistent")
    return old.size


def write_tiles(ctx: LedgerContext, out_dir: str | os.PathLike[str]) -> TilesReport:
    """Publish the tiles of the latest stored checkpoint under ``out_dir`` (created)
    incrementally from the checkpoint published there before.

    Raises UsageError (no checkpoint yet, ``out_dir`` not a directory or another log's),
    CheckpointError (the published checkpoint is not in the stored tree: nothing is
    written), TreeIntegrityError (a stored node or entry is missing).
    """
    root = Path(out_dir)
    if root.exists() and not root.is_dir():
        raise UsageError(f"{root} is not a directory", code="not_a_directory", field="dir")
    note = latest_cosigned_note(ctx)
    if note is None:
        raise UsageError("no checkpoint has been signed yet (run `ledger checkpoint` first)",
                         code="no_checkpoint")
    cp = parse_checkpoint_body(parse_note(note).text)
    if tree_root(ctx, cp.size) != cp.root_hash:
        raise CheckpointError("the stored tree disagrees with the latest checkpoint",
                              code="checkpoint_inconsistent")
    since = _previous(ctx, root, cp.size)
    report = TilesReport(since, cp.size)
    root.mkdir(parents=True, exist_ok=True)
    for level in tree_levels(cp.size):
        for tile in tiles_for_size(cp.size, level, since):
            _write(root, tile.path, tile_bytes(ctx, tile, cp.size), report)
            report.tiles.append(tile.path)
    _write_bundles(ctx, root, since, cp.size, report)
    _write(root, CHECKPOINT, note.encode("utf-8"), report)
    return report


def _write_bundles(ctx: LedgerContext, root: Path, since: int, size: int,
                   report: TilesReport) -> None:
    with connect(ctx.engine) as conn:
        redactions = load_redaction_map(conn)
    # bundles written before hold payloads that a redaction appended since has erased
    stale = sorted({seq // TILE_WIDTH for (seq, _), by in redactions.items()
                    if by >= since and seq < since})
    for index in stale:
        end = min((index + 1) * TILE_WIDTH, since)
        for tile in _old_bundles(index, end):
            data = entry_bundle(ctx, tile, size)
            if (root / tile.path).exists():
                _write(root, tile.path, data, report)
                report.rewritten.append(tile.path)
    first = since // TILE_WIDTH * TILE_WIDTH
    for index, lines in _bundles(ctx, first, size):
        tile = Tile(None, index, len(lines))
        if tile.full and index * TILE_WIDTH + TILE_WIDTH <= since:
            continue
        if not tile.full and (index * TILE_WIDTH + len(lines)) == since:
            continue  # the partial bundle of the previous size, already written
        _write(root, tile.path, b"".join(lines), report)
        report.bundles.append(tile.path)


def _old_bundles(index: int, end: int) -> list[Tile]:
    """The bundle files of ``index`` a directory may hold for sizes up to ``end``: the
    full one and every partial width (kept for older checkpoints)."""
    top = end - index * TILE_WIDTH
    return [Tile(None, index, w) for w in range(1, min(top, TILE_WIDTH - 1) + 1)] + \
        ([Tile(None, index)] if top == TILE_WIDTH else [])
