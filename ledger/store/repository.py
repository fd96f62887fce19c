"""Reads and writes of already-computed rows.  Never hashes or signs.

Write functions take a Connection that is inside the append transaction (the
caller holds the head lock); read functions take any Connection.
"""

from __future__ import annotations

from collections import namedtuple
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, Engine, Row, select
from sqlalchemy.exc import OperationalError

from ledger.errors import StoreUnavailable
from ledger.store.schema import entries, head, ledger_meta, payloads, quarantine


@dataclass(frozen=True)
class Head:
    size: int
    head_hash: bytes
    last_recorded_at: int


@dataclass(frozen=True)
class LedgerMeta:
    ledger_id: str
    origin: str
    format_version: int
    created_at: int


ENTRY_COLUMNS = [c.name for c in entries.columns]


class _HotSQL:
    """Driver-level SQL for the append path (no per-row Core compilation)."""

    def __init__(self, pg: bool) -> None:
        ph = "%s" if pg else "?"
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

# PostgreSQL: lock the head, link and insert one entry, and move the head, in ONE
# statement (one round trip in autocommit).  The link is computed by the database
# exactly as ledger.core.entry.entry_hash computes it; the caller re-checks it.
_LINKED_COLUMNS = [c for c in ENTRY_COLUMNS
                   if c not in ("seq", "recorded_at", "prev_hash", "entry_hash")]
MAX_BIGINT = 2**63 - 1
_PG_APPEND_ONE = """
WITH h AS (SELECT size, head_hash, GREATEST(%s::bigint, last_recorded_at) AS ts
           FROM head WHERE id = 1 FOR UPDATE),
g AS (SELECT * FROM h WHERE h.ts < %s::bigint
      AND NOT EXISTS (SELECT 1 FROM entries WHERE kind = 'key_event' AND seq > %s::bigint)),
{payloads}
e AS (INSERT INTO entries (seq, recorded_at, prev_hash, entry_hash, {cols})
      SELECT g.size, g.ts, g.head_hash,
             sha256(%s::bytea || g.head_hash || int8send(g.size) || int8send(g.ts) || %s::bytea),
             {values}
      FROM g RETURNING seq, recorded_at, prev_hash, entry_hash),
u AS (UPDATE head SET size = e.seq + 1, head_hash = e.entry_hash,
      last_recorded_at = e.recorded_at FROM e WHERE head.id = 1)
SELECT seq, recorded_at, prev_hash, entry_hash FROM e
"""


def pg_append_one(conn: Connection, row: dict[str, Any], items: dict[str, bytes], now_us: int,
                  entry_tag: bytes, guard: tuple[int, int] | None = None,
                  ) -> tuple[int, int, bytes, bytes] | None:
    """Append one entry in one statement (PostgreSQL).  ``row`` holds every entries
    column but seq/recorded_at/prev_hash/entry_hash; returns those four.

    ``guard`` = (recorded_at must stay below this µs, no key_event after this seq);
    when it does not hold nothing is written (payloads included) and None is returned.
    """
    before, key_seq = guard if guard is not None else (MAX_BIGINT, MAX_BIGINT)
    params: list[Any] = [now_us, before, key_seq]
    payload_sql = ""
    if items:
        payload_sql = ("p AS (INSERT INTO payloads (digest, data) SELECT v.d, v.b FROM (VALUES "
                       + ", ".join(["(%s::varchar, %s::bytea)"] * len(items))
                       + ") AS v(d, b) WHERE EXISTS (SELECT 1 FROM g)"
                       " ON CONFLICT (digest) DO NOTHING),")
        for d, b in items.items():
            params += [d, b]
    sql = _PG_APPEND_ONE.format(payloads=payload_sql, cols=", ".join(_LINKED_COLUMNS),
                                values=", ".join(["%s"] * len(_LINKED_COLUMNS)))
    params += [entry_tag, row["body_hash"]]
    params += [row.get(c) for c in _LINKED_COLUMNS]
    got = conn.exec_driver_sql(sql, tuple(params)).first()
    if got is None:
        return None
    seq, t, prev, eh = got
    return seq, t, bytes(prev), bytes(eh)


# -- set-up -----------------------------------------------------------------
def read_meta(conn: Connection) -> LedgerMeta | None:
    row = conn.execute(select(ledger_meta).where(ledger_meta.c.id == 1)).first()
    if row is None:
        return None
    return LedgerMeta(row.ledger_id, row.origin, row.format_version, row.created_at)


def create_meta(conn: Connection, meta: LedgerMeta, genesis: bytes) -> None:
    conn.execute(ledger_meta.insert().values(
        id=1, ledger_id=meta.ledger_id, origin=meta.origin,
        format_version=meta.format_version, created_at=meta.created_at))
    conn.execute(head.insert().values(id=1, size=0, head_hash=genesis,
                                      last_recorded_at=meta.created_at))


