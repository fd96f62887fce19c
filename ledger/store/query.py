"""The query statements: equality filters as bound parameters, keyset pages.

A page is ``WHERE <column = value | column IN (...)> AND lo <= seq < hi AND seq >
after ORDER BY seq LIMIT n`` with the payloads joined in.  Every filter value is a
bound parameter (SQLAlchemy Core), so quotes, ``%``, ``_`` and SQL fragments are
just text.  The rules (which filters, layers, time windows) are ``ledger.ops.query``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from sqlalchemy import Connection, and_, select

from ledger.store.entries import ENTRY_COLUMNS, EntryRow
from ledger.store.schema import entries, payloads

Equal = Mapping[str, tuple[str, ...]]  # entries column -> accepted values (empty: any)
_N = len(ENTRY_COLUMNS)


def first_seq_at(conn: Connection, t_us: int) -> int | None:
    """Smallest seq recorded at or after ``t_us`` (an index probe on recorded_at)."""
    return conn.execute(select(entries.c.seq).where(entries.c.recorded_at >= t_us)
                        .order_by(entries.c.recorded_at, entries.c.seq).limit(1)).scalar()


def statement(equal: Equal, lo: int, hi: int | None, after: int, limit: int | None,
              digest_columns: Iterable[str] = ("doc_digest",)) -> Any:
    """The SELECT of one page: entries columns plus the joined payload bytes
    (labelled ``<digest column>_data``)."""
    joined, cols = entries, [entries]
    for name in digest_columns:
        p = payloads.alias(f"p_{name}")
        joined = joined.outerjoin(p, p.c.digest == entries.c[name])
        cols.append(p.c.data.label(f"{name}_data"))
    conds = [entries.c.seq >= lo, entries.c.seq > after]
    if hi is not None:
        conds.append(entries.c.seq < hi)
    for name, values in equal.items():
        if len(values) == 1:
            conds.append(entries.c[name] == values[0])
        elif values:
            conds.append(entries.c[name].in_(values))
    stmt = select(*cols).select_from(joined).where(and_(*conds)).order_by(entries.c.seq)
    return stmt.limit(limit) if limit is not None else stmt


def select_page(conn: Connection, equal: Equal, lo: int, hi: int | None, after: int,
                limit: int | None, digest_columns: tuple[str, ...],
                ) -> list[tuple[EntryRow, dict[str, bytes]]]:
    """One page of (entry as a namedtuple — cheap attribute access —, {digest: payload
    bytes}) in seq order; payloads of ``digest_columns`` only, missing ones absent."""
    positions = [ENTRY_COLUMNS.index(c) for c in digest_columns]
    out = []
    for t in conn.execute(statement(equal, lo, hi, after, limit, digest_columns)):
        blobs = {}
        for i, pos in enumerate(positions):
            d, data = t[pos], t[_N + i]
            if d is not None and data is not None:
                blobs[d] = bytes(data)
        out.append((EntryRow(*t[:_N]), blobs))
    return out


def explain_page(conn: Connection, equal: Equal, lo: int, hi: int | None, after: int,
                 limit: int | None, digest_columns: tuple[str, ...]) -> list[str]:
    """The database's plan for one page (EXPLAIN QUERY PLAN / EXPLAIN), one line each."""
    stmt = statement(equal, lo, hi, after, limit, digest_columns)
    compiled = stmt.compile(conn, compile_kwargs={"literal_binds": True})
    sqlite = conn.dialect.name == "sqlite"
    prefix = "EXPLAIN QUERY PLAN " if sqlite else "EXPLAIN "
    return [" ".join(str(c) for c in r) if sqlite else str(r[0])
            for r in conn.exec_driver_sql(prefix + str(compiled)).all()]
