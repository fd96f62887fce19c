"""The append transaction: lock the head, insert payloads and entries, move the head.

Driver level (no per-row Core compilation): this is the hot path.  The rows are
already computed by the caller (``ledger.ops.append``); nothing here hashes.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Engine

from ledger.store import layout
from ledger.store.custody import DOCUMENTS_SQL
from ledger.store.db import driver_cursor, is_pg, placeholder
from ledger.store.entries import ENTRY_COLUMNS, Head
from ledger.store.postgres import APPEND_LOCK_SQL


@dataclass(frozen=True)
class Stored:
    """An entry already in the ledger under an idempotency key."""

    seq: int
    envelope: bytes
    entry_hash: bytes
    recorded_at: int
    salts: dict[int, bytes]  # slot -> salt of its stored v2 payloads
    tenant: str = "default"  # the chain it is in
    tseq: int | None = None  # its place there (NULL: an entry from before tenants)


class _HotSQL:
    """The statements of the append path for one placeholder style."""

    def __init__(self, pg: bool) -> None:
        ph = placeholder(pg)
        self.ph = ph
        self.lock_head = ("SELECT size, head_hash, last_recorded_at FROM head WHERE id = 1"
                          + (" FOR UPDATE" if pg else ""))
        self.set_head = (f"UPDATE head SET size = {ph}, head_hash = {ph}, "
                         f"last_recorded_at = {ph} WHERE id = 1")
        self.insert_entry = (f"INSERT INTO entries ({', '.join(ENTRY_COLUMNS)}) "
                             f"VALUES ({', '.join([ph] * len(ENTRY_COLUMNS))})")
        self.insert_payload = (f"INSERT INTO payloads (pid, salt, codec, data) "
                               f"VALUES ({ph}, {ph}, {ph}, {ph})")
        self.guard = (f"INSERT INTO redacted_payloads (seq, slot, redaction_seq) VALUES "
                      f"({ph}, {ph}, {ph}) ON CONFLICT (seq, slot) DO NOTHING")
        self.salts = (f"SELECT pid, salt FROM payloads WHERE pid >= {ph} AND pid < {ph} "
                      "AND salt IS NOT NULL")
        self.erase = f"DELETE FROM payloads WHERE pid = {ph}"
        self.tenant_head = (f"SELECT size, head_hash FROM tenant_heads WHERE tenant = {ph}"
                            + (" FOR UPDATE" if pg else ""))
        self.set_tenant_head = (f"INSERT INTO tenant_heads (tenant, size, head_hash) VALUES "
                                f"({ph}, {ph}, {ph}) ON CONFLICT (tenant) DO UPDATE SET "
                                "size = excluded.size, head_hash = excluded.head_hash")


_HOT = {True: _HotSQL(True), False: _HotSQL(False)}
IDEMPOTENCY_CHUNK = 500
_DEFAULTS = {"tenant": "default"}  # a row without a tenant is the default tenant's


class AppendTxn:
    """Statements of one append transaction on a DBAPI cursor.

    The transaction holds the append lock from its first statement: SQLite
    opens it with ``BEGIN IMMEDIATE`` (the database write lock); PostgreSQL
    takes the appenders' advisory lock, then locks the one-row ``head`` table ``FOR UPDATE``
    (:meth:`lock_head`).
    ``cur`` and ``pg`` are shared with ``ledger.store.tree.TreeStore``.
    """

    def __init__(self, cursor: Any, pg: bool) -> None:
        self.cur = cursor
        self.pg = pg
        self.sql = _HOT[pg]

    def lock_head(self) -> Head:
        if self.pg:  # queue first (ledger.store.postgres.APPEND_LOCK_SQL), then the row
            self.cur.execute(APPEND_LOCK_SQL)
        self.cur.execute(self.sql.lock_head)
        size, head_hash, last = self.cur.fetchone()
        return Head(size, bytes(head_hash), last)

    def tenant_head(self, tenant: str) -> tuple[int, bytes] | None:
        """(size, head hash) of the tenant's chain, None for a tenant without a row (no
        entry yet); read under the append lock (PostgreSQL: and the row locked)."""
        self.cur.execute(self.sql.tenant_head, (tenant,))
        got = self.cur.fetchone()
        return None if got is None else (int(got[0]), bytes(got[1]))

    def set_tenant_heads(self, heads: dict[str, tuple[int, bytes]]) -> None:
        """Move the heads of the tenants appended to: tenant -> (size, head hash)."""
        if heads:
            self.cur.executemany(self.sql.set_tenant_head,
                                 [(t, n, h) for t, (n, h) in sorted(heads.items())])

    def set_head(self, new: Head) -> None:
        self.cur.execute(self.sql.set_head, (new.size, new.head_hash, new.last_recorded_at))

    def insert_payloads(self, rows: Sequence[tuple[int, bytes | None, int, bytes]]) -> None:
        """Payload rows ``(pid, salt, codec, stored bytes)``, ``pid = layout.pid(seq, slot)``, the
        bytes already in the form ``codec`` names (:func:`ledger.store.codec.encode`)."""
        if rows:
            self.cur.executemany(self.sql.insert_payload, list(rows))

    def erase_payloads(self, targets: Iterable[tuple[int, int]], redaction_seq: int,
                       ) -> list[tuple[int, int]]:
        """See :func:`erase_payloads`."""
        return erase_payloads(self, targets, redaction_seq)

    def insert_entries(self, rows: Sequence[dict[str, Any]]) -> None:
        if rows:
            self.cur.executemany(self.sql.insert_entry,
                                 [tuple(_DEFAULTS.get(c) if r.get(c) is None else r[c]
                                        for c in ENTRY_COLUMNS) for r in rows])

    def documents(self, kind: str) -> list[tuple[int, bytes, bytes | None]]:
        """(seq, envelope, document bytes or None) of every ``kind`` entry, seq order, read
        inside this transaction (so under the append lock: an entry appended by anyone
        else is either seen here or appended after this transaction commits)."""
        self.cur.execute(DOCUMENTS_SQL.format(ph=self.sql.ph) + " ORDER BY e.seq", (kind,))
        return [(seq, bytes(env), None if d is None else bytes(d))
                for seq, env, d in self.cur.fetchall()]

    def find_idempotent(self, keys: Iterable[str], producer: str | None = None,
                        ) -> dict[str, Stored]:
        """key -> the stored entry of ``producer`` (None: entries without a producer), for
        the keys already in the ledger.  Keys are scoped per producer: another producer's
        entry under the same key is never returned."""
        keys = list(dict.fromkeys(keys))
        out: dict[str, Stored] = {}
        ph = self.sql.ph
        scope = "producer IS NULL" if producer is None else f"producer = {ph}"
        for start in range(0, len(keys), IDEMPOTENCY_CHUNK):
            chunk = keys[start:start + IDEMPOTENCY_CHUNK]
            self.cur.execute(
                "SELECT idempotency_key, seq, envelope, entry_hash, recorded_at, tenant, tseq "
                "FROM entries "
                f"WHERE {scope} AND idempotency_key IN ({', '.join([ph] * len(chunk))})",
                (*(() if producer is None else (producer,)), *chunk))
            for key, seq, env, eh, t, tenant, tseq in self.cur.fetchall():
                out[key] = Stored(seq, bytes(env), bytes(eh), t, {}, tenant or "default", tseq)
        for stored in out.values():
            self.cur.execute(self.sql.salts, layout.pid_range(stored.seq, stored.seq + 1))
            stored.salts.update((layout.slot_of(pid), bytes(salt))
                                for pid, salt in self.cur.fetchall())
        return out


def erase_payloads(txn: AppendTxn, targets: Iterable[tuple[int, int]], redaction_seq: int,
                   ) -> list[tuple[int, int]]:
    """Erase the payload rows ``(seq, slot)`` that the redaction entry at ``redaction_seq``
    names, inside the append transaction ``txn`` that inserts that entry.

    First the guard rows ``(seq, slot, redaction_seq)`` go into ``redacted_payloads``
    (insert-only; a pair already guarded keeps its first redaction), then the payload
    rows are deleted -- the database's DELETE trigger refuses any payload row without a
    guard row.  Returns the pairs whose bytes were stored and are now deleted, in order;
    a pair already erased (or never stored) is skipped: a no-op, not an error.  The
    caller checks that ``redaction_seq`` is the seq of the redaction entry of this
    transaction and that every seq is earlier.  Raises StoreDataError /
    StoreUnavailable through ``append_transaction``.
    """
    pairs = sorted(set(targets))
    if not pairs:
        return []
    # which of the named rows are stored: looked up by primary key (the targets of a
    # subject's request are spread over the whole ledger, so a range scan between the
    # first and the last would read most of the table)
    pids = [layout.pid(s, slot) for s, slot in pairs]
    present: set[int] = set()
    ph = txn.sql.ph
    for i in range(0, len(pids), IDEMPOTENCY_CHUNK):
        chunk = pids[i:i + IDEMPOTENCY_CHUNK]
        txn.cur.execute(f"SELECT pid FROM payloads WHERE pid IN ({', '.join([ph] * len(chunk))})",
                        chunk)
        present.update(int(r[0]) for r in txn.cur.fetchall())
    txn.cur.executemany(txn.sql.guard, [(s, slot, redaction_seq) for s, slot in pairs])
    erased = [(s, slot) for s, slot in pairs if layout.pid(s, slot) in present]
    if erased:
        txn.cur.executemany(txn.sql.erase, [(layout.pid(s, slot),) for s, slot in erased])
    return erased


@contextmanager
def append_transaction(engine: Engine, *, trial: bool = False) -> Iterator[AppendTxn]:
    """One append transaction on a pooled driver connection; commits on success and
    rolls back on any error (nothing of it is then stored).  ``trial``: roll back even
    on success (to find out whether the database accepts the statements).

    Raises StoreUnavailable (lost connection, lock timeout, ...) or StoreDataError
    (the database refused a value), see ``ledger.store.db.translate``.
    """
    pg = is_pg(engine)
    with driver_cursor(engine, "append transaction") as (raw, cur):
        if not pg:
            cur.execute("BEGIN IMMEDIATE")
        yield AppendTxn(cur, pg)
        if trial:
            raw.rollback() if pg else cur.execute("ROLLBACK")
        else:
            raw.commit() if pg else cur.execute("COMMIT")
