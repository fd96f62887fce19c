"""Reads checked on the way out (docs/reads.md).

Every read path gets its rows through :func:`check_page`: each stored entry is checked by
``ledger.core.readcheck.check_entry`` against what was hashed -- its envelope against its
body hash, the entry hash recomputed and compared with the hash the next entry of its
tenant's chain links to (or the head; :func:`successor_links`), each served payload
against its commitment, every indexed column against its envelope -- and shaped from the
envelope and the checked payloads (``ledger.ops.view``).  The redaction map that tells an
erased payload from a missing one is folded once and refolded only when a redaction was
appended.

:func:`findings_of` attaches to entries the findings of the latest complete audit run and
of the runs begun after it that are still running.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Connection

from ledger.core.erasure import RedactionMap
from ledger.core.readcheck import CheckedEntry, as_bytes, check_entry, row_tenant, row_tseq
from ledger.ops.redaction_map import load_redaction_map
from ledger.store import audit_runs as runs_repo
from ledger.store import entries as repo


@dataclass
class RedactionCache:
    """The redaction map of the stored ledger, kept between reads; refolded when the last
    stored redaction entry is not the one it was folded up to."""

    last: int | None = -1
    redactions: RedactionMap = field(default_factory=dict)

    def get(self, conn: Connection, last: int | None = -1) -> RedactionMap:
        """The map as of the redaction entry ``last`` (-1: ask the store which it is)."""
        if last == -1:
            last = repo.max_seq(conn, "redaction")
        if last != self.last:
            self.redactions = load_redaction_map(conn) if last is not None else {}
            self.last = last
        return self.redactions


Checked = tuple[Any, CheckedEntry, list[dict[str, Any]]]


def check_page(conn: Connection, ledger_id: str, cache: RedactionCache,
               rows: Sequence[tuple[Any, Any]], slots: Collection[int] | None = None, *,
               state: repo.ReadState | None = None, after: Any = None) -> list[Checked]:
    """``(row, CheckedEntry, findings)`` for each ``(row, {slot: payload})`` of ``rows`` (in
    order; ``slots``: the payload slots read, None: all), with the audit findings about
    each entry (:func:`findings_of`).

    The hash each entry must link on with (the ``prev_hash`` of the next entry of its
    tenant) is the next row of its tenant in the page when the page holds it and every
    row between, else read: the entry after the last row and the head in one statement with the
    rest of what a read needs (``ledger.store.entries.read_state``), the others (a filtered
    page) in one more read; the findings in one more when an audit run exists.  A caller
    whose page query read the state already (``ledger.store.query.select_page_with_state``)
    passes it as ``state``, and the row after the page, if it read one, as ``after``."""
    if not rows:
        return []
    seqs = [r.seq for r, _ in rows]
    links, left = page_links([r for r, _ in rows])
    last = rows[-1][0]
    if after is not None and after.seq == last.seq + 1 \
            and row_tenant(after) == row_tenant(last):
        links[last.seq] = as_bytes(after.prev_hash)
    if state is None:
        state = repo.read_state(conn, None if last.seq in links else last.seq + 1)
    if state.next_prev is not None and state.next_tenant == row_tenant(last):
        links[last.seq] = state.next_prev
    if state.head_size and state.head_hash is not None:
        links.setdefault(state.head_size - 1, state.head_hash)
    links.update(successor_links(conn, [r for r in left if r.seq not in links],
                                 state.head_size))
    redactions = cache.get(conn, state.last_redaction)
    scope: tuple[int, ...] = () if state.latest_complete_run is None \
        else (state.latest_complete_run,)
    if state.later_running:
        scope = runs_repo.finding_scope(conn)
    found = findings_of(conn, seqs, scope)
    return [(r, check_entry(r, blobs, ledger_id, redactions=redactions,
                            next_prev=links.get(r.seq), slots=slots), found.get(r.seq, []))
            for r, blobs in rows]


def findings_of(conn: Connection, seqs: Iterable[int], scope: Sequence[int] | None = None,
                ) -> dict[int, list[dict[str, Any]]]:
    """seq -> the audit findings about it (each with its ``run_id``), of the runs ``scope``
    (None: the runs in scope now, ``ledger.store.audit_runs.finding_scope``)."""
    wanted = sorted(set(seqs))
    if scope is None:
        scope = runs_repo.finding_scope(conn) if wanted else ()
    out: dict[int, list[dict[str, Any]]] = {}
    for run_id, seq, body in runs_repo.entry_findings(conn, scope, wanted):
        try:
            doc = json.loads(body)
        except ValueError:
            continue
        if isinstance(doc, dict):
            out.setdefault(seq, []).append({"run_id": run_id, **doc})
    return out


def page_links(rows: Sequence[Any]) -> tuple[dict[int, bytes], list[Any]]:
    """seq -> the ``prev_hash`` of the next row of the same tenant in ``rows`` (in seq
    order), for each row whose next row of its tenant is there with every seq between;
    and the rows left without one, in seq order."""
    links: dict[int, bytes] = {}
    pending: dict[Any, Any] = {}  # tenant -> its last row since the last gap
    left: list[Any] = []
    last = None
    for r in rows:
        if last is not None and r.seq != last + 1:
            left.extend(pending.values())
            pending = {}
        t = row_tenant(r)
        p = pending.get(t)
        if p is not None:
            links[p.seq] = as_bytes(r.prev_hash)
        pending[t] = r
        last = r.seq
    left.extend(pending.values())
    left.sort(key=lambda r: r.seq)
    return links, left


def successor_links(conn: Connection, rows: Sequence[Any], head_size: int | None,
                    ) -> dict[int, bytes]:
    """seq -> the hash each of ``rows`` must have for its tenant's chain to carry on: the
    ``prev_hash`` of the next stored entry of its tenant, or the tenant's recorded head
    hash when it has none (an entry below the ledger's last).  None (left out) when an
    entry between is missing -- the one it would link to may be the missing one (the audit
    reports the gap) --, which is told by the tseq (one past the entry's own) or else by
    counting the stored seqs between.  The last entry of the ledger links to the head,
    which the caller has."""
    if not rows:
        return {}
    after = repo.next_links(conn, [r.seq for r in rows])
    out: dict[int, bytes] = {}
    for r in rows:
        got = _successor(conn, r, after.get(r.seq), head_size)
        if got is not None:
            out[r.seq] = got
    return out


def _successor(conn: Connection, r: Any, after: repo.NextRow | None,
               head_size: int | None) -> bytes | None:
    tenant = row_tenant(r)
    if after is not None and after.tenant == tenant:
        return after.prev_hash
    if not isinstance(tenant, str):
        return None  # no tenant id: the entry's own hash does not recompute
    mine = row_tseq(r)
    n = repo.tenant_next(conn, tenant, r.seq)
    if n is not None:
        if mine is not None and row_tseq(n) == mine + 1 or \
                after is not None and repo.stored_between(conn, r.seq, n.seq):
            return n.prev_hash
        return None
    if head_size is None or r.seq >= head_size - 1:
        return None
    recorded = repo.tenant_head(conn, tenant)
    if recorded is None:
        return None
    if mine is not None and recorded[0] == mine + 1 or \
            after is not None and repo.stored_between(conn, r.seq, head_size):
        return recorded[1]
    return None


def checked_headers(conn: Connection, ledger_id: str, start: int, end: int | None,
                    ) -> Iterator[CheckedEntry]:
    """Every entry of ``[start, end)`` checked without its payloads (envelope, hashes, the
    link to the next entry of its tenant or the head, the columns), in seq order: the
    figures of a report.  Memory is two pages."""
    head = repo.read_head(conn)
    stop = head.size if head is not None else 0
    stop = stop if end is None else min(stop, end)
    held: list[Any] = []
    for page in repo.iter_entry_pages(conn, start, max(start, stop), with_payloads=False):
        rows = [row for row, _ in page]
        yield from _checked(conn, ledger_id, held, rows, head)
        held = rows
    yield from _checked(conn, ledger_id, held, [], head)


def _checked(conn: Connection, ledger_id: str, rows: list[Any], ahead: list[Any],
             head: repo.Head | None) -> Iterator[CheckedEntry]:
    """``rows`` checked, linked to the rows after them (``ahead``, then ``rows``' tenants'
    next entries as read)."""
    if not rows:
        return
    links, left = page_links(rows + ahead)
    if head is not None and head.size:
        links.setdefault(head.size - 1, head.head_hash)
    mine = {r.seq for r in rows}
    links.update(successor_links(conn, [r for r in left if r.seq in mine and r.seq not in links],
                                 None if head is None else head.size))
    for row in rows:
        yield check_entry(row, {}, ledger_id, next_prev=links.get(row.seq), slots=())
