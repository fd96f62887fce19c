"""Audit job progress: the ``audit_runs`` and ``audit_findings`` tables.

Operational state, not part of the ledger (docs/audit.md).  JSON columns are
text the caller encodes and decodes; functions take a Connection, writes one
inside ``db.transaction``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, func, select, update

from ledger.store.schema import audit_findings, audit_runs


@dataclass(frozen=True)
class AuditRun:
    id: int
    range_start: int
    range_end: int
    next_seq: int
    state: str
    options: str  # JSON
    counts: str  # JSON


def new_run(conn: Connection, now: int, start: int, end: int, options: str, counts: str,
            ) -> int:
    """Insert a ``running`` run over ``[start, end)``; return its id."""
    res = conn.execute(audit_runs.insert().values(
        started_at=now, updated_at=now, range_start=start, range_end=end, next_seq=start,
        state="running", options=options, counts=counts))
    return int(res.inserted_primary_key[0])


def add_findings(conn: Connection, rows: Sequence[dict[str, Any]]) -> None:
    """Rows of ``run_id``, ``seq``, ``kind`` (finding | abstention), ``body`` (JSON)."""
    if rows:
        conn.execute(audit_findings.insert(), list(rows))


def run_options(conn: Connection, run_id: int) -> str:
    return conn.execute(select(audit_runs.c.options).where(
        audit_runs.c.id == run_id)).scalar_one()


def update_run(conn: Connection, run_id: int, *, next_seq: int, counts: str, state: str,
               options: str, updated_at: int) -> None:
    conn.execute(update(audit_runs).where(audit_runs.c.id == run_id).values(
        next_seq=next_seq, counts=counts, state=state, options=options,
        updated_at=updated_at))


def count_findings(conn: Connection, run_id: int, kind: str) -> int:
    return conn.execute(select(func.count()).select_from(audit_findings).where(
        audit_findings.c.run_id == run_id, audit_findings.c.kind == kind)).scalar_one()


def latest_running(conn: Connection) -> AuditRun | None:
    """The most recent run still ``running`` (an interrupted one), if any."""
    r = conn.execute(select(audit_runs).where(audit_runs.c.state == "running")
                     .order_by(audit_runs.c.id.desc()).limit(1)).first()
    if r is None:
        return None
    return AuditRun(int(r.id), r.range_start, r.range_end, r.next_seq, r.state, r.options,
                    r.counts)


def run_findings(conn: Connection, run_id: int) -> list[tuple[str, str]]:
    """(kind, body JSON) of the run's saved findings and abstentions, in saved order."""
    return [(k, b) for k, b in conn.execute(
        select(audit_findings.c.kind, audit_findings.c.body)
        .where(audit_findings.c.run_id == run_id).order_by(audit_findings.c.id))]
