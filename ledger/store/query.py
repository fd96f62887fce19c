"""The query statements: equality filters as bound parameters, keyset pages.

A page is ``WHERE <column = value | column IN (...)> AND lo <= seq < hi AND seq >
after ORDER BY seq LIMIT n`` with the payloads joined in.  Every filter value is a
bound parameter (SQLAlchemy Core), so quotes, ``%``, ``_`` and SQL fragments are
just text.  The rules (which filters, layers, time windows) are ``ledger.ops.query``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from sqlalchemy import ColumnElement, Connection, FromClause, LargeBinary, and_, cast, func, select

from ledger.errors import IntegrityError
from ledger.store.audit_runs import finding_seq_select
from ledger.store.codec import decode
from ledger.store.db import STORED_TEXT_UNREADABLE
from ledger.store.entries import (
    ENTRY_COLUMNS,
    STATE_COLUMNS,
    TEXT_COLUMNS,
    EntryRow,
    Payload,
    ReadState,
    Slots,
    rows_as_stored,
    state_columns,
    state_of,
    subject_condition,
)
from ledger.store.layout import pid_col
from ledger.store.schema import entries, payloads

Equal = Mapping[str, tuple[str, ...]]  # entries column -> accepted values (empty: any)
_N = len(ENTRY_COLUMNS)


def first_seq_at(conn: Connection, t_us: int) -> int | None:
    """Smallest seq recorded at or after ``t_us`` (an index probe on recorded_at)."""
    return conn.execute(select(entries.c.seq).where(entries.c.recorded_at >= t_us)
                        .order_by(entries.c.recorded_at, entries.c.seq).limit(1)).scalar()


def _conditions(equal: Equal, lo: int, hi: int | None, after: int,
                finding_runs: Sequence[int] | None, before: int | None = None) -> list[Any]:
    conds = [entries.c.seq >= lo, entries.c.seq > after]
    if hi is not None:
        conds.append(entries.c.seq < hi)
    if before is not None:
        conds.append(entries.c.seq < before)
    if finding_runs is not None:
        conds.append(entries.c.seq.in_(finding_seq_select(finding_runs)))
    for name, values in equal.items():
        if name == "subject" and values:
            conds.append(subject_condition(tuple(values)))
        elif len(values) == 1:
            conds.append(entries.c[name] == values[0])
        elif values:
            conds.append(entries.c[name].in_(values))
    return conds


def statement(equal: Equal, lo: int, hi: int | None, after: int, limit: int | None,
              slots: Iterable[int] = (0,), finding_runs: Sequence[int] | None = None,
              extra: Sequence[Any] = (), before: int | None = None,
              descending: bool = False) -> Any:
    """The SELECT of one page: entries columns plus the joined payload salt and bytes of
    ``slots`` (labelled ``s<slot>_salt`` / ``s<slot>_data`` / ``s<slot>_codec``; joined on
    ``layout.pid_col``).
    ``subject`` matches the v1 column or the v2 subject payload; ``finding_runs`` (not None)
    keeps only the entries the findings of those audit runs are about; ``extra`` columns
    follow the payloads'."""
    joined: FromClause = entries
    cols: list[FromClause | ColumnElement[Any]] = [entries]
    for slot in slots:
        p = payloads.alias(f"p_{slot}")
        joined = joined.outerjoin(p, p.c.pid == pid_col(entries.c.seq, slot))
        cols += [p.c.salt.label(f"s{slot}_salt"), p.c.data.label(f"s{slot}_data"),
                 p.c.codec.label(f"s{slot}_codec")]
    conds = _conditions(equal, lo, hi, after, finding_runs, before)
    order = entries.c.seq.desc() if descending else entries.c.seq
    stmt = select(*cols, *extra).select_from(joined).where(and_(*conds)).order_by(order)
    return stmt.limit(limit) if limit is not None else stmt


def count_matches(conn: Connection, equal: Equal, lo: int, hi: int | None,
                  finding_runs: Sequence[int] | None = None) -> int:
    """How many entries the equality filters, the seq window and the finding runs select
    by their indexed columns (no payloads are read, nothing is checked)."""
    conds = _conditions(equal, lo, hi, -1, finding_runs)
    return int(conn.execute(select(func.count()).select_from(entries)
                            .where(and_(*conds))).scalar_one())


def distinct_values(conn: Connection, column: str, limit: int, kind: str | None = None,
                    tenant: str | None = None) -> list[str]:
    """Up to ``limit`` distinct non-null values of the indexed ``column`` (of the entries
    of ``kind`` and of ``tenant`` only, when given), sorted."""
    c = entries.c[column]
    conds = [c.is_not(None)] + ([entries.c.kind == kind] if kind is not None else []) \
        + ([entries.c.tenant == tenant] if tenant is not None else [])
    return [str(v) for v in conn.execute(select(c).where(*conds).distinct()
                                         .order_by(c).limit(limit)).scalars()]


