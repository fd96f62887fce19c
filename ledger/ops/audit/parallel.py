"""How a parallel audit splits its range into parts, and joins what the parts found."""

from __future__ import annotations

import os
from itertools import pairwise
from typing import Any


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


def join_gaps(findings: list[dict[str, Any]], bounds: list[int]) -> None:
    """Make the findings of a range audited in parts ``[bounds[i], bounds[i + 1])`` read as
    one worker reports them: a run of deleted rows that crosses a part boundary is one
    ``seq_gap``, and a gap that ends a part ends where the next part's first row stands.

    A part reports the gap at its end with ``actual`` None (no row after it in its range)
    and the gap at its start with ``seq`` = its first seq.  Changes ``findings`` in place."""
    gaps = [f for f in findings if f["code"] == "seq_gap"]
    open_gap: dict[str, Any] | None = None  # the gap open up to the boundary ahead
    for lo, hi in pairwise(bounds):
        if lo == hi:  # an empty part reports nothing
            continue
        if open_gap is not None:
            head = next((f for f in gaps if f["seq"] == lo and f is not open_gap), None)
            if head is None:  # the part's first row stands at lo
                open_gap["actual"] = lo
                open_gap = None
            else:
                findings.remove(head)
                gaps.remove(head)
                upto = head["actual"] if head["actual"] is not None else hi
                open_gap["actual"] = head["actual"]
                open_gap["message"] = f"entries {open_gap['seq']}..{upto - 1} are missing"
                if head["actual"] is not None:
                    open_gap = None
        if open_gap is None:
            open_gap = next((f for f in gaps if f["actual"] is None and lo <= f["seq"] < hi),
                            None)
