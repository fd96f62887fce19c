"""How a parallel audit splits its range into parts, and joins what the parts found."""

from __future__ import annotations

import os
from dataclasses import replace
from itertools import pairwise
from typing import Any

from ledger.core.finding import Finding


def auto_workers() -> int:
    """The processors this process may run on (``--workers auto``), at most 64."""
    try:
        n = len(os.sched_getaffinity(0))
    except AttributeError:  # not on every platform
        n = os.cpu_count() or 1
    return max(1, min(64, n))


def split(start: int, end: int, workers: int) -> list[dict[str, Any]]:
    """The parts of a new parallel run over ``[start, end)``."""
    bounds = [start + (end - start) * i // workers for i in range(workers + 1)]
    return [{"start": lo, "end": hi, "next_seq": lo, "state": {}}
            for lo, hi in pairwise(bounds)]


def join_gaps(findings: list[Finding], bounds: list[int]) -> None:
    """Make the findings of a range audited in parts ``[bounds[i], bounds[i + 1])`` read as
    one worker reports them: a run of deleted rows that crosses a part boundary is one
    ``seq_gap``, and a gap that ends a part ends where the next part's first row stands.

    A part reports the gap at its end with ``actual`` None (no row after it in its range)
    and the gap at its start with ``seq`` = its first seq.  Changes ``findings`` in place
    (a joined gap replaces the part's, the next part's head gap is removed)."""
    open_at: int | None = None  # where the gap open up to the boundary ahead stands
    for lo, hi in pairwise(bounds):
        if lo == hi:  # an empty part reports nothing
            continue
        if open_at is not None:
            head_at = next((i for i, f in enumerate(findings)
                            if f.code == "seq_gap" and f.seq == lo and i != open_at), None)
            gap = findings[open_at]
            if head_at is None:  # the part's first row stands at lo
                findings[open_at] = replace(gap, actual=lo)
                open_at = None
            else:
                head = findings.pop(head_at)
                open_at -= head_at < open_at
                upto = head.actual if head.actual is not None else hi
                findings[open_at] = replace(gap, actual=head.actual,
                                            message=f"entries {gap.seq}..{upto - 1} are missing")
                if head.actual is not None:
                    open_at = None
        if open_at is None:
            open_at = next((i for i, f in enumerate(findings) if f.code == "seq_gap"
                            and f.actual is None and f.seq is not None and lo <= f.seq < hi),
                           None)
