"""The quarantine table: bounded writes, its counters, and pruning.

Rejected submissions are kept for auditors, never as part of the chain.  A write keeps at
most ``max_rows`` rows in all and ``max_per_producer`` rows of one producer; the rejects
beyond are counted in ``quarantine_stats.dropped`` (per producer, '' for none) and not
kept.  Pruning deletes rows received before a time; the table's DELETE trigger allows that
only inside :func:`prune`'s transaction (the ``quarantine_prune`` gate row).  Functions
take a connection inside a transaction (``db.transaction``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Connection, delete, func, insert, select
from sqlalchemy.dialects import postgresql, sqlite

from ledger.store.db import is_pg
from ledger.store.schema import quarantine, quarantine_prune, quarantine_stats


@dataclass(frozen=True)
class ProducerCounts:
    """One producer's quarantine: rows kept, rejects not kept, rows pruned."""

    rows: int = 0
    dropped: int = 0
    pruned: int = 0
    last_dropped_at: int | None = None


@dataclass(frozen=True)
class QuarantineCounts:
    """The whole quarantine; ``producers`` maps a producer ('' = none) to its counts."""

    rows: int
    dropped: int
    pruned: int
    producers: dict[str, ProducerCounts] = field(default_factory=dict)


def _scope(producer: str | None) -> Any:
    return quarantine.c.producer.is_(None) if producer is None \
        else quarantine.c.producer == producer


def write_bounded(conn: Connection, rows: Sequence[dict[str, Any]], producer: str | None,
                  max_rows: int, max_per_producer: int, now_us: int) -> int:
    """Insert as many of ``rows`` (all of ``producer``) as the bounds leave room for and
    count the others as dropped; returns how many were dropped.

    On PostgreSQL the table is locked against other writers for the transaction (the
    counts and the insert are one decision); SQLite's write lock already does that.
    """
    if not rows:
        return 0
    if is_pg(conn):
        conn.exec_driver_sql("LOCK TABLE quarantine IN SHARE ROW EXCLUSIVE MODE")
    total = conn.execute(select(func.count()).select_from(quarantine)).scalar_one()
    mine = conn.execute(select(func.count()).select_from(quarantine).where(
        _scope(producer))).scalar_one()
    room = max(0, min(max_rows - total, max_per_producer - mine))
    kept = list(rows[:room])
    if kept:
        conn.execute(insert(quarantine), kept)
    dropped = len(rows) - len(kept)
    if dropped:
        _add(conn, producer or "", dropped=dropped, last_dropped_at=now_us)
    return dropped


def _add(conn: Connection, producer: str, *, dropped: int = 0, pruned: int = 0,
         last_dropped_at: int | None = None) -> None:
    """Add to a producer's counters (created at zero)."""
    ins = (postgresql.insert if is_pg(conn) else sqlite.insert)(quarantine_stats)
    values = {"producer": producer, "dropped": dropped, "pruned": pruned,
              "last_dropped_at": last_dropped_at}
    update: dict[str, Any] = {
        "dropped": quarantine_stats.c.dropped + ins.excluded.dropped,
        "pruned": quarantine_stats.c.pruned + ins.excluded.pruned}
    if last_dropped_at is not None:
        update["last_dropped_at"] = ins.excluded.last_dropped_at
    conn.execute(ins.values(**values).on_conflict_do_update(
        index_elements=[quarantine_stats.c.producer], set_=update))


def counts(conn: Connection) -> QuarantineCounts:
    """Rows kept and the counters, in all and per producer."""
    per: dict[str, dict[str, Any]] = {}
    for producer, n in conn.execute(select(quarantine.c.producer, func.count()).group_by(
            quarantine.c.producer)):
        per.setdefault(producer or "", {})["rows"] = n
    for r in conn.execute(select(quarantine_stats)):
        per.setdefault(r.producer, {}).update(dropped=r.dropped, pruned=r.pruned,
                                              last_dropped_at=r.last_dropped_at)
    producers = {p: ProducerCounts(**v) for p, v in sorted(per.items())}
    return QuarantineCounts(sum(c.rows for c in producers.values()),
                            sum(c.dropped for c in producers.values()),
                            sum(c.pruned for c in producers.values()), producers)


def prune(conn: Connection, before_us: int, producer: str | None = None) -> int:
    """Delete the rows received before ``before_us`` (of ``producer`` only, when given;
    '' = rows without a producer); returns how many.  The pruned rows are counted per
    producer in ``quarantine_stats.pruned``."""
    where = [quarantine.c.received_at < before_us]
    if producer is not None:
        where.append(_scope(producer or None))
    gone = conn.execute(select(quarantine.c.producer, func.count()).where(*where).group_by(
        quarantine.c.producer)).all()
    if not gone:
        return 0
    conn.execute(insert(quarantine_prune).values(id=1))
    conn.execute(delete(quarantine).where(*where))
    conn.execute(delete(quarantine_prune))
    for p, n in gone:
        _add(conn, p or "", pruned=n)
    return sum(n for _, n in gone)
