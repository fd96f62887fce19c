"""The signed alert of ``ledger serve --alert-webhook`` (docs/format-alert.md): pure parts.

An alert is a JSON object (``ALERT_FORMAT``) built by the service; what is signed is
``SIGNING_PREFIX || canonical_json(alert)`` (RFC 8785, the subset of
``ledger.core.canonical``: no floats).  The webhook body is the envelope
``{"alert": ..., "signature": {"alg": "Ed25519", "kid": ..., "sig": ...}}``.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from typing import Any

from ledger.core.audit_report import AuditReport
from ledger.core.canonical import canonical_json
from ledger.core.finding import FindingClass
from ledger.errors import UsageError

ALERT_FORMAT = "ledger-alert/1"
SIGNING_PREFIX = b"ledger-alert/1\n"
KINDS = ("audit_failed", "audit_needs_review", "checkpoint_overdue", "witness_overdue",
         "store_unavailable")
MAX_FINDINGS = 10  # first findings carried by an alert (the full report is in the ledger)
FINDING_FIELDS = ("code", "seq", "class", "message")  # never expected/actual values


def alert_document(kind: str, *, origin: str, ledger_id: str, raised_at: str,
                   head: dict[str, Any] | None, checkpoint: dict[str, Any] | None,
                   audit: dict[str, Any] | None = None, detail: dict[str, Any] | None = None,
                   alert_id: str | None = None) -> dict[str, Any]:
    """An alert document (every number an integer: it is canonicalized and signed)."""
    if kind not in KINDS:
        raise UsageError(f"alert kind must be one of {', '.join(KINDS)}", code="bad_alert",
                         field="kind")
    return {"format": ALERT_FORMAT, "id": alert_id or uuid.uuid4().hex, "kind": kind,
            "origin": origin, "ledger_id": ledger_id, "raised_at": raised_at,
            "head": head, "checkpoint": checkpoint, "audit": audit, "detail": detail or {}}


def signing_input(alert: Any) -> bytes:
    """The bytes an alert signature covers.  Raises UsageError for a malformed alert."""
    if not isinstance(alert, dict) or alert.get("format") != ALERT_FORMAT:
        raise UsageError(f"an alert must be an object with format {ALERT_FORMAT!r}",
                         code="bad_alert", field="alert.format")
    if alert.get("kind") not in KINDS:
        raise UsageError(f"alert kind must be one of {', '.join(KINDS)}", code="bad_alert",
                         field="alert.kind")
    return SIGNING_PREFIX + canonical_json(alert)


def first_findings(findings: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The first ``MAX_FINDINGS`` findings of a report, reduced to code, seq, class and
    message (the expected/actual values of a finding are not sent)."""
    return [{k: f.get(k) for k in FINDING_FIELDS} for f in findings[:MAX_FINDINGS]]


def findings_by_class(findings: list[dict[str, Any]]) -> dict[str, int]:
    """How many findings of each class (``core.finding.FindingClass`` values)."""
    return count_classes(str(f.get("class")) for f in findings)


def count_classes(classes: Iterable[str]) -> dict[str, int]:
    """How many of each class, by class."""
    out: dict[str, int] = {}
    for cls in classes:
        out[cls] = out.get(cls, 0) + 1
    return dict(sorted(out.items()))


def audit_alert_part(report: AuditReport) -> dict[str, Any]:
    """What an alert says about an audit (its ``audit`` object): counts and the first
    ``MAX_FINDINGS`` findings reduced to code, seq, class and message, no values."""
    return {"outcome": report.outcome, "range": report.range.to_json(),
            "summary": report.summary.to_json(), "findings": len(report.findings),
            "abstentions": len(report.abstentions),
            "findings_by_class": count_classes(
                FindingClass(f.cls).value for f in report.findings),
            "first_findings": [{"code": f.code, "seq": f.seq,
                                "class": FindingClass(f.cls).value, "message": f.message}
                               for f in report.findings[:MAX_FINDINGS]],
            "recorded_seq": report.recorded_seq}
