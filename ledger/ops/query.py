"""Queries: filters as bound parameters, keyset pages, three disclosure layers.

A query is ``WHERE <filters> AND seq > :after ORDER BY seq LIMIT :n``.  Every
filter value is a bound parameter (SQLAlchemy Core), compared for equality
(never ``LIKE``), so quotes, ``%``, ``_`` and SQL fragments are just text.
Keyset pages are stable under concurrent appends: appends only add rows with a
larger seq, so the rows with ``seq > after`` below any seq already seen never
change.

Time filters (``since`` inclusive, ``until`` exclusive, RFC 3339 in, RFC 3339
out) are turned into a seq window with two index probes (``recorded_at`` never
decreases with seq), and each fetched row's ``recorded_at`` is checked too, so
the result is exact and a first page costs O(page) on the ``(engine, status,
seq)`` index whatever the window.  See docs/query.md.

Layers are allow-lists (:data:`ledger.ops.view.LAYER_FIELDS`, re-exported here);
:func:`ledger.ops.view.project` is the only place a row is cut down for an audience.
The filters (:class:`Filters`, :func:`make_filters`, :func:`with_window`) are
``ledger.ops.filters``, re-exported here.

Tenant scope: every read here takes ``tenant`` (None: every tenant).  Given, the rows, counts,
pick-lists and hash look-ups are those of that tenant's entries only -- on top of the
filters, never instead of them -- so a reader scoped to a tenant (an HTTP token with a
tenant) is answered about another tenant's entry exactly as about one that does not exist.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Unpack

from sqlalchemy import Connection, Engine

from ledger.errors import UsageError
from ledger.ops.context import LedgerContext
from ledger.ops.filters import MAX_LIMIT as MAX_LIMIT  # the filters, re-exported
from ledger.ops.filters import STRING_FILTERS as STRING_FILTERS
from ledger.ops.filters import FilterArgs as FilterArgs
from ledger.ops.filters import Filters as Filters
from ledger.ops.filters import make_filters as make_filters
from ledger.ops.filters import with_window as with_window
from ledger.ops.verified import check_page
from ledger.ops.view import (  # noqa: F401 -- the layers and views, re-exported
    AGENT_FIELDS,
    AUDITOR_FIELDS,
    DEVELOPER_FIELDS,
    LAYER_FIELDS,
    LAYERS,
    layer_view,
    project,
)
from ledger.store import audit_runs as runs_repo
from ledger.store import entries
from ledger.store import query as sq
from ledger.store.db import connect
from ledger.store.layout import MAX_SEQ

# Columns of the table and CSV outputs (CSV cells holding objects are JSON text).
TABLE_COLUMNS = {
    "agent": list(AGENT_FIELDS),
    "developer": ["seq", "recorded_at", "kind", "engine", "status", "constraint_id", "subject",
                  "agent_message", "integrity"],
    "auditor": ["seq", "recorded_at", "kind", "engine", "status", "constraint_id", "proof_ref",
                "att_verdict", "att_kid", "entry_hash", "integrity"],
}
CSV_COLUMNS = {
    "agent": list(AGENT_FIELDS),
    "developer": list(DEVELOPER_FIELDS),
    "auditor": [f for f in AUDITOR_FIELDS if f not in ("payloads", "envelope")] + ["envelope"],
}

def csv_lines(rows: Iterable[dict[str, Any]], layer: str) -> Iterator[bytes]:
    """``rows`` (layered views) as CSV lines with a header: the columns of
    :data:`CSV_COLUMNS` for ``layer`` (what ``ledger query --format csv`` prints); a cell
    holding an object or a list (``integrity``, ``findings``) is its JSON text."""
    import csv
    import io

    columns = CSV_COLUMNS[layer]
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\r\n")

    def line(cells: list[Any]) -> bytes:
        buf.seek(0)
        buf.truncate()
        w.writerow(cells)
        return buf.getvalue().encode("utf-8")

    yield line(columns)
    for r in rows:
        yield line(["" if (v := r.get(c)) is None else json.dumps(v, ensure_ascii=False,
                                                                    sort_keys=True)
                    if isinstance(v, (dict, list)) else v for c in columns])


# Payload slots joined: every payload, for every layer -- each is checked against its
# commitment on the way out whether or not the layer is shown its bytes, so that a
# tampered payload flags the entry in every layer (docs/reads.md).
_ALL_SLOTS = tuple(range(6))
_NO_END = MAX_SEQ + 1  # an open seq range (every pid of it still fits a signed 64-bit key)


@dataclass
class QueryPage:
    """One page: its rows (each with its ``integrity`` verdict), the ``after`` of the next
    page, and how many rows are ``flagged`` (not verified), ``matched`` (their proven
    values satisfy the filters: a row found through a rewritten column is returned flagged
    but not counted) and ``with_findings`` (the audit found something on them)."""

    rows: list[dict[str, Any]]
    next_after: int | None  # pass as ``after`` for the next page; None: no more rows now
    layer: str = "agent"
    filters: Filters = field(default_factory=Filters)
    flagged: int = 0
    matched: int = 0
    with_findings: int = 0
    order: str = "asc"
    next_before: int | None = None  # (order desc) pass as ``before`` for the next page

    def counts(self) -> dict[str, int]:
        """The page's counts for its layer (agents see no findings, so no count of them)."""
        out = {"flagged": self.flagged, "matched": self.matched}
        if self.layer != "agent":
            out["with_findings"] = self.with_findings
        return out


