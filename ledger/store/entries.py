"""Reads of entries, payloads, the head and the ledger identity; set-up and quarantine.

Never hashes or signs.  Functions take a SQLAlchemy Connection (from
``db.connect`` or ``db.transaction``); write functions need a transaction.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from sqlalchemy import Connection, Row, String, and_, func, select, text, union_all

from ledger.errors import IntegrityError
from ledger.store import layout
from ledger.store.codec import decode
from ledger.store.db import (
    NOT_UTF8,
    STORED_TEXT_UNREADABLE,
    is_pg,
    placeholder,
    translate_errors,
)
from ledger.store.layout import SUBJECT_SLOT, pid_col, pid_range, seq_col
from ledger.store.schema import (
    audit_runs,
    entries,
    head,
    ledger_meta,
    payloads,
    quarantine,
    tenant_heads,
)


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
    """An entry's seq, its envelope and its main document's bytes (slot 0; None when
    not stored).  The digest the document must match is in the envelope."""

    seq: int
    envelope: bytes
    data: bytes | None


class _PayloadRow(NamedTuple):
    pid: int
    salt: Any
    codec: Any
    data: Any


class Payload(NamedTuple):
    """One stored payload: its salt (None for a plain-digest payload) and bytes."""

    salt: bytes | None
    data: bytes


ENTRY_COLUMNS = [c.name for c in entries.columns]


class EntryRow(NamedTuple):
    """A stored entry: the columns of ``entries`` in table order (a test pins the two lists
    equal).  The types are the schema's; a row written behind the ledger's back can hold
    others (on SQLite: a binary column's TEXT as str, a string column's undecodable TEXT as
    bytes), which the readers check rather than trust (``core.readcheck``, the audit)."""

    seq: int
    kind: str
    recorded_at: int
    engine: str | None
    status: str | None
    constraint_id: str | None
    proof_ref: str | None
    subject: str | None
    producer: str | None
    idempotency_key: str | None
    admission: str | None
    att_verdict: str | None
    att_kid: str | None
    att_iss: str | None
    envelope: bytes
    body_hash: bytes
    prev_hash: bytes
    entry_hash: bytes
    tenant: str = "default"
    tseq: int | None = None  # None: an entry from before tenants (its tseq is its seq)


Slots = dict[int, Payload]  # slot -> payload of one entry


def _bytes(data: Any) -> bytes:
    # a tampered SQLite BLOB can come back as TEXT: hash what is stored
    return data.encode("utf-8", "surrogatepass") if isinstance(data, str) else bytes(data)


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
    conn.execute(tenant_heads.insert().values(tenant="default", size=0, head_hash=genesis))


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


def tenant_last_before(conn: Connection, tenant: str, seq: int) -> tuple[int, int, bytes] | None:
    """(seq, tseq, entry_hash) of ``tenant``'s last entry below ``seq``; None when it has
    none.  A pre-tenant entry's NULL tseq reads as its seq."""
    row = conn.execute(
        select(entries.c.seq, entries.c.tseq, entries.c.entry_hash)
        .where(entries.c.tenant == tenant, entries.c.seq < seq)
        .order_by(entries.c.seq.desc()).limit(1)).first()
    if row is None:
        return None
    return row.seq, (row.seq if row.tseq is None else row.tseq), _bytes(row.entry_hash)


def read_tenant_heads(conn: Connection) -> dict[str, tuple[int, bytes]]:
    """tenant -> (size, head hash) as ``tenant_heads`` records them."""
    return {r.tenant: (int(r.size), _bytes(r.head_hash))
            for r in conn.execute(select(tenant_heads)).all()}


def max_seq(conn: Connection, kind: str | None = None) -> int | None:
    """The largest stored seq (of entries of ``kind``), None when there is none."""
    stmt = select(func.max(entries.c.seq))
    if kind is not None:
        stmt = stmt.where(entries.c.kind == kind)
    v = conn.execute(stmt).scalar()
    return None if v is None else int(v)


