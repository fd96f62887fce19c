"""A witness's durable state: its own SQLite file (not the ledger database).

    logs(origin PK, size, root_hash, note, updated_at)   the latest checkpoint cosigned:
        ``note`` is its text, the log signatures that verified and the witness's own
        cosignature line (what ``GET /<origin hash>/checkpoint`` serves)
    refusals(id PK, received_at, origin, status, reason, body,
             digest, count, last_at)                      requests it refused
    refusal_overflow(origin PK, dropped)                  refusals counted, not kept

The check of the old size against ``logs`` and the update are one ``BEGIN IMMEDIATE``
transaction (c2sp.org/tlog-witness: otherwise two concurrent requests could roll the
witness back).  A connection per transaction: the file is the only shared state, so
several threads or processes may serve one witness.

Refusals are bounded, because anyone can replay a public checkpoint: one row per origin,
status and ``digest`` (the caller's key: the witness uses the SHA-256 of the signed
checkpoint text), the first request kept and later ones only counted (``count``,
``last_at``); at most ``max_per_origin`` rows per origin, refusals beyond it only counted
in ``refusal_overflow``.  Rows written before the digest column existed keep a NULL digest.
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
CREATE TABLE IF NOT EXISTS refusal_overflow (
    origin TEXT PRIMARY KEY,
    dropped INTEGER NOT NULL
);
"""
# added to ``refusals`` of state files made before refusals were bounded
REFUSAL_COLUMNS = (("digest", "BLOB"), ("count", "INTEGER NOT NULL DEFAULT 1"),
                   ("last_at", "INTEGER"))
REFUSAL_INDEX = ("CREATE UNIQUE INDEX IF NOT EXISTS refusals_key"
                 " ON refusals (origin, status, digest)")
MAX_REFUSALS_PER_ORIGIN = 1000


@dataclass(frozen=True)
class LogState:
    """The latest checkpoint a witness cosigned for one origin."""

    origin: str
    size: int
    root_hash: bytes
    note: str
    updated_at: int


@dataclass(frozen=True)
class Refusal:
    """One kept refusal: the first request of its kind and how often it came."""

    origin: str | None
    status: int
    reason: str
    body: bytes
    received_at: int
    count: int
    last_at: int


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

    def __init__(self, path: str | Path,
                 max_refusals_per_origin: int = MAX_REFUSALS_PER_ORIGIN) -> None:
        self.path = Path(path)
        self.max_refusals_per_origin = max_refusals_per_origin
        self.path.parent.mkdir(parents=True, exist_ok=True)
        conn = self._connect()
        try:
            conn.executescript(SCHEMA)
        except sqlite3.Error as exc:
            raise StoreUnavailable(f"witness state {self.path}: {exc}") from exc
        finally:
            conn.close()
        with self.transaction() as txn:  # one process adds the columns, the others see them
            have = {r[1] for r in txn.conn.execute("PRAGMA table_info(refusals)")}
            for name, decl in REFUSAL_COLUMNS:
                if name not in have:
                    txn.conn.execute(f"ALTER TABLE refusals ADD COLUMN {name} {decl}")
            txn.conn.execute(REFUSAL_INDEX)

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
                       now_s: int, digest: bytes) -> None:
        """Keep a refused request (it may be evidence of a misbehaving log): the first one
        per (origin, status, digest), later ones counted; beyond the per-origin cap only
        counted in ``refusal_overflow``."""
        with self.transaction() as txn:
            c = txn.conn
            hit = c.execute("UPDATE refusals SET count = count + 1, last_at = ?"
                            " WHERE origin IS ? AND status = ? AND digest = ?",
                            (now_s, origin, status, digest)).rowcount
            if hit:
                return
            (kept,) = c.execute("SELECT count(*) FROM refusals WHERE origin IS ?",
                                (origin,)).fetchone()
            if kept >= self.max_refusals_per_origin:
                c.execute("INSERT INTO refusal_overflow (origin, dropped) VALUES (?, 1)"
                          " ON CONFLICT (origin) DO UPDATE SET dropped = dropped + 1",
                          (origin or "",))
                return
            c.execute("INSERT INTO refusals (received_at, origin, status, reason, body,"
                      " digest, count, last_at) VALUES (?, ?, ?, ?, ?, ?, 1, ?)",
                      (now_s, origin, status, reason, body, digest, now_s))

    def refusals(self) -> list[tuple[str | None, int, str]]:
        """(origin, status, reason) of every kept refusal, oldest first."""
        return [(r.origin, r.status, r.reason) for r in self.refusal_rows()]

    def refusal_rows(self) -> list[Refusal]:
        """Every kept refusal, oldest first."""
        with self.transaction() as txn:
            rows = txn.conn.execute("SELECT origin, status, reason, body, received_at,"
                                    " count, coalesce(last_at, received_at) FROM refusals"
                                    " ORDER BY id").fetchall()
        return [Refusal(r[0], int(r[1]), r[2], bytes(r[3]), int(r[4]), int(r[5]), int(r[6]))
                for r in rows]

    def dropped_refusals(self, origin: str) -> int:
        """Refusals of ``origin`` counted but not kept (the per-origin cap was reached)."""
        with self.transaction() as txn:
            row = txn.conn.execute("SELECT dropped FROM refusal_overflow WHERE origin = ?",
                                   (origin,)).fetchone()
        return 0 if row is None else int(row[0])
