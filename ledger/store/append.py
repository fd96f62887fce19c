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

from ledger.store.db import driver_cursor, is_pg, placeholder
from ledger.store.entries import ENTRY_COLUMNS, Head


@dataclass(frozen=True)
class Stored:
    """An entry already in the ledger under an idempotency key."""

    seq: int
    envelope: bytes
    entry_hash: bytes
    recorded_at: int


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
        self.insert_payload = (
            f"INSERT INTO payloads (digest, data) VALUES ({ph}, {ph}) ON CONFLICT (digest) "
            "DO NOTHING")


_HOT = {True: _HotSQL(True), False: _HotSQL(False)}
IDEMPOTENCY_CHUNK = 500


class AppendTxn:
    """Statements of one append transaction on a DBAPI cursor.

    The transaction holds the append lock from its first statement: SQLite
    opens it with ``BEGIN IMMEDIATE`` (the database write lock); PostgreSQL
    locks the one-row ``head`` table ``FOR UPDATE`` (:meth:`lock_head`).
    ``cur`` and ``pg`` are shared with ``ledger.store.tree.TreeStore``.
    """

    def __init__(self, cursor: Any, pg: bool) -> None:
        self.cur = cursor
        self.pg = pg
        self.sql = _HOT[pg]

    def lock_head(self) -> Head:
        self.cur.execute(self.sql.lock_head)
        size, head_hash, last = self.cur.fetchone()
        return Head(size, bytes(head_hash), last)

    def set_head(self, new: Head) -> None:
        self.cur.execute(self.sql.set_head, (new.size, new.head_hash, new.last_recorded_at))

    def insert_payloads(self, items: dict[str, bytes]) -> None:
        """Content-addressed: existing digests are left as they are."""
        if items:
            self.cur.executemany(self.sql.insert_payload, list(items.items()))

    def insert_entries(self, rows: Sequence[dict[str, Any]]) -> None:
        if rows:
            self.cur.executemany(self.sql.insert_entry,
                                 [tuple(r.get(c) for c in ENTRY_COLUMNS) for r in rows])

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
                "SELECT idempotency_key, seq, envelope, entry_hash, recorded_at FROM entries "
                f"WHERE {scope} AND idempotency_key IN ({', '.join([ph] * len(chunk))})",
                (*(() if producer is None else (producer,)), *chunk))
            for key, seq, env, eh, t in self.cur.fetchall():
                out[key] = Stored(seq, bytes(env), bytes(eh), t)
        return out


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
