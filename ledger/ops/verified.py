"""Reads checked on the way out (docs/reads.md).

Every read path gets its rows through :func:`check_page`: each stored entry is checked by
``ledger.core.readcheck.check_entry`` against what was hashed -- its envelope against its
body hash, the entry hash recomputed and compared with the hash the next entry links to
(or the head), each served payload against its commitment, every indexed column against
its envelope -- and shaped from the envelope and the checked payloads
(``ledger.ops.view``).  The redaction map that tells an erased payload from a missing one
is folded once and refolded only when a redaction was appended.

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
from ledger.core.readcheck import CheckedEntry, as_bytes, check_entry
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

    The hash each entry must link on with is the next row of the page when the page holds
    it, else read: the entry after the last row and the head in one statement with the
    rest of what a read needs (``ledger.store.entries.read_state``), the others (a filtered
    page) in one more read; the findings in one more when an audit run exists.  A caller
    whose page query read the state already (``ledger.store.query.select_page_with_state``)
    passes it as ``state``, and the row after the page, if it read one, as ``after``."""
    if not rows:
        return []
    seqs = [r.seq for r, _ in rows]
    links: dict[int, bytes] = {}
    for (a, _), (b, _) in zip(rows, rows[1:], strict=False):
        if b.seq == a.seq + 1:
            links[a.seq] = as_bytes(b.prev_hash)
    if after is not None and after.seq == seqs[-1] + 1:
        links[seqs[-1]] = as_bytes(after.prev_hash)
    if state is None:
        state = repo.read_state(conn, None if seqs[-1] in links else seqs[-1] + 1)
    if state.next_prev is not None:
        links[seqs[-1]] = state.next_prev
    if state.head_size and state.head_hash is not None:
        links.setdefault(state.head_size - 1, state.head_hash)
    missing = [s for s in seqs if s not in links]
    if missing:
        links.update(repo.next_links(conn, missing))
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


def checked_headers(conn: Connection, ledger_id: str, start: int, end: int | None,
                    ) -> Iterator[CheckedEntry]:
    """Every entry of ``[start, end)`` checked without its payloads (envelope, hashes, the
    link to the next entry or the head, the columns), in seq order: the figures of a
    report.  Memory is one page."""
    head = repo.read_head(conn)
    stop = head.size if head is not None else 0
    stop = stop if end is None else min(stop, end)
    prev: Any = None
    for page in repo.iter_entry_pages(conn, start, max(start, stop), with_payloads=False):
        for row, _ in page:
            if prev is not None:
                link = as_bytes(row.prev_hash) if row.seq == prev.seq + 1 else None
                yield check_entry(prev, {}, ledger_id, next_prev=link, slots=())
            prev = row
    if prev is not None:
        last = head.head_hash if head is not None and prev.seq == head.size - 1 else None
        if last is None and end is not None:  # the entry after the range links to it
            last = repo.next_links(conn, [prev.seq]).get(prev.seq)
        yield check_entry(prev, {}, ledger_id, next_prev=last, slots=())