def doc_refs(conn: Connection, kind: str, *, after: int = -1,
             status: str | None = None) -> list[DocRef]:
    """(seq, envelope, document bytes) of the entries of ``kind`` (and ``status``) with
    seq > ``after``, in seq order."""
    doc = payloads.alias("doc")
    stmt = select(entries.c.seq, entries.c.envelope, doc.c.data).select_from(
        entries.outerjoin(doc, doc.c.pid == pid_col(entries.c.seq))).where(
        entries.c.kind == kind, entries.c.seq > after)
    if status is not None:
        stmt = stmt.where(entries.c.status == status)
    return [DocRef(r.seq, _bytes(r.envelope), None if r.data is None else _bytes(r.data))
            for r in conn.execute(stmt.order_by(entries.c.seq))]


# The predicate of the partial index ix_payloads_subject, as literal SQL: a planner uses a
# partial index only when the query states its predicate with the same constants.
_IS_SUBJECT = text(layout.is_slot_sql("payloads.pid", SUBJECT_SLOT))


def subject_seqs(conn: Connection, subject: str, *, after: int = -1,
                 end: int | None = None) -> list[int]:
    """The seqs of the entries of ``subject`` (seq > ``after``, < ``end``), in seq order:
    v1 rows by their ``subject`` column, v2 rows by their subject payload (slot 5,
    bytes = UTF-8 of the subject; the partial index ``ix_payloads_subject``).  An erased
    subject payload no longer finds its entry."""
    hi = end if end is not None else layout.MAX_SEQ  # every pid of it stays a bigint
    v1 = select(entries.c.seq).where(entries.c.subject == subject, entries.c.seq > after,
                                     entries.c.seq < hi)
    v2 = select(seq_col(payloads.c.pid).label("seq")).where(
        _IS_SUBJECT,
        payloads.c.data == subject.encode("utf-8"),
        payloads.c.pid > layout.pid(after, SUBJECT_SLOT),
        payloads.c.pid < layout.pid(hi))
    seqs = {int(r[0]) for r in conn.execute(v1)} | {int(r[0]) for r in conn.execute(v2)}
    return sorted(seqs)


def subject_condition(values: tuple[str, ...]) -> Any:
    """A WHERE term on ``entries``: the entry's subject is one of ``values`` (v1 column or
    v2 subject payload).  ``seq IN (v1 seqs UNION ALL v2 seqs)``: each side is one index
    probe (``ix_entries_subject_seq``, the partial ``ix_payloads_subject``), and the page
    then walks the primary key in seq order -- an ``OR`` of the two would make both
    planners give up the index order."""
    col = entries.c.subject == values[0] if len(values) == 1 else entries.c.subject.in_(values)
    blobs = [v.encode("utf-8") for v in values]
    v2 = select(seq_col(payloads.c.pid).label("seq")).where(
        _IS_SUBJECT,
        payloads.c.data == blobs[0] if len(blobs) == 1 else payloads.c.data.in_(blobs))
    return entries.c.seq.in_(union_all(select(entries.c.seq.label("seq")).where(col), v2))


# -- reads --------------------------------------------------------------------
def rows_as_stored(conn: Connection, stmt: Any, text_columns: Sequence[int] = ()) -> list[Any]:
    """The rows of ``stmt``, as tuples.  On SQLite, when a value is TEXT that is not UTF-8
    (written behind the ledger's back, which sqlite3 cannot decode), the statement is run
    again with the connection's text factory set to bytes: every value comes back as
    stored, the string columns at ``text_columns`` decoded where they are UTF-8 and left as
    bytes where not (which no envelope field equals: the reader flags the row)."""
    try:
        return [tuple(r) for r in conn.execute(stmt)]
    except IntegrityError as exc:
        if exc.code != STORED_TEXT_UNREADABLE or is_pg(conn):
            raise
    raw = conn.connection.driver_connection
    factory = raw.text_factory  # type: ignore[union-attr]
    raw.text_factory = bytes  # type: ignore[union-attr]
    try:
        rows = [list(r) for r in conn.execute(stmt)]
    finally:
        raw.text_factory = factory  # type: ignore[union-attr]
    for values in rows:
        for i in text_columns:
            if isinstance(values[i], bytes):
                try:
                    values[i] = values[i].decode("utf-8")
                except UnicodeDecodeError:
                    pass  # as stored
    return [tuple(v) for v in rows]


