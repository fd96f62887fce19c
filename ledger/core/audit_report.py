"""The audit's report as a value: :class:`AuditReport` (``ledger-audit-report/1``,
docs/audit.md), from the walk to the command line, the HTTP service, the metrics and the
HTML report.

One key order and one pair :meth:`AuditReport.to_json` / :meth:`AuditReport.from_json`:
the JSON object is the one every earlier version wrote, key for key and in the same order
(recorded ``audit_run`` digests, ``--json-report`` files, stored findings), and
``from_json(to_json(r)) == r``.  Pure.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ledger.core.finding import (
    AUDIT_SUMMARY,
    Abstention,
    Finding,
    SummaryParts,
    SummaryStyle,
    decide_outcome,
    redactions_only,
    summary_text,
)
from ledger.errors import UsageError

REPORT_FORMAT = "ledger-audit-report/1"


@dataclass(frozen=True)
class AuditRange:
    """The audited range ``[start, end)``."""

    start: int
    end: int

    def to_json(self) -> dict[str, int]:
        return {"start": self.start, "end": self.end}

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> AuditRange:
        return cls(obj["start"], obj["end"])


@dataclass(frozen=True)
class RowCounts:
    """The rows of a run by disposition (docs/audit.md, "Dispositions")."""

    rows: int = 0
    verified: int = 0
    failed: int = 0
    unverified: int = 0

    def __add__(self, other: RowCounts) -> RowCounts:
        return RowCounts(self.rows + other.rows, self.verified + other.verified,
                         self.failed + other.failed, self.unverified + other.unverified)

    def to_json(self) -> dict[str, int]:
        """The report's ``summary`` counts."""
        return {"rows": self.rows, "verified": self.verified, "failed": self.failed,
                "unverified": self.unverified}

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> RowCounts:
        return cls(obj["rows"], obj["verified"], obj["failed"], obj["unverified"])


# the keys of the report in their one order; those after ``run_id`` but ``outcome`` are
# written only when set
_KEYS = ("format", "ledger_id", "origin", "range", "summary", "findings", "abstentions",
         "policy", "attestations_checked", "workers", "started_at", "finished_at", "run_id",
         "tenant", "read_only_replica", "checkpoints", "anchors", "outcome", "recorded_seq")


@dataclass(frozen=True)
class AuditReport:
    """An audit's report.  ``findings`` sorted by seq (null last), ``abstentions`` in walk
    order; ``read_only_replica``, ``checkpoints``, ``anchors`` and ``recorded_seq`` are
    written only when set (False / None: absent)."""

    ledger_id: str
    origin: str
    range: AuditRange
    summary: RowCounts
    findings: tuple[Finding, ...]
    abstentions: tuple[Abstention, ...]
    policy: str
    attestations_checked: bool
    workers: int
    started_at: str
    finished_at: str
    run_id: int | None
    outcome: str
    read_only_replica: bool = False
    checkpoints: tuple[str, ...] | None = None
    anchors: tuple[dict[str, Any], ...] | None = None  # per checkpoint (docs/anchoring.md)
    recorded_seq: int | None = None
    format: str = REPORT_FORMAT
    tenant: str | None = None  # ``ledger audit --tenant``: the one tenant audited

    def to_json(self) -> dict[str, Any]:
        """The ``ledger-audit-report/1`` object (docs/audit.md), in its one key order."""
        out: dict[str, Any] = {
            "format": self.format, "ledger_id": self.ledger_id, "origin": self.origin,
            "range": self.range.to_json(), "summary": self.summary.to_json(),
            "findings": [f.to_json() for f in self.findings],
            "abstentions": [a.to_json() for a in self.abstentions],
            "policy": self.policy, "attestations_checked": self.attestations_checked,
            "workers": self.workers, "started_at": self.started_at,
            "finished_at": self.finished_at, "run_id": self.run_id}
        if self.tenant is not None:
            out["tenant"] = self.tenant
        if self.read_only_replica:
            out["read_only_replica"] = True
        if self.checkpoints is not None:
            out["checkpoints"] = list(self.checkpoints)
        if self.anchors is not None:
            out["anchors"] = [dict(a) for a in self.anchors]
        out["outcome"] = self.outcome
        if self.recorded_seq is not None:
            out["recorded_seq"] = self.recorded_seq
        return out

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> AuditReport:
        """The report of an object :meth:`to_json` wrote.  Raises UsageError."""
        if obj.get("format") != REPORT_FORMAT or [k for k in obj if k not in _KEYS]:
            raise UsageError(f"an audit report must be a {REPORT_FORMAT} object",
                             code="bad_report")
        try:
            checkpoints = obj.get("checkpoints")
            anchors = obj.get("anchors")
            return cls(
                obj["ledger_id"], obj["origin"], AuditRange.from_json(obj["range"]),
                RowCounts.from_json(obj["summary"]),
                tuple(Finding.from_json(f) for f in obj["findings"]),
                tuple(Abstention.from_json(a) for a in obj["abstentions"]),
                obj["policy"], obj["attestations_checked"], obj["workers"],
                obj["started_at"], obj["finished_at"], obj["run_id"], obj["outcome"],
                read_only_replica=obj.get("read_only_replica", False) is True,
                checkpoints=None if checkpoints is None else tuple(checkpoints),
                anchors=None if anchors is None else tuple(dict(a) for a in anchors),
                recorded_seq=obj.get("recorded_seq"), tenant=obj.get("tenant"))
        except (KeyError, TypeError, AttributeError) as exc:
            raise UsageError(f"an audit report lacks {exc}", code="bad_report") from None

    # -- what the commands say about it ------------------------------------------------
    def only_redactions(self) -> bool:
        """Whether everything it did not verify is a lawful redaction
        (:func:`ledger.core.finding.redactions_only`)."""
        return redactions_only(len(self.findings),
                               [(a.seq, a.reason) for a in self.abstentions])

    def summary_line(self, style: SummaryStyle = AUDIT_SUMMARY) -> str:
        """The summary line (docs/audit.md, "Output")."""
        s = self.summary
        return summary_text(SummaryParts(
            s.rows, s.verified, s.failed, s.unverified,
            [(f.code, f.seq) for f in self.findings],
            [(a.seq, a.reason) for a in self.abstentions], self.outcome), style)


def report_outcome(summary: RowCounts, findings: tuple[Finding, ...],
                   abstentions: tuple[Abstention, ...]) -> str:
    """The outcome of a report with these counts, findings and abstentions."""
    return decide_outcome(len(findings), summary.unverified, len(abstentions))