# -- pages -------------------------------------------------------------------------------
def seq_window(conn: Connection, f: Filters) -> tuple[int, int | None]:
    """``[lo, hi)`` of seqs that can match the seq and time filters (hi None: open)."""
    lo, hi = f.start, f.end
    if f.since_us is not None:
        first = sq.first_seq_at(conn, f.since_us)
        if first is None:  # nothing recorded since then
            return 0, 0
        lo = max(lo, first)
    if f.until_us is not None:
        first = sq.first_seq_at(conn, f.until_us)
        if first is not None:
            hi = first if hi is None else min(hi, first)
    return lo, hi


def _equal(f: Filters, tenant: str | None = None) -> dict[str, tuple[str, ...]]:
    """The equality filters, within ``tenant`` when given.  The time window is already the
    seq window [lo, hi); its exact check is done on the fetched rows (_in_window), not in
    SQL, where PostgreSQL would multiply the two (correlated) selectivities and pick a
    bitmap scan plus a sort over every match."""
    equal = {name: getattr(f, name) for name in STRING_FILTERS}
    if tenant is not None:
        asked = equal.get("tenant") or (tenant,)
        # a tenant filter naming other tenants selects nothing ("" is never a tenant id)
        equal["tenant"] = (tenant,) if tenant in asked else ("",)
    return equal


def _payload_names(layer: str) -> tuple[int, ...]:
    return _ALL_SLOTS


def iter_pages(conn: Connection, f: Filters, *, after: int = -1, page: int = 1000,
               digest_columns: Iterable[int] = _ALL_SLOTS, tenant: str | None = None,
               ) -> Iterator[entries.Page | list[tuple[Any, Any]]]:
    """Pages of ``(row, {slot: payload})`` matching ``f`` (within ``tenant`` when given)
    with ``seq > after``, in seq order (to iterate once; ``len()`` works); memory is one
    page.  ``row`` is a ``ledger.store.entries.EntryRow``; ``digest_columns`` are the
    payload slots joined in."""
    digest_columns = tuple(digest_columns)
    lo, hi = seq_window(conn, f)
    if hi is not None and lo >= hi:
        return
    runs = _finding_runs(conn, f)
    equal = _equal(f, tenant)
    if digest_columns == _ALL_SLOTS and not any(equal.values()) and runs is None \
            and f.since_us is None and f.until_us is None:
        # every entry of a seq range (a whole export): the audit's reader, two ordered
        # range reads per page instead of one join per payload slot
        yield from entries.iter_entry_pages(conn, max(lo, after + 1),
                                            _NO_END if hi is None else hi, page)
        return
    while True:
        rows = sq.select_page(conn, equal, lo, hi, after, page, digest_columns, runs)
        if not rows:
            return
        kept = [r for r in rows if _in_window(f, r[0].recorded_at)]
        if kept:
            yield kept
        if len(rows) < page:
            return
        after = rows[-1][0].seq


