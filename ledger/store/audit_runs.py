"""Audit job progress: the ``audit_runs`` and ``audit_findings`` tables, and the
re-verification runs kept in the same ``audit_runs`` table (``job = 'reverify'``) with
their outcomes in ``reverify_outcomes``.

Operational state, not part of the ledger (docs/audit.md, docs/reverify.md).  Every
reader of audit runs selects ``job = 'audit'`` (:data:`AUDIT`): a re-verification run is
never taken for an audit.  JSON columns are
text the caller encodes and decodes; functions take a Connection, writes one
inside ``db.transaction``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, delete, func, select, update

from ledger.store.schema import (
    audit_aggregates,
    audit_findings,
    audit_runs,
    entries,
    reverify_outcomes,
)

AUDIT = audit_runs.c.job == "audit"
REVERIFY = audit_runs.c.job == "reverify"
# the audit of one tenant's chain (``ledger audit --tenant T --record``): listed with the
# audits, never read as an audit of the whole ledger
TENANT_AUDIT = audit_runs.c.job == "tenant_audit"
LISTED = audit_runs.c.job.in_(("audit", "tenant_audit"))


def new_run(conn: Connection, now: int, start: int, end: int, options: str, counts: str,
            job: str = "audit") -> int:
    """Insert a ``running`` run of ``job`` over ``[start, end)``; return its id."""
    res = conn.execute(audit_runs.insert().values(
        started_at=now, updated_at=now, range_start=start, range_end=end, next_seq=start,
        state="running", options=options, counts=counts, job=job))
    key = res.inserted_primary_key
    assert key is not None  # an executed single-row INSERT always has its primary key
    return int(key[0])


def add_findings(conn: Connection, rows: Sequence[dict[str, Any]]) -> None:
    """Rows of ``run_id``, ``seq``, ``kind`` (finding | abstention), ``body`` (JSON)."""
    if rows:
        conn.execute(audit_findings.insert(), list(rows))


def delete_findings(conn: Connection, run_id: int) -> None:
    """Drop the saved findings and abstentions of ``run_id`` (a parallel run replaces them
    with its joined set when it completes)."""
    conn.execute(delete(audit_findings).where(audit_findings.c.run_id == run_id))


def run_options(conn: Connection, run_id: int) -> str:
    options: str = conn.execute(select(audit_runs.c.options).where(
        audit_runs.c.id == run_id)).scalar_one()
    return options


def update_run(conn: Connection, run_id: int, *, next_seq: int, counts: str, state: str,
               options: str, updated_at: int) -> None:
    conn.execute(update(audit_runs).where(audit_runs.c.id == run_id).values(
        next_seq=next_seq, counts=counts, state=state, options=options,
        updated_at=updated_at))


def count_findings(conn: Connection, run_id: int, kind: str) -> int:
    return conn.execute(select(func.count()).select_from(audit_findings).where(
        audit_findings.c.run_id == run_id, audit_findings.c.kind == kind)).scalar_one()


def latest_running(conn: Connection) -> RunRow | None:
    """The most recent run still ``running`` (an interrupted one), if any."""
    r = conn.execute(select(audit_runs).where(audit_runs.c.state == "running", AUDIT)
                     .order_by(audit_runs.c.id.desc()).limit(1)).first()
    return None if r is None else _run_row(r)


def run_findings(conn: Connection, run_id: int) -> list[tuple[str, str]]:
    """(kind, body JSON) of the run's saved findings and abstentions, in saved order."""
    return [(k, b) for k, b in conn.execute(
        select(audit_findings.c.kind, audit_findings.c.body)
        .where(audit_findings.c.run_id == run_id).order_by(audit_findings.c.id))]


@dataclass(frozen=True)
class RunRow:
    """One ``audit_runs`` row as listed (times in µs)."""

    id: int
    started_at: int
    updated_at: int
    range_start: int
    range_end: int
    next_seq: int
    state: str
    options: str  # JSON
    counts: str  # JSON


def _run_row(r: Any) -> RunRow:
    return RunRow(int(r.id), int(r.started_at), int(r.updated_at), int(r.range_start),
                  int(r.range_end), int(r.next_seq), r.state, r.options, r.counts)


def run_page(conn: Connection, before_id: int | None, limit: int, where: Any = LISTED,
             ) -> list[RunRow]:
    """Audit runs (``where``: of the whole ledger and of a tenant) with ``id < before_id``
    (all when None), newest first, at most ``limit``."""
    q = select(audit_runs).where(where)
    if before_id is not None:
        q = q.where(audit_runs.c.id < before_id)
    return [_run_row(r) for r in conn.execute(q.order_by(audit_runs.c.id.desc()).limit(limit))]


def run_by_id(conn: Connection, run_id: int) -> RunRow | None:
    r = conn.execute(select(audit_runs).where(audit_runs.c.id == run_id, LISTED)).first()
    return None if r is None else _run_row(r)


def finding_counts(conn: Connection, run_ids: Sequence[int]) -> dict[int, dict[str, int]]:
    """run id -> {"finding": n, "abstention": m} for ``run_ids``."""
    out: dict[int, dict[str, int]] = {i: {"finding": 0, "abstention": 0} for i in run_ids}
    if not run_ids:
        return out
    q = (select(audit_findings.c.run_id, audit_findings.c.kind, func.count())
         .where(audit_findings.c.run_id.in_(list(run_ids)))
         .group_by(audit_findings.c.run_id, audit_findings.c.kind))
    for run_id, kind, n in conn.execute(q):
        out[int(run_id)][kind] = int(n)
    return out


