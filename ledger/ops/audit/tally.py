"""An audit's running counts: rows by disposition, findings, abstentions, and the
per-hour row counts the charts read (``audit_aggregates``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ledger.core.audit_report import RowCounts
from ledger.core.finding import Abstention, Finding


@dataclass
class Tally:
    rows: int = 0
    verified: int = 0
    failed: int = 0
    unverified: int = 0
    findings: list[Finding] = field(default_factory=list)  # as reported (Finding.reported)
    abstentions: list[Abstention] = field(default_factory=list)
    # row counts by (hour, kind, status, engine, producer, att_verdict, disposition): see
    # _count; None when this session did not walk the whole range (a resumed run)
    agg: dict[tuple[Any, ...], int] | None = field(default_factory=dict)

    def add(self, other: Tally) -> None:
        self.rows += other.rows
        self.verified += other.verified
        self.failed += other.failed
        self.unverified += other.unverified
        self.findings += other.findings
        self.abstentions += other.abstentions
        if self.agg is not None and other.agg is not None:
            for k, n in other.agg.items():
                self.agg[k] = self.agg.get(k, 0) + n
        else:
            self.agg = None

    def row_counts(self) -> RowCounts:
        return RowCounts(self.rows, self.verified, self.failed, self.unverified)

    def counts(self) -> dict[str, int]:
        """The counts as saved in ``audit_runs`` (the report's ``summary`` object)."""
        return self.row_counts().to_json()


HOUR_US = 3_600_000_000


def _count(t: Tally, r: Any, disposition: str) -> None:
    """Count row ``r`` in ``t.agg``: under its values when the audit verified it or only
    abstained on it (then every column equals its envelope field, else column_mismatch would
    have failed it), by hour only when it failed (``flagged``: never under the values it
    shows).  The hour is the stored ``recorded_at`` (0 when unreadable)."""
    at = r.recorded_at if type(r.recorded_at) is int else 0
    hour = at - at % HOUR_US
    k = (hour, None, None, None, None, None, "flagged") if disposition == "flagged" else (
        hour, r.kind, r.status, r.engine, r.producer, r.att_verdict, disposition)
    agg = t.agg
    if agg is not None:
        agg[k] = agg.get(k, 0) + 1


def tally_row(t: Tally, outcome: Any, r: Any = None) -> None:
    t.rows += 1
    t.findings += [x.reported() for x in outcome.gap_findings]
    if not outcome.findings and not outcome.abstentions:
        t.verified += 1
        if r is not None:
            _count(t, r, "verified")
        return
    if outcome.disposition == "failed":
        t.failed += 1
        if r is not None:
            _count(t, r, "flagged")
    else:  # abstained: a row with findings or abstentions is never verified
        t.unverified += 1
        if r is not None:
            _count(t, r, "unverified")
    t.findings += [x.reported() for x in outcome.findings]
    t.abstentions += outcome.abstentions