def _in_window(f: Filters, t: int) -> bool:
    """The exact time check (always true inside the seq window unless recorded_at was
    rewritten out of order, which the audit reports as ``time_reversed``)."""
    return (f.since_us is None or t >= f.since_us) and (f.until_us is None or t < f.until_us)


def _check_page(after: int, limit: int, layer: str) -> None:
    if layer not in LAYERS:
        raise UsageError(f"layer must be one of {', '.join(LAYERS)}", field="layer")
    if not isinstance(after, int) or isinstance(after, bool) or after < -1:
        raise UsageError("after must be a seq (or -1 for the start)", field="after")
    if not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= MAX_LIMIT:
        raise UsageError(f"limit must be 1..{MAX_LIMIT}", field="limit")


def _finding_runs(conn: Connection, f: Filters) -> tuple[int, ...] | None:
    """The audit runs whose findings select rows (``has_findings``), else None."""
    return runs_repo.finding_scope(conn) if f.has_findings else None


def _shape(conn: Connection, ctx: LedgerContext, f: Filters, rows: list[tuple[Any, Any]],
           layer: str, state: Any = None, after: Any = None,
           ) -> tuple[list[dict[str, Any]], int, int, int]:
    """The layered views of ``rows`` (checked on the way out) and the page's flagged,
    matched and with-findings counts."""
    checked = check_page(conn, ctx.ledger_id, ctx.reads, rows, _payload_names(layer),
                         state=state, after=after)
    out: list[dict[str, Any]] = []
    flagged = matched = with_findings = 0
    for r, c, found in checked:
        view = layer_view(r, c, layer, found)
        if not f.matches({**c.values, "kind": c.kind}):
            view["integrity"]["filter_match"] = False
        else:
            matched += 1
        flagged += not c.integrity.verified
        with_findings += bool(found)
        out.append(view)
    return out, flagged, matched, with_findings


ORDERS = ("asc", "desc")


def query(ctx: LedgerContext, f: Filters, *, after: int = -1, limit: int = 100,
          layer: str = "agent", order: str = "asc", before: int | None = None,
          tenant: str | None = None) -> QueryPage:
    """One keyset page of matching rows (of ``tenant``'s entries only, when given) projected
    for ``layer``, each checked against what was hashed (docs/reads.md): oldest first from
    ``after`` (``next_after``), or with ``order="desc"`` newest first from below ``before``
    (None: the newest; ``next_before``).  Raises UsageError."""
    _check_page(after, limit, layer)
    if order not in ORDERS:
        raise UsageError("order must be asc or desc", field="order")
    if before is not None and (not isinstance(before, int) or isinstance(before, bool)
                               or before < 0):
        raise UsageError("before must be a seq", field="before")
    desc = order == "desc"
    names = _payload_names(layer)
    with connect(ctx.engine) as conn:
        lo, hi = seq_window(conn, f)
        rows, state = ([], None) if hi is not None and lo >= hi else \
            sq.select_page_with_state(conn, _equal(f, tenant), lo, hi, after, limit + 1, names,
                                      _finding_runs(conn, f), before=before,
                                      descending=desc)
        more = len(rows) > limit
        beyond = rows[limit][0] if more else None  # links the page's last row on
        rows = rows[:limit]
        kept = [(r, b) for r, b in rows if _in_window(f, r.recorded_at)]
        if desc:  # checked in seq order (each row links to the next), served newest first
            out, flagged, matched, with_findings = _shape(conn, ctx, f, kept[::-1], layer,
                                                          state)
            out.reverse()
        else:
            out, flagged, matched, with_findings = _shape(
                conn, ctx, f, kept, layer, state,
                beyond if kept and kept[-1] is rows[-1] else None)
    last = rows[-1][0].seq if more else None
    return QueryPage(out, None if desc else last, layer, f, flagged, matched, with_findings,
                     order, last if desc else None)


def count_index_matches(ctx: LedgerContext, f: Filters, tenant: str | None = None) -> int:
    """How many entries (of ``tenant``, when given) the *indexed columns* select for ``f``
    (the rows a query would
    fetch and check; docs/reads.md, "Pages, filters and counts"): a count of candidates,
    not of verified matches -- a row whose column was rewritten into the filter is counted
    here and comes back flagged, one rewritten out of it is not counted.  The time filters
    count by the seq window (exact unless ``recorded_at`` was rewritten out of order)."""
    with connect(ctx.engine) as conn:
        lo, hi = seq_window(conn, f)
        if hi is not None and lo >= hi:
            return 0
        return sq.count_matches(conn, _equal(f, tenant), lo, hi, _finding_runs(conn, f))


