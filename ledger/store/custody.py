"""Reads of the redaction, hold and retention use cases (payload bytes by entry).

``ledger.store.layout`` (docs/storage.md): the payloads of one entry are the
``SLOT_COUNT`` primary keys of ``entry_pids(seq)``.  Never hashes; never parses an envelope.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from sqlalchemy import Connection

from ledger.store.db import is_pg, placeholder
from ledger.store.layout import entry_pids, pid_sql, split

# seqs per IN list (x SLOT_COUNT pids stays below every engine's parameter limit)
CHUNK = 900


@dataclass(frozen=True)
class StoredHead:
    """The parts of a stored entry a redaction plan reads."""

    seq: int
    kind: str
    recorded_at: int
    engine: str | None
    envelope: bytes
    tenant: str = "default"  # the chain it belongs to (ledger.core.tenant)


def _chunks(seqs: Sequence[int]) -> Iterable[list[int]]:
    seqs = sorted(set(seqs))
    for i in range(0, len(seqs), CHUNK):
        yield seqs[i:i + CHUNK]


def _ph(conn: Connection, n: int) -> str:
    return ", ".join([placeholder(is_pg(conn))] * n)


def entry_heads(conn: Connection, seqs: Sequence[int]) -> dict[int, StoredHead]:
    """seq -> its stored head, for the seqs of ``seqs`` that exist."""
    out: dict[int, StoredHead] = {}
    for chunk in _chunks(seqs):
        rows = conn.exec_driver_sql(
            "SELECT seq, kind, recorded_at, engine, envelope, tenant FROM entries "
            f"WHERE seq IN ({_ph(conn, len(chunk))})", tuple(chunk)).fetchall()
        for seq, kind, t, engine, env, tenant in rows:
            out[seq] = StoredHead(seq, kind, t, engine, bytes(env), tenant)
    return out


def tenants_of(conn: Connection, seqs: Sequence[int]) -> dict[int, str]:
    """seq -> its tenant, for the seqs of ``seqs`` that exist."""
    out: dict[int, str] = {}
    for chunk in _chunks(seqs):
        rows = conn.exec_driver_sql(
            f"SELECT seq, tenant FROM entries WHERE seq IN ({_ph(conn, len(chunk))})",
            tuple(chunk)).fetchall()
        out.update({int(seq): str(tenant) for seq, tenant in rows})
    return out


def kinds_and_tenants_of(conn: Connection, seqs: Sequence[int]) -> dict[int, tuple[str, str]]:
    """seq -> (kind, tenant), for the seqs of ``seqs`` that exist."""
    out: dict[int, tuple[str, str]] = {}
    for chunk in _chunks(seqs):
        rows = conn.exec_driver_sql(
            f"SELECT seq, kind, tenant FROM entries WHERE seq IN ({_ph(conn, len(chunk))})",
            tuple(chunk)).fetchall()
        out.update({seq: (kind, tenant or "default") for seq, kind, tenant in rows})
    return out


def present_slots(conn: Connection, seqs: Sequence[int]) -> dict[int, set[int]]:
    """seq -> the slots whose payload bytes are stored (absent seqs: nothing stored)."""
    out: dict[int, set[int]] = {}
    for chunk in _chunks(seqs):
        pids = [p for s in chunk for p in entry_pids(s)]
        rows = conn.exec_driver_sql(
            f"SELECT pid FROM payloads WHERE pid IN ({_ph(conn, len(pids))})",
            tuple(pids)).fetchall()
        for (pid,) in rows:
            seq, slot = split(pid)
            out.setdefault(seq, set()).add(slot)
    return out


DOCUMENTS_SQL = ("SELECT e.seq, e.envelope, p.data FROM entries e "
                 f"LEFT JOIN payloads p ON p.pid = {pid_sql('e.seq')} WHERE e.kind = {{ph}}")


def documents(conn: Connection, kind: str, before: int | None = None,
              ) -> list[tuple[int, bytes, bytes | None]]:
    """(seq, envelope, document bytes or None when not stored) of every ``kind`` entry
    (seq order), with seq < ``before`` when given."""
    ph = placeholder(is_pg(conn))
    sql = DOCUMENTS_SQL.format(ph=ph)
    args: tuple[object, ...] = (kind,)
    if before is not None:
        sql += f" AND e.seq < {ph}"
        args += (before,)
    rows = conn.exec_driver_sql(sql + " ORDER BY e.seq", args).fetchall()
    return [(seq, bytes(env), None if d is None else bytes(d)) for seq, env, d in rows]


def custody_rows(conn: Connection, start: int, end: int,
                 ) -> list[tuple[int, str, bytes, bytes | None, str]]:
    """(seq, kind, envelope, document bytes | None, tenant) of the redaction and hold entries
    with ``start <= seq < end``, in seq order (the audit's check of them)."""
    ph = placeholder(is_pg(conn))
    rows = conn.exec_driver_sql(
        "SELECT e.seq, e.kind, e.envelope, p.data, e.tenant FROM entries e "
        f"LEFT JOIN payloads p ON p.pid = {pid_sql('e.seq')} "
        f"WHERE e.kind IN ('redaction', 'hold') AND e.seq >= {ph} AND e.seq < {ph} "
        "ORDER BY e.seq", (start, end)).fetchall()
    return [(s, k, bytes(env), None if d is None else bytes(d), t or "default")
            for s, k, env, d, t in rows]


def _of_tenant(conn: Connection, tenant: str | None) -> tuple[str, tuple[object, ...]]:
    """The SQL condition (and its argument) keeping the rows of ``tenant`` (None: all)."""
    if tenant is None:
        return "", ()
    return f" AND tenant = {placeholder(is_pg(conn))}", (tenant,)


def result_heads_before(conn: Connection, cutoff_us: int, after: int, limit: int,
                        tenant: str | None = None) -> list[StoredHead]:
    """One keyset page of result entries recorded before ``cutoff_us`` with seq > ``after``
    (of ``tenant`` only, when given)."""
    ph = placeholder(is_pg(conn))
    cond, arg = _of_tenant(conn, tenant)
    rows = conn.exec_driver_sql(
        "SELECT seq, kind, recorded_at, engine, envelope, tenant FROM entries "
        f"WHERE kind = 'result' AND seq > {ph} AND recorded_at < {ph}{cond} ORDER BY seq "
        f"LIMIT {int(limit)}", (after, cutoff_us, *arg)).fetchall()
    return [StoredHead(s, k, t, e, bytes(env), tn) for s, k, t, e, env, tn in rows]


def count_results_before(conn: Connection, cutoff_us: int, tenant: str | None = None) -> int:
    """How many result entries were recorded before ``cutoff_us`` (of ``tenant`` only, when
    given)."""
    ph = placeholder(is_pg(conn))
    cond, arg = _of_tenant(conn, tenant)
    return int(conn.exec_driver_sql(
        f"SELECT count(*) FROM entries WHERE kind = 'result' AND recorded_at < {ph}{cond}",
        (cutoff_us, *arg)).scalar_one())
