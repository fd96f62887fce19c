"""Rows of ``checkpoint_anchors``: witness cosignatures and timestamp tokens of checkpoints.

Persists bytes already made and checked by ``ledger.ops.checkpoint``; never signs or hashes.
Insert-only (triggers from migration 0007_anchors); a second anchor of the same kind
from the same witness or TSA for the same checkpoint size is not stored (the first is
kept).
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import Connection, Engine, func, insert, select

from ledger.store.db import connect, transaction
from ledger.store.schema import checkpoint_anchors as t
from ledger.store.schema import entries

COSIGNATURE, TIMESTAMP = "cosignature", "timestamp"


@dataclass(frozen=True)
class AnchorRow:
    """One stored anchor of the checkpoint of ``checkpoint_size`` entries."""

    checkpoint_size: int
    kind: str
    name: str
    data: str
    nonce: str | None
    created_at: int


def add_anchor(engine: Engine, row: AnchorRow) -> bool:
    """Store ``row`` unless that witness/TSA already anchored that size; True if stored."""
    with transaction(engine) as conn:
        exists = conn.execute(select(t.c.id).where(
            t.c.checkpoint_size == row.checkpoint_size, t.c.kind == row.kind,
            t.c.name == row.name).limit(1)).first()
        if exists is not None:
            return False
        conn.execute(insert(t).values(
            checkpoint_size=row.checkpoint_size, kind=row.kind, name=row.name, data=row.data,
            nonce=row.nonce, created_at=row.created_at))
        return True


def _rows(conn: Connection, size: int) -> list[AnchorRow]:
    result = conn.execute(select(t.c.checkpoint_size, t.c.kind, t.c.name, t.c.data, t.c.nonce,
                                 t.c.created_at).where(t.c.checkpoint_size == size)
                          .order_by(t.c.id))
    return [AnchorRow(int(r[0]), r[1], r[2], r[3], r[4], int(r[5])) for r in result]


def anchors_of(engine: Engine, size: int) -> list[AnchorRow]:
    """Every anchor of the checkpoint of ``size`` entries, in the order stored."""
    with connect(engine) as conn:
        return _rows(conn, size)


def last_cosigned_size(engine: Engine, name: str) -> int | None:
    """The largest checkpoint size witness ``name`` cosigned for this ledger, or None."""
    with connect(engine) as conn:
        value = conn.execute(select(func.max(t.c.checkpoint_size)).where(
            t.c.kind == COSIGNATURE, t.c.name == name)).scalar()
    return None if value is None else int(value)


def last_recorded_at(engine: Engine, size: int) -> int | None:
    """``recorded_at`` of the last of the first ``size`` entries (the largest: the append
    path never lets it go down), or None when size is 0 or that entry is gone."""
    if size <= 0:
        return None
    with connect(engine) as conn:
        value = conn.execute(select(entries.c.recorded_at)
                             .where(entries.c.seq == size - 1)).scalar()
    return None if value is None else int(value)


@dataclass(frozen=True)
class StoredCheckpoint:
    """One row of ``checkpoints`` with its anchors (for listings)."""

    size: int
    note: str
    created_at: int
    anchors: tuple[AnchorRow, ...]


def checkpoint_page(engine: Engine, after_size: int, limit: int,
                    ) -> list[StoredCheckpoint]:
    """Stored checkpoints with ``size > after_size``, smallest first, at most ``limit``,
    each with its anchors (two statements)."""
    from ledger.store.schema import checkpoints as cp

    with connect(engine) as conn:
        rows = conn.execute(select(cp.c.size, cp.c.note, cp.c.created_at)
                            .where(cp.c.size > after_size).order_by(cp.c.size)
                            .limit(limit)).all()
        if not rows:
            return []
        sizes = [int(r[0]) for r in rows]
        by_size: dict[int, list[AnchorRow]] = {s: [] for s in sizes}
        result = conn.execute(select(t.c.checkpoint_size, t.c.kind, t.c.name, t.c.data,
                                     t.c.nonce, t.c.created_at)
                              .where(t.c.checkpoint_size.in_(sizes)).order_by(t.c.id))
        for r in result:
            by_size[int(r[0])].append(AnchorRow(int(r[0]), r[1], r[2], r[3], r[4], int(r[5])))
    return [StoredCheckpoint(int(r[0]), r[1], int(r[2]), tuple(by_size[int(r[0])]))
            for r in rows]