PICK_FIELDS = ("kind", "status", "engine", "producer", "att_verdict", "att_kid")
MAX_PICK = 200


def filter_values(ctx: LedgerContext, name: str, layer: str, tenant: str | None = None,
                  ) -> dict[str, Any]:
    """The values the index holds for the filter ``name`` (over ``tenant``'s entries only,
    when given) (a pick-list): ``{"field",
    "values" (sorted, at most MAX_PICK), "truncated"}``.  Values to *filter by*, not any
    entry's value: a rewritten column's value is listed too (filtering by it finds the
    flagged row).  Agents get the values of result entries only.  Raises UsageError for a
    field that has no pick-list."""
    if name not in PICK_FIELDS:
        raise UsageError(f"field must be one of {', '.join(PICK_FIELDS)}", field="field")
    if layer not in LAYERS:
        raise UsageError(f"layer must be one of {', '.join(LAYERS)}", field="layer")
    with connect(ctx.engine) as conn:  # agents see result entries only
        values = sq.distinct_values(conn, name, MAX_PICK + 1,
                                    "result" if layer == "agent" else None, tenant)
    return {"field": name, "values": values[:MAX_PICK], "truncated": len(values) > MAX_PICK}


def seq_of_entry_hash(ctx: LedgerContext, text: str, tenant: str | None = None) -> int | None:
    """The seq of the entry whose stored entry hash is ``text`` (64 hex digits, with or
    without ``sha256:``), None when there is none (or it is not ``tenant``'s, when given).
    Raises UsageError for other text.  The entry is then read (and checked) like any other:
    a stored hash that does not verify comes back flagged."""
    hexpart = text[7:] if text.startswith("sha256:") else text
    if len(hexpart) != 64:
        raise UsageError("an entry hash is 64 hex digits (optionally sha256:)",
                         field="entry_hash")
    try:
        raw = bytes.fromhex(hexpart)
    except ValueError:
        raise UsageError("an entry hash is 64 hex digits (optionally sha256:)",
                         field="entry_hash") from None
    with connect(ctx.engine) as conn:
        return sq.seq_of_entry_hash(conn, raw, tenant)


def iter_query(ctx: LedgerContext, f: Filters, *, after: int = -1, layer: str = "agent",
               page: int = 1000, tenant: str | None = None) -> Iterator[dict[str, Any]]:
    """Every matching row (of ``tenant``'s entries only, when given; as of each page's
    read), projected and checked, streamed page by page."""
    _check_page(after, page, layer)
    names = _payload_names(layer)
    with connect(ctx.engine) as conn:
        for chunk in iter_pages(conn, f, after=after, page=page, digest_columns=names,
                                tenant=tenant):
            out, _, _, _ = _shape(conn, ctx, f, list(chunk), layer)
            yield from out


def explain(engine: Engine, f: Filters, *, after: int = -1, limit: int = 100,
            layer: str = "agent") -> list[str]:
    """The database's plan for one page (EXPLAIN QUERY PLAN / EXPLAIN), one line each."""
    with connect(engine) as conn:
        lo, hi = seq_window(conn, f)
        return sq.explain_page(conn, _equal(f), lo, hi, after, limit + 1,
                               _payload_names(layer), _finding_runs(conn, f))


class QueryArgs(FilterArgs, total=False):
    """The keywords of :func:`query_filtered`: the filters and the page's."""

    after: int
    limit: int
    layer: str
    order: str
    before: int | None


PAGE_ARGS = ("after", "limit", "layer", "order", "before")


def query_filtered(ctx: LedgerContext, **args: Unpack[QueryArgs]) -> QueryPage:
    """``query`` with the filters of ``make_filters`` and ``after``/``limit``/``layer``/
    ``order``/``before`` as keywords (the Python API's form).  Raises UsageError (also for
    an unknown name)."""
    given: dict[str, Any] = dict(args)
    page = {k: given.pop(k) for k in PAGE_ARGS if k in given}
    return query(ctx, make_filters(**given), **page)