def seq_of_entry_hash(conn: Connection, entry_hash: bytes, tenant: str | None = None,
                      ) -> int | None:
    """The smallest seq whose stored ``entry_hash`` is ``entry_hash`` (one probe of
    ``ix_entries_entry_hash``, revision 0012), among ``tenant``'s entries when given.

    The rows are fetched and their smallest seq taken here: ``min(seq)`` in SQL lets
    PostgreSQL's planner walk the primary key in seq order instead, filtering every row
    before the match, whenever its statistics are stale (a freshly loaded table)."""
    conds = [entries.c.entry_hash == entry_hash] + (
        [entries.c.tenant == tenant] if tenant is not None else [])
    seqs = conn.execute(select(entries.c.seq).where(*conds)).scalars().all()
    return min(seqs) if seqs else None


def select_page(conn: Connection, equal: Equal, lo: int, hi: int | None, after: int,
                limit: int | None, slots: tuple[int, ...],
                finding_runs: Sequence[int] | None = None, before: int | None = None,
                descending: bool = False) -> list[tuple[EntryRow, Slots]]:
    """One page of (entry as a namedtuple — cheap attribute access —, {slot: payload})
    in seq order; payloads of ``slots`` only, missing ones absent."""
    return select_page_with_state(conn, equal, lo, hi, after, limit, slots, finding_runs,
                                  state=False, before=before, descending=descending)[0]


def select_page_with_state(conn: Connection, equal: Equal, lo: int, hi: int | None,
                           after: int, limit: int | None, slots: tuple[int, ...],
                           finding_runs: Sequence[int] | None = None, *, state: bool = True,
                           before: int | None = None, descending: bool = False,
                           ) -> tuple[list[tuple[EntryRow, Slots]], ReadState | None]:
    """:func:`select_page` and, in the same statement, the :class:`ReadState` a verified
    read needs (without ``next_prev``; None when the page is empty or not asked)."""
    out = []
    extra = state_columns() if state else []
    stmt = statement(equal, lo, hi, after, limit, slots, finding_runs, extra, before,
                     descending)
    got: ReadState | None = None
    end = _N + 3 * len(slots)
    for t in rows_as_stored(conn, stmt, TEXT_COLUMNS):
        blobs: Slots = {}
        for i, slot in enumerate(slots):
            salt, data, how = t[_N + 3 * i], t[_N + 3 * i + 1], t[_N + 3 * i + 2]
            if data is not None:
                blobs[slot] = Payload(None if salt is None else bytes(salt),
                                      decode(how, bytes(data)))
        out.append((EntryRow(*t[:_N]), blobs))
        if state and got is None:
            got = state_of(t[end:end + STATE_COLUMNS])
    return out, got


def explain_page(conn: Connection, equal: Equal, lo: int, hi: int | None, after: int,
                 limit: int | None, slots: tuple[int, ...],
                 finding_runs: Sequence[int] | None = None) -> list[str]:
    """The database's plan for one page (EXPLAIN QUERY PLAN / EXPLAIN), one line each."""
    stmt = statement(equal, lo, hi, after, limit, slots, finding_runs)
    compiled = stmt.compile(conn, compile_kwargs={"literal_binds": True})
    sqlite = conn.dialect.name == "sqlite"
    prefix = "EXPLAIN QUERY PLAN " if sqlite else "EXPLAIN "
    return [" ".join(str(c) for c in r) if sqlite else str(r[0])
            for r in conn.exec_driver_sql(prefix + str(compiled)).all()]


def summary_rows(conn: Connection, lo: int, hi: int | None, page: int = 5000,
                 ) -> Iterable[tuple[int, int, str, str | None, str | None, str | None]]:
    """``(seq, recorded_at, kind, status, engine, att_verdict)`` of every entry with
    ``lo <= seq < hi``, in seq order, read in keyset pages (no payloads: for reports)."""
    c = entries.c
    after = lo - 1
    while True:
        bounds = [c.seq > after] + ([c.seq < hi] if hi is not None else [])
        try:
            rows: Sequence[Sequence[Any]] = conn.execute(
                select(c.seq, c.recorded_at, c.kind, c.status, c.engine, c.att_verdict)
                .where(*bounds).order_by(c.seq).limit(page)).all()
        except IntegrityError as exc:
            if exc.code != STORED_TEXT_UNREADABLE:
                raise
            # (SQLite) text that is not UTF-8, written behind the ledger's back: this page's
            # labels as stored, undecodable bytes replaced -- a report's figures, not evidence
            # (the audit the report shows names the entry)
            raw = conn.execute(select(c.seq, c.recorded_at, *(
                cast(col, LargeBinary) for col in (c.kind, c.status, c.engine, c.att_verdict)))
                .where(*bounds).order_by(c.seq).limit(page)).all()
            rows = [(r[0], r[1], *(None if v is None else bytes(v).decode("utf-8", "replace")
                                   for v in r[2:])) for r in raw]
        for r in rows:
            yield int(r[0]), int(r[1]), r[2], r[3], r[4], r[5]
        if len(rows) < page:
            return
        after = int(rows[-1][0])
