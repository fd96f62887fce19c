"""Reads of entries, payloads, the head and the ledger identity; set-up and quarantine.

Never hashes or signs.  Functions take a SQLAlchemy Connection (from
``db.connect`` or ``db.transaction``); write functions need a transaction.
"""

from __future__ import annotations

from collections import namedtuple
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, Row, func, select

from ledger.store.db import is_pg, placeholder
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


@dataclass(frozen=True)
class Link:
    """What the next entry links to: an entry's hash and its recorded time."""

    seq: int
    entry_hash: bytes
    recorded_at: int


@dataclass(frozen=True)
class DocRef:
    """An entry's seq and its main document's digest (``doc_digest``)."""

    seq: int
    doc_digest: str | None


ENTRY_COLUMNS = [c.name for c in entries.columns]
EntryRow = namedtuple("EntryRow", ENTRY_COLUMNS)  # type: ignore[misc]
DIGEST_COLUMNS = ("doc_digest", "preimage_digest", "attestation_digest", "query_digest",
                  "meta_digest")


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


def has_schema(conn: Connection) -> bool:
    """Whether the ledger tables exist (asked of the catalog, not of an error message)."""
    from sqlalchemy import inspect

    return bool(inspect(conn).has_table("ledger_meta"))


def read_head(conn: Connection) -> Head | None:
    row = conn.execute(select(head).where(head.c.id == 1)).first()
    if row is None:
        return None
    return Head(row.size, bytes(row.head_hash), row.last_recorded_at)


def insert_quarantine(conn: Connection, rows: Sequence[dict[str, Any]]) -> None:
    if rows:
        conn.execute(quarantine.insert(), list(rows))


# -- single values ------------------------------------------------------------
def entry_hash_at(conn: Connection, seq: int) -> bytes | None:
    """The stored entry_hash of the entry at ``seq`` (None: no such entry)."""
    h = conn.execute(select(entries.c.entry_hash).where(entries.c.seq == seq)).scalar()
    return None if h is None else bytes(h)


def link_at(conn: Connection, seq: int) -> Link | None:
    """(entry_hash, recorded_at) of the entry at ``seq`` (None: no such entry)."""
    row = conn.execute(select(entries.c.entry_hash, entries.c.recorded_at).where(
        entries.c.seq == seq)).first()
    return None if row is None else Link(seq, bytes(row.entry_hash), row.recorded_at)


def max_seq(conn: Connection, kind: str | None = None) -> int | None:
    """The largest stored seq (of entries of ``kind``), None when there is none."""
    stmt = select(func.max(entries.c.seq))
    if kind is not None:
        stmt = stmt.where(entries.c.kind == kind)
    v = conn.execute(stmt).scalar()
    return None if v is None else int(v)


def doc_refs(conn: Connection, kind: str, *, after: int = -1,
             status: str | None = None) -> list[DocRef]:
    """(seq, doc_digest) of the entries of ``kind`` (and ``status``) with seq > ``after``."""
    stmt = select(entries.c.seq, entries.c.doc_digest).where(
        entries.c.kind == kind, entries.c.seq > after)
    if status is not None:
        stmt = stmt.where(entries.c.status == status)
    return [DocRef(r.seq, r.doc_digest) for r in conn.execute(stmt.order_by(entries.c.seq))]


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


# The page is limited *before* the payload joins, so every planner does one index
# range scan of at most ``limit`` entries and primary-key lookups for payloads.
_PAGE_SQL = (
    "SELECT " + ", ".join(f"e.{c}" for c in ENTRY_COLUMNS) + ", "
    + ", ".join(f"p{i}.data" for i in range(len(DIGEST_COLUMNS)))
    + " FROM (SELECT * FROM entries WHERE seq >= {ph} AND seq < {ph} ORDER BY seq"
    " LIMIT {limit}) e "
    + " ".join(f"LEFT JOIN payloads p{i} ON p{i}.digest = e.{c}"
               for i, c in enumerate(DIGEST_COLUMNS))
    + " ORDER BY e.seq")


def iter_entry_pages(conn: Connection, start: int, end: int, page: int = 2000,
                     ) -> Iterator[list[tuple[EntryRow, dict[str, bytes]]]]:
    """Pages of (entry, {digest: payload bytes}) for ``start <= seq < end``, in seq order.

    One keyset query per page, payloads joined in (a missing payload is absent
    from the dict).  This is the audit's streaming read: memory is one page.
    """
    sql = _PAGE_SQL.format(ph=placeholder(is_pg(conn)), limit=int(page))
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
            for i, c in enumerate(DIGEST_COLUMNS):
                d, data = getattr(row, c), t[n + i]
                if d is not None and data is not None:
                    # a tampered SQLite BLOB can come back as TEXT: hash what is stored
                    blobs[d] = data.encode("utf-8", "surrogatepass") if isinstance(data, str) \
                        else bytes(data)
            out.append((row, blobs))
        yield out
        pos = out[-1][0].seq + 1