def get_entry(conn: Connection, seq: int) -> EntryRow | None:
    """The entry at ``seq`` (string columns holding undecodable text as stored bytes)."""
    rows = rows_as_stored(conn, select(entries).where(entries.c.seq == seq), _TEXT_COLUMNS)
    return EntryRow(*rows[0]) if rows else None


def get_payloads(conn: Connection, seq: int, slots: tuple[int, ...] | None = None) -> Slots:
    """The stored payloads of the entry at ``seq`` (of ``slots``, default all)."""
    lo, hi = layout.pid_range(seq, seq + 1)
    stmt = select(payloads.c.pid, payloads.c.salt, payloads.c.codec, payloads.c.data).where(
        payloads.c.pid >= lo, payloads.c.pid < hi)
    out: Slots = {}
    for r in map(lambda t: _PayloadRow(*t), rows_as_stored(conn, stmt)):
        slot = layout.slot_of(r.pid)
        if slots is None or slot in slots:
            out[slot] = Payload(None if r.salt is None else _bytes(r.salt),
                                decode(r.codec, _bytes(r.data)))
    return out


def payload_rows(conn: Connection, start: int, end: int,
                 slots: tuple[int, ...] | None = None) -> dict[int, Slots]:
    """seq -> {slot: payload} for ``start <= seq < end``: one ordered range read of the
    primary key (``slots`` restricts which are returned, not what is read)."""
    out: dict[int, Slots] = {}
    lo, hi = layout.pid_range(start, end)
    rows = conn.execute(select(payloads.c.pid, payloads.c.salt, payloads.c.codec,
                               payloads.c.data).where(
        and_(payloads.c.pid >= lo, payloads.c.pid < hi))
        .order_by(payloads.c.pid))
    for pid, salt, how, data in rows:
        seq, slot = layout.split(pid)
        if slots is None or slot in slots:
            out.setdefault(seq, {})[slot] = Payload(None if salt is None else _bytes(salt),
                                                    decode(how, _bytes(data)))
    return out


def iter_entries(conn: Connection, start: int = 0, end: int | None = None,
                 batch: int = 2000) -> Iterator[Row[Any]]:
    """Entries with ``start <= seq < end`` in seq order, fetched in windows of ``batch``
    seqs (as :func:`iter_entry_pages`, which says why)."""
    below_end = [] if end is None else [entries.c.seq < end]
    pos = start
    while end is None or pos < end:
        hi = pos + batch if end is None else min(end, pos + batch)
        rows = conn.execute(select(entries).where(entries.c.seq >= pos, entries.c.seq < hi)
                            .order_by(entries.c.seq)).all()
        if rows:
            yield from rows
            pos = hi
            continue
        nxt = conn.execute(select(func.min(entries.c.seq)).where(
            entries.c.seq >= hi, *below_end)).scalar()
        if nxt is None:
            return
        pos = int(nxt)


_ENTRY_PAGE = ("SELECT " + ", ".join(ENTRY_COLUMNS) + " FROM entries WHERE seq >= {ph} "
               "AND seq < {ph} ORDER BY seq LIMIT {limit}")
_NEXT_SEQ = "SELECT MIN(seq) FROM entries WHERE seq >= {ph} AND seq < {ph}"
_PAYLOAD_PAGE = ("SELECT pid, salt, data, codec FROM payloads WHERE pid >= {ph} "
                 "AND pid < {ph} ORDER BY pid")
# SQLite: a value written behind the ledger's back as TEXT that is not UTF-8 makes sqlite3
# fail the whole fetch ("Could not decode to UTF-8 column ...").  The window is then read
# again with the connection's text_factory set to bytes, so that every value comes back as
# stored: the binary columns as their bytes (as for any TEXT they hold), a string column's
# TEXT decoded where it is UTF-8 and left as bytes where not (which the audit then reports
# as differing from the envelope); typeof() tells a string column's TEXT from its BLOB.
_TEXT_COLUMNS = tuple(i for i, c in enumerate(entries.columns) if isinstance(c.type, String))
TEXT_COLUMNS = _TEXT_COLUMNS
_ENTRY_PAGE_AS_STORED = ("SELECT " + ", ".join(ENTRY_COLUMNS) + ", "
                         + ", ".join(f"typeof({ENTRY_COLUMNS[i]})" for i in _TEXT_COLUMNS)
                         + " FROM entries WHERE seq >= ? AND seq < ? ORDER BY seq LIMIT {limit}")


