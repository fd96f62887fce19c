"""The audit pass over redaction and hold entries (``ledger.core.redaction_audit``).

Run once per audit after the row walk (also after a parallel one): it reads the
redaction and hold entries of the range with their documents, the kinds of the entries
they name, and the hold entries before the range (the holds in force at its start), and
adds the findings to the tally.  A row that the walk counted verified and that has such
a finding is moved to failed, so the counts stay one disposition per row.
"""

from __future__ import annotations

from typing import Any

from ledger.core.redaction_audit import check_custody, custody_entry
from ledger.store import custody
from ledger.store.db import connect


def custody_findings(engine: Any, start: int, end: int) -> list[dict[str, Any]]:
    """Findings (as report dicts) about the redaction and hold entries in [start, end)."""
    with connect(engine) as conn:
        rows = custody.custody_rows(conn, 0, end)
        named: set[int] = set()
        for e in (custody_entry(*r) for r in rows):
            named.update(_named(e))
        kinds = custody.kinds_of(conn, sorted(named))
    entries = [custody_entry(*r) for r in rows]
    found = check_custody(entries, kinds.get)
    return [f.to_dict() for f in found if f.seq is not None and start <= f.seq < end]


def _named(e: Any) -> list[int]:
    from ledger.core.redaction import parse_hold, parse_request
    from ledger.errors import UsageError

    if e.document is None:
        return []
    try:
        if e.kind == "redaction":
            return [s for s, _ in parse_request(e.document).targets]
        order = parse_hold(e.document)
        return list(order.targets)
    except UsageError:
        return []


def add_custody_findings(tally: Any, engine: Any, start: int, end: int) -> None:
    """Add the custody findings of [start, end) to ``tally`` (an ``ops.audit.Tally``)."""
    found = custody_findings(engine, start, end)
    if not found:
        return
    failed_before = {f["seq"] for f in tally.findings}
    for _seq in {f["seq"] for f in found} - failed_before:
        if tally.verified:
            tally.verified -= 1
            tally.failed += 1
    tally.findings += found