# -- the append transaction (driver level: this is the hot path) ---------------
class AppendTxn:
    """Statements of one append transaction on a DBAPI cursor.

    The transaction holds the append lock from its first statement: SQLite
    opens it with ``BEGIN IMMEDIATE`` (the database write lock); PostgreSQL
    locks the one-row ``head`` table ``FOR UPDATE``.
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

    def find_idempotent(self, keys: Iterable[str]) -> dict[str, tuple[Any, ...]]:
        """key -> (seq, envelope, entry_hash, recorded_at) for keys already in the ledger."""
        keys = list(dict.fromkeys(keys))
        ph = "%s" if self.pg else "?"
        out: dict[str, tuple[Any, ...]] = {}
        for start in range(0, len(keys), 500):
            chunk = keys[start:start + 500]
            self.cur.execute(
                "SELECT idempotency_key, seq, envelope, entry_hash, recorded_at FROM entries "
                f"WHERE idempotency_key IN ({', '.join([ph] * len(chunk))})", tuple(chunk))
            for key, *rest in self.cur.fetchall():
                out[key] = tuple(rest)
        return out


@contextmanager
def append_transaction(engine: Engine) -> Iterator[AppendTxn]:
    """One append transaction on a pooled driver connection; commits on success.

    Driver errors (lock timeouts, lost connections) become StoreUnavailable.
    """
    pg = engine.dialect.name == "postgresql"
    dbapi_error = engine.dialect.loaded_dbapi.Error
    try:
        raw = engine.raw_connection()
    except OperationalError as exc:
        raise StoreUnavailable(f"cannot reach the database: {exc.orig}") from exc
    cur = raw.cursor()
    try:
        if not pg:
            cur.execute("BEGIN IMMEDIATE")
        yield AppendTxn(cur, pg)
        raw.commit() if pg else cur.execute("COMMIT")
    except dbapi_error as exc:
        _rollback(raw, cur, pg)
        raise StoreUnavailable(f"append transaction failed: {exc}") from exc
    except BaseException:
        _rollback(raw, cur, pg)
        raise
    finally:
        cur.close()
        raw.close()


def _rollback(raw: Any, cur: Any, pg: bool) -> None:
    try:
        if pg:
            raw.rollback()
        elif raw.driver_connection.in_transaction:
            cur.execute("ROLLBACK")
    except Exception:  # noqa: BLE001 - the original error is what matters
        pass


def read_head(conn: Connection) -> Head | None:
    row = conn.execute(select(head).where(head.c.id == 1)).first()
    if row is None:
        return None
    return Head(row.size, bytes(row.head_hash), row.last_recorded_at)


def insert_quarantine(conn: Connection, rows: Sequence[dict[str, Any]]) -> None:
    if rows:
        conn.execute(quarantine.insert(), list(rows))


# -- reads --------------------------------------------------------------------
def get_entry(conn: Connection, seq: int) -> Row[Any] | None:
    return conn.execute(select(entries).where(entries.c.seq == seq)).first()


def get_payloads(conn: Connection, digests: Iterable[str | None]) -> dict[str, bytes]:
    wanted = [d for d in set(digests) if d]
    if not wanted:
        return {}
    rows = conn.execute(select(payloads.c.digest, payloads.c.data).where(
        payloads.c.digest.in_(wanted)))
    return {r.digest: bytes(r.data) for r in rows}


def iter_entries(conn: Connection, start: int = 0, end: int | None = None,
                 batch: int = 2000) -> Iterator[Row[Any]]:
    """Entries with ``start <= seq < end`` in seq order, fetched in keyset pages."""
    pos = start
    while True:
        stmt = select(entries).where(entries.c.seq >= pos).order_by(entries.c.seq).limit(batch)
        if end is not None:
            stmt = stmt.where(entries.c.seq < end)
        rows = conn.execute(stmt).all()
        if not rows:
            return
        yield from rows
        pos = rows[-1].seq + 1


EntryRow = namedtuple("EntryRow", ENTRY_COLUMNS)  # type: ignore[misc]
_DIGEST_COLUMNS = ("doc_digest", "preimage_digest", "attestation_digest", "query_digest",
                   "meta_digest")
# The page is limited *before* the payload joins, so every planner does one index
# range scan of at most ``limit`` entries and primary-key lookups for payloads.
_PAGE_SQL = (
    "SELECT " + ", ".join(f"e.{c}" for c in ENTRY_COLUMNS) + ", "
    + ", ".join(f"p{i}.data" for i in range(len(_DIGEST_COLUMNS)))
    + " FROM (SELECT * FROM entries WHERE seq >= {ph} AND seq < {ph} ORDER BY seq"
    " LIMIT {limit}) e "
    + " ".join(f"LEFT JOIN payloads p{i} ON p{i}.digest = e.{c}"
               for i, c in enumerate(_DIGEST_COLUMNS))
    + " ORDER BY e.seq")


def iter_entry_pages(conn: Connection, start: int, end: int, page: int = 2000,
                     ) -> Iterator[list[tuple[EntryRow, dict[str, bytes]]]]:
    """Pages of (entry, {digest: payload bytes}) for ``start <= seq < end``, in seq order.

    One keyset query per page, payloads joined in (a missing payload is absent
    from the dict).  This is the audit's streaming read: memory is one page.
    """
    ph = "%s" if conn.dialect.name == "postgresql" else "?"
    sql = _PAGE_SQL.format(ph=ph, limit=int(page))
    n = len(ENTRY_COLUMNS)
    pos = start
    while pos < end:
        raw = conn.exec_driver_sql(sql, (pos, end)).fetchall()
        if not raw:
            return
        out = []
        for t in raw:
            row = EntryRow(*t[:n])
            blobs = {}
            for i, c in enumerate(_DIGEST_COLUMNS):
                d, data = getattr(row, c), t[n + i]
                if d is not None and data is not None:
                    # a tampered SQLite BLOB can come back as TEXT: hash what is stored
                    blobs[d] = data.encode("utf-8", "surrogatepass") if isinstance(data, str) \
                        else bytes(data)
            out.append((row, blobs))
        yield out
        pos = out[-1][0].seq + 1


def count_quarantine(conn: Connection) -> int:
    from sqlalchemy import func

    return conn.execute(select(func.count()).select_from(quarantine)).scalar_one()