def iter_entry_pages(conn: Connection, start: int, end: int, page: int = 2000, *,
                     with_payloads: bool = True) -> Iterator[Page]:
    """Pages (:class:`Page`) of (entry, {slot: payload}) for ``start <= seq < end``, in seq
    order.

    Two ordered range reads per page -- the entries of a window of ``page`` seqs, then the
    payload rows ``layout.pid_range(first seq, last seq + 1)`` of the payload table, which is
    laid out by entry -- and no per-row round trip.  This is the audit's streaming read:
    memory is one page.  A missing payload is absent from its entry's dict
    (``with_payloads=False``: no payload is read, every dict is empty).

    (A read-ahead thread that fetched the next window while the caller checked this one
    saved 11 % of the audit's time on PostgreSQL while a page was built whole; with
    :class:`Page` the audit measured 10-25 % slower with it than without, also when the
    thread only ran the queries, and it was removed: docs/performance.md.)
    """
    pg = is_pg(conn)
    ph = placeholder(pg)
    sql = (_ENTRY_PAGE.format(ph=ph, limit=int(page)), _NEXT_SEQ.format(ph=ph),
           _PAYLOAD_PAGE.format(ph=ph))
    # the DBAPI cursor of the connection's transaction: no result-row objects per row.  On
    # PostgreSQL a binary-format cursor: bytea and bigint arrive as they are stored instead of
    # as hex and decimal text for psycopg to parse (half the reader's CPU a row; the values
    # and their Python types are the same -- docs/performance.md)
    with translate_errors("audit read"):
        cur = conn.connection.cursor(binary=True) if pg else conn.connection.cursor()
    got = _read_window(cur, sql, start, end, page, with_payloads)
    while got is not None:
        yield Page(*got[:2])
        got = _read_window(cur, sql, got[2], end, page, with_payloads)


def _read_window(cur: Any, sql: tuple[str, str, str], pos: int, end: int, page: int,
                 with_payloads: bool = True) -> tuple[list[Any], list[Any], int] | None:
    """(entry rows, payload rows, the next window's start) of the first window at or after
    ``pos`` that holds an entry; None when no entry is left before ``end``."""
    esql, nsql, psql = sql
    with translate_errors("audit read"):
        while pos < end:
            # a window of seqs, not "the next ``page`` rows from pos": a planner that
            # misjudges the table (PostgreSQL before its first ANALYZE) then still reads one
            # page a query, where ``seq >= pos ... LIMIT`` had it fetch and sort every row to
            # the end of the range for every page (quadratic in the range: docs/performance.md)
            hi = min(end, pos + page)
            raw = _fetch(cur, esql, (pos, hi), page)
            if raw:
                return raw, _fetch(cur, psql, layout.pid_range(raw[0][0], raw[-1][0] + 1)) \
                    if with_payloads else [], hi
            # a gap of a whole window (rows deleted behind the ledger's back): on to the
            # next stored row, if any
            cur.execute(nsql, (hi, end))
            nxt = cur.fetchone()[0]
            if nxt is None:
                return None
            pos = int(nxt)
    return None