def finding_scope(conn: Connection) -> tuple[int, ...]:
    """The runs whose findings are attached to entries: the latest ``complete`` run and
    every run begun after it that is still ``running`` (docs/reads.md)."""
    latest = conn.execute(select(func.max(audit_runs.c.id)).where(
        audit_runs.c.state == "complete", AUDIT)).scalar()
    later = select(audit_runs.c.id).where(audit_runs.c.state == "running", AUDIT)
    if latest is not None:
        later = later.where(audit_runs.c.id > latest)
    ids = [int(i) for i in conn.execute(later)]
    return tuple(sorted(([int(latest)] if latest is not None else []) + ids))


def entry_findings(conn: Connection, run_ids: Sequence[int], seqs: Sequence[int],
                   ) -> list[tuple[int, int, str]]:
    """(run id, seq, body JSON) of the findings (not abstentions) of ``run_ids`` about the
    entries ``seqs``, in saved order."""
    if not run_ids or not seqs:
        return []
    return [(int(r), int(s), b) for r, s, b in conn.execute(
        select(audit_findings.c.run_id, audit_findings.c.seq, audit_findings.c.body)
        .where(audit_findings.c.run_id.in_(list(run_ids)),
               audit_findings.c.seq.in_(list(seqs)), audit_findings.c.kind == "finding")
        .order_by(audit_findings.c.id))]


def finding_seq_select(run_ids: Sequence[int]) -> Any:
    """A SELECT of the seqs the findings of ``run_ids`` are about (for ``seq IN (...)``)."""
    return select(audit_findings.c.seq).where(audit_findings.c.run_id.in_(list(run_ids)),
                                              audit_findings.c.kind == "finding")


# -- re-verification runs ------------------------------------------------------------


def latest_running_reverify(conn: Connection) -> RunRow | None:
    """The most recent re-verification run still ``running`` (an interrupted one)."""
    r = conn.execute(select(audit_runs).where(audit_runs.c.state == "running", REVERIFY)
                     .order_by(audit_runs.c.id.desc()).limit(1)).first()
    return None if r is None else _run_row(r)


def save_reverify_page(conn: Connection, run_id: int, outcomes: Sequence[tuple[int, str]],
                       *, next_seq: int, counts: str, state: str, updated_at: int) -> None:
    """Add the (seq, outcome JSON) decided in one page and move the run's checkpoint."""
    if outcomes:
        conn.execute(reverify_outcomes.insert(),
                     [{"run_id": run_id, "seq": s, "outcome": o} for s, o in outcomes])
    conn.execute(update(audit_runs).where(audit_runs.c.id == run_id, REVERIFY).values(
        next_seq=next_seq, counts=counts, state=state, updated_at=updated_at))


def reverify_outcome_rows(conn: Connection, run_id: int) -> list[str]:
    """The outcome JSON saved for ``run_id``, in seq order."""
    return list(conn.execute(select(reverify_outcomes.c.outcome)
                             .where(reverify_outcomes.c.run_id == run_id)
                             .order_by(reverify_outcomes.c.seq)).scalars())


# -- aggregates (migration 0011) -----------------------------------------------------------
AGGREGATE_KEY = ("bucket_us", "kind", "status", "engine", "producer", "att_verdict",
                 "disposition")


def add_aggregates(conn: Connection, run_id: int, counts: dict[tuple[Any, ...], int]) -> None:
    """Store a run's counts: ``counts`` maps :data:`AGGREGATE_KEY` tuples to row counts."""
    rows = [{"run_id": run_id, **dict(zip(AGGREGATE_KEY, k, strict=True)), "n": n}
            for k, n in counts.items()]
    for i in range(0, len(rows), 5000):
        conn.execute(audit_aggregates.insert(), rows[i:i + 5000])


def latest_aggregated_run(conn: Connection) -> RunRow | None:
    """The latest ``complete`` audit run from seq 0 that stored aggregates."""
    has = select(audit_aggregates.c.run_id).where(audit_aggregates.c.run_id == audit_runs.c.id)
    r = conn.execute(select(audit_runs).where(
        audit_runs.c.state == "complete", AUDIT, audit_runs.c.range_start == 0, has.exists())
        .order_by(audit_runs.c.id.desc()).limit(1)).first()
    return None if r is None else _run_row(r)


def aggregate_rows(conn: Connection, run_id: int, lo_us: int | None, hi_us: int | None,
                   ) -> list[tuple[Any, ...]]:
    """The stored counts of ``run_id`` with ``lo_us <= bucket_us < hi_us`` (None: open):
    tuples of :data:`AGGREGATE_KEY` then ``n``."""
    c = audit_aggregates.c
    conds = [c.run_id == run_id]
    if lo_us is not None:
        conds.append(c.bucket_us >= lo_us)
    if hi_us is not None:
        conds.append(c.bucket_us < hi_us)
    return [tuple(r) for r in conn.execute(
        select(*(c[k] for k in AGGREGATE_KEY), c.n).where(*conds))]


def finding_times(conn: Connection, run_id: int, tenant: str | None = None,
                  skip_codes: frozenset[str] = frozenset()) -> list[tuple[str, int]]:
    """(class, stored recorded_at) of the row findings of ``run_id`` whose seq is stored
    (and, ``tenant`` given, is stored as that tenant's), but those whose code is in
    ``skip_codes``."""
    out = []
    q = (select(audit_findings.c.body, entries.c.recorded_at)
         .join(entries, entries.c.seq == audit_findings.c.seq)
         .where(audit_findings.c.run_id == run_id, audit_findings.c.kind == "finding"))
    if tenant is not None:
        q = q.where(entries.c.tenant == tenant)
    for body, t in conn.execute(q):
        try:
            doc = json.loads(body)
            cls, code = str(doc.get("class")), doc.get("code")
        except (ValueError, AttributeError):
            cls, code = "unknown", None
        if code in skip_codes:
            continue
        out.append((cls, int(t) if isinstance(t, int) else 0))
    return out
