"""Reads for operators' monitoring (metrics, readiness, alerts): small, bounded queries.

Never returns payload bytes other than the stored document of the latest ``audit_run``
entry (the audit summary the ledger itself recorded).
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import Connection, Engine, func, select

from ledger.store.db import connect, current_revision, migrations_dir, translate_errors
from ledger.store.entries import DocRef, _bytes
from ledger.store.layout import pid_col
from ledger.store.schema import audit_findings, audit_runs, checkpoint_anchors, entries, payloads


@dataclass(frozen=True)
class CompleteRun:
    """The latest audit run that finished (``state = complete``)."""

    id: int
    range_start: int
    range_end: int
    updated_at: int
    counts: str  # JSON


def last_doc_of_kind(conn: Connection, kind: str, before: int | None = None,
                     tenant: str | None = None) -> DocRef | None:
    """(seq, envelope, document) of the newest entry of ``kind`` (with seq < ``before``; in
    ``tenant``'s chain, when given), or None."""
    doc = payloads.alias("doc")
    q = select(entries.c.seq, entries.c.envelope, doc.c.data).select_from(
        entries.outerjoin(doc, doc.c.pid == pid_col(entries.c.seq))).where(
        entries.c.kind == kind)
    if before is not None:
        q = q.where(entries.c.seq < before)
    if tenant is not None:
        q = q.where(entries.c.tenant == tenant)
    r = conn.execute(q.order_by(entries.c.seq.desc()).limit(1)).first()
    if r is None:
        return None
    return DocRef(r.seq, _bytes(r.envelope), None if r.data is None else _bytes(r.data))


def latest_complete_run(conn: Connection) -> CompleteRun | None:
    r = conn.execute(select(audit_runs).where(audit_runs.c.state == "complete",
                                              audit_runs.c.job == "audit")
                     .order_by(audit_runs.c.id.desc()).limit(1)).first()
    if r is None:
        return None
    return CompleteRun(int(r.id), int(r.range_start), int(r.range_end), int(r.updated_at),
                       r.counts)


def run_finding_bodies(conn: Connection, run_id: int, limit: int = 100_000) -> list[str]:
    """The JSON bodies of the findings (not abstentions) saved for ``run_id``."""
    return [b for (b,) in conn.execute(
        select(audit_findings.c.body).where(audit_findings.c.run_id == run_id,
                                            audit_findings.c.kind == "finding")
        .order_by(audit_findings.c.id).limit(limit))]


def cosigned_sizes(conn: Connection) -> dict[str, int]:
    """witness name -> the largest checkpoint size it cosigned."""
    t = checkpoint_anchors
    return {name: int(size) for name, size in conn.execute(
        select(t.c.name, func.max(t.c.checkpoint_size)).where(t.c.kind == "cosignature")
        .group_by(t.c.name))}


def schema_state(engine: Engine) -> tuple[str | None, tuple[str, ...]]:
    """(the database's revision, the head revisions of the packaged migrations)."""
    from alembic.script import ScriptDirectory

    with translate_errors("schema check"):
        current = current_revision(engine)
    heads = ScriptDirectory(str(migrations_dir())).get_heads()
    return current, tuple(heads)


def ping(engine: Engine) -> None:
    """One round trip.  Raises StoreUnavailable."""
    with connect(engine) as conn:
        conn.execute(select(1)).scalar()