def _fetch(cur: Any, sql: str, params: tuple[int, int], page: int | None = None) -> list[Any]:
    """All rows of ``sql``; on SQLite, rows holding TEXT that is not UTF-8 as stored (see
    :data:`_ENTRY_PAGE_AS_STORED`; ``page`` given: the entries query)."""
    try:
        cur.execute(sql, params)
        fetched: list[Any] = cur.fetchall()
        return fetched
    except sqlite3.OperationalError as exc:
        if not str(exc).startswith(NOT_UTF8):
            raise
    con = cur.connection
    factory = con.text_factory
    con.text_factory = bytes
    try:
        if page is None:  # the payload query: salt and data are binary columns
            cur.execute(sql, params)
            fetched = cur.fetchall()
            return fetched
        cur.execute(_ENTRY_PAGE_AS_STORED.format(limit=int(page)), params)
        rows = cur.fetchall()
    finally:
        con.text_factory = factory
    width = len(ENTRY_COLUMNS)
    out = []
    for r in rows:
        values = list(r[:width])
        for i, kind in zip(_TEXT_COLUMNS, r[width:], strict=True):
            if kind == b"text":  # (typeof's own answer is TEXT, read as bytes here)
                try:
                    values[i] = values[i].decode("utf-8")
                except UnicodeDecodeError:
                    pass  # as stored: bytes, which no envelope field equals
        out.append(tuple(values))
    return out


class Page:
    """One window of entries with their payloads: ``len(page)`` entries, ``page.next_seq``
    (the seq after its last entry), and iterating gives ``(EntryRow, {slot: (salt, data)})``
    in seq order, each built only when it is reached (a payload missing from the table is
    absent from its entry's dict).

    Built lazily for the garbage collector's sake, not to save memory: the fetched rows are
    plain tuples of bytes, ints and strings, which the collector stops tracking at its first
    pass, while the named tuples, dicts and pairs made from them are tracked containers.
    Made for a whole page at once they outlived the young generations, were promoted, and
    set off a full collection of every live object about every two pages (14 full
    collections in a 20,000-row audit, ~25 % of its time); made one entry at a time, each
    dies before the next collection (1 full collection; docs/performance.md)."""

    __slots__ = ("_payloads", "_raw")

    def __init__(self, raw: list[Any], payload_rows: list[Any]) -> None:
        self._raw = raw
        self._payloads = payload_rows  # in pid order: an entry's payloads are adjacent

    def __len__(self) -> int:
        return len(self._raw)

    @property
    def next_seq(self) -> int:
        return int(self._raw[-1][0]) + 1

    def __iter__(self) -> Iterator[tuple[EntryRow, dict[int, tuple[bytes | None, bytes]]]]:
        rows = iter(self._payloads)
        nxt = next(rows, None)
        for t in self._raw:
            seq = t[0]
            # slot -> a plain (salt, data) pair, not a Payload: the hot path
            slots: dict[int, tuple[bytes | None, bytes]] = {}
            lo, hi = pid_range(seq, seq + 1)
            while nxt is not None and nxt[0] < lo:  # of no stored entry
                nxt = next(rows, None)
            while nxt is not None and nxt[0] < hi:
                pid, salt, data, how = nxt
                if type(data) is not bytes:
                    data = _bytes(data)
                if how:
                    data = decode(how, data)
                if salt is not None and type(salt) is not bytes:
                    salt = _bytes(salt)
                # the slot is the row's offset in its entry's range; a plain (salt, data)
                # pair: the hot path
                slots[pid - lo] = (salt, data)
                nxt = next(rows, None)
            yield EntryRow(*t), slots


class NextRow(NamedTuple):
    """The stored entry that may be the next of a tenant's chain: its seq, tenant, stored
    tseq (None: from before tenants) and ``prev_hash``."""

    seq: int
    tenant: Any
    tseq: int | None
    prev_hash: bytes


def next_links(conn: Connection, seqs: Sequence[int]) -> dict[int, NextRow]:
    """seq -> the entry at ``seq + 1``, for each of ``seqs`` whose next entry is stored (one
    indexed read; the reader links an entry to it when it is of the same tenant)."""
    if not seqs:
        return {}
    nxt = sorted({s + 1 for s in seqs})
    c = entries.c
    rows = conn.execute(select(c.seq, c.tenant, c.tseq, c.prev_hash).where(
        c.seq.in_(nxt) if len(nxt) < 2 or nxt[-1] - nxt[0] >= 4 * len(nxt)
        else and_(c.seq >= nxt[0], c.seq <= nxt[-1])))
    wanted = set(nxt)
    return {int(s) - 1: NextRow(int(s), t, ts, _bytes(p))
            for s, t, ts, p in rows if int(s) in wanted}


