"""A witness's durable state: its own SQLite file (not the ledger database).

    logs(origin PK, size, root_hash, note, updated_at)   the latest checkpoint cosigned
    refusals(id PK, received_at, origin, status, reason, body)   requests it refused

The check of the old size against ``logs`` and the update are one ``BEGIN IMMEDIATE``
transaction (c2sp.org/tlog-witness: otherwise two concurrent requests could roll the
witness back).  A connection per transaction: the file is the only shared state, so
several threads or processes may serve one witness.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from ledger.errors import StoreUnavailable

SCHEMA = """
CREATE TABLE IF NOT EXISTS logs (
    origin TEXT PRIMARY KEY,
    size INTEGER NOT NULL,
    root_hash BLOB NOT NULL,
    note TEXT NOT NULL,
    updated_at INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS refusals (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    received_at INTEGER NOT NULL,
    origin TEXT,
    status INTEGER NOT NULL,
    reason TEXT NOT NULL,
    body BLOB NOT NULL
);
"""


@dataclass(frozen=True)
class LogState:
    """The latest checkpoint a witness cosigned for one origin."""

    origin: str
    size: int
    root_hash: bytes
    note: str
    updated_at: int


class StateTxn:
    """Reads and writes inside one write transaction."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def get(self, origin: str) -> LogState | None:
        row = self.conn.execute("SELECT origin, size, root_hash, note, updated_at FROM logs"
                                " WHERE origin = ?", (origin,)).fetchone()
        return None if row is None else LogState(row[0], int(row[1]), bytes(row[2]), row[3],
                                                 int(row[4]))

    def put(self, origin: str, size: int, root_hash: bytes, note: str, now_s: int) -> None:
        self.conn.execute(
            "INSERT INTO logs (origin, size, root_hash, note, updated_at) VALUES (?, ?, ?, ?, ?)"
            " ON CONFLICT (origin) DO UPDATE SET size = excluded.size,"
            " root_hash = excluded.root_hash, note = excluded.note,"
            " updated_at = excluded.updated_at", (origin, size, root_hash, note, now_s))


class WitnessState:
    """The state file at ``path`` (created with its tables on first use)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self._connect() as conn:
            conn.executescript(SCHEMA)

    def _connect(self) -> sqlite3.Connection:
        try:
            conn = sqlite3.connect(self.path, timeout=30, isolation_level=None)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=FULL")
        except sqlite3.Error as exc:
            raise StoreUnavailable(f"cannot open witness state {self.path}: {exc}") from exc
        return conn

    @contextmanager
    def transaction(self) -> Iterator[StateTxn]:
        """``BEGIN IMMEDIATE`` … ``COMMIT`` (rolled back if the block raises)."""
        conn = self._connect()
        try:
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield StateTxn(conn)
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
        except sqlite3.Error as exc:
            raise StoreUnavailable(f"witness state {self.path}: {exc}") from exc
        finally:
            conn.close()

    def get(self, origin: str) -> LogState | None:
        """The latest cosigned checkpoint for ``origin`` (None: never cosigned one)."""
        with self.transaction() as txn:
            return txn.get(origin)

    def record_refusal(self, origin: str | None, status: int, reason: str, body: bytes,
                       now_s: int) -> None:
        """Keep a refused request (it may be evidence of a misbehaving log)."""
        with self.transaction() as txn:
            txn.conn.execute("INSERT INTO refusals (received_at, origin, status, reason, body)"
                             " VALUES (?, ?, ?, ?, ?)", (now_s, origin, status, reason, body))

    def refusals(self) -> list[tuple[str | None, int, str]]:
        """(origin, status, reason) of every refused request, oldest first."""
        with self.transaction() as txn:
            rows = txn.conn.execute("SELECT origin, status, reason FROM refusals ORDER BY id")
            return [(r[0], int(r[1]), r[2]) for r in rows.fetchall()]