def tenant_next(conn: Connection, tenant: str, seq: int) -> NextRow | None:
    """The first stored entry of ``tenant`` after ``seq`` (one probe of the ``(tenant,
    seq)`` index); None when there is none."""
    c = entries.c
    row = conn.execute(select(c.seq, c.tenant, c.tseq, c.prev_hash).where(
        c.tenant == tenant, c.seq > seq).order_by(c.seq).limit(1)).first()
    return None if row is None else NextRow(int(row[0]), row[1], row[2], _bytes(row[3]))


def stored_between(conn: Connection, lo: int, hi: int) -> bool:
    """Whether every seq strictly between ``lo`` and ``hi`` is stored (no entry deleted
    between them)."""
    if hi - lo <= 1:
        return True
    n = conn.execute(select(func.count()).select_from(entries).where(
        entries.c.seq > lo, entries.c.seq < hi)).scalar_one()
    return int(n) == hi - lo - 1


def tenant_head(conn: Connection, tenant: str) -> tuple[int, bytes] | None:
    """(size, head hash) that ``tenant_heads`` records for ``tenant``; None without a row."""
    row = conn.execute(select(tenant_heads.c.size, tenant_heads.c.head_hash).where(
        tenant_heads.c.tenant == tenant)).first()
    return None if row is None else (int(row[0]), _bytes(row[1]))


@dataclass(frozen=True)
class ReadState:
    """What a verified read needs besides its rows, read in one statement: the head, the
    last redaction entry (is the redaction map current?), the latest complete audit run
    and whether a run begun after it is still running (whose findings apply), and the
    ``prev_hash`` and the tenant of the entry after a page's last row."""

    head_size: int | None
    head_hash: bytes | None
    last_redaction: int | None
    latest_complete_run: int | None
    later_running: bool
    next_prev: bytes | None
    next_tenant: Any = None


def state_columns() -> list[Any]:
    """The scalar subqueries of a :class:`ReadState` but ``next_prev`` (head size, head hash,
    last redaction, latest complete run, later running runs), to add to a page's SELECT:
    each is evaluated once per statement."""
    h = select(head.c.size).where(head.c.id == 1).scalar_subquery()
    hh = select(head.c.head_hash).where(head.c.id == 1).scalar_subquery()
    red = select(func.max(entries.c.seq)).where(entries.c.kind == "redaction") \
        .scalar_subquery()
    done = select(func.max(audit_runs.c.id)).where(audit_runs.c.state == "complete",
                                                   audit_runs.c.job == "audit") \
        .scalar_subquery()
    later = select(func.count()).select_from(audit_runs).where(
        audit_runs.c.state == "running", audit_runs.c.job == "audit",
        audit_runs.c.id > func.coalesce(done, -1)).scalar_subquery()
    return [h.label("st_head_size"), hh.label("st_head_hash"), red.label("st_redaction"),
            done.label("st_complete_run"), later.label("st_later_running")]


STATE_COLUMNS = 5


def state_of(values: Sequence[Any], next_prev: Any = None,
             next_tenant: Any = None) -> ReadState:
    """The :class:`ReadState` of the values of :func:`state_columns` (in that order)."""
    size, h, red, done, later = values
    return ReadState(None if size is None else int(size), None if h is None else _bytes(h),
                     None if red is None else int(red), None if done is None else int(done),
                     bool(later), None if next_prev is None else _bytes(next_prev),
                     next_tenant)


def read_state(conn: Connection, next_seq: int | None) -> ReadState:
    """:class:`ReadState`, with ``next_prev`` and ``next_tenant`` the stored ``prev_hash``
    and tenant of the entry at ``next_seq`` (None: not asked, or no such entry)."""
    at = entries.c.seq == (-1 if next_seq is None else next_seq)
    nxt = select(entries.c.prev_hash).where(at).scalar_subquery()
    tenant = select(entries.c.tenant).where(at).scalar_subquery()
    row = conn.execute(select(*state_columns(), nxt, tenant)).one()
    return state_of(row[:STATE_COLUMNS], row[STATE_COLUMNS], row[STATE_COLUMNS + 1])
