"""Findings, dispositions and outcomes: the one vocabulary of every check (docs/audit.md).

Every check ends in exactly one :class:`Disposition`.  A failed check is a :class:`Finding`
(a stable ``code``, a documented :class:`FindingClass`, the ``seq`` it is about); an
abstained one is an :class:`Abstention` (a ``reason``, for a person to look at).  A report
(``ledger audit``, ``ledger verify-export``) has one :func:`outcome`, one exit code
(:data:`EXIT_CODES`) and one :func:`summary_line`.  Pure: used by the audit, the checkpoint
checks, the offline verifiers and the HTTP layer alike.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Any


class FindingClass(StrEnum):
    """What kind of damage a finding shows (docs/audit.md, "Findings": stable values)."""

    PAYLOAD_MODIFIED = "payload_modified"
    REORDERED = "reordered"
    DELETED = "deleted"
    TRUNCATED = "truncated"
    FORKED = "forked"
    REWRITTEN = "rewritten"
    SIGNATURE_INVALID = "signature_invalid"
    CONTRACT_VIOLATION = "contract_violation"
    POLICY_VIOLATION = "policy_violation"
    # the anchoring policy of a checkpoint (docs/anchoring.md)
    UNWITNESSED = "unwitnessed"
    UNTIMESTAMPED = "untimestamped"
    TIMESTAMP_INVALID = "timestamp_invalid"
    BACKDATED = "backdated"


class Disposition(StrEnum):
    """How one check (or one row) ended."""

    VERIFIED = "verified"
    FAILED = "failed"
    ABSTAINED = "abstained"


class Outcome(StrEnum):
    """How a whole report ended."""

    PASSED = "passed"
    FAILED = "failed"
    UNVERIFIED = "unverified"


# The exit code of each outcome (``ledger audit`` and ``ledger verify-export``).
EXIT_CODES = {Outcome.PASSED.value: 0, Outcome.FAILED.value: 1, Outcome.UNVERIFIED.value: 3}

# Key order of a finding in a JSON report: row and ledger-level findings of the audit,
# bundle-level findings of verify-export, checkpoint findings.  The three orders are
# historical; they are kept so that reports stay byte for byte what they were.
FINDING_KEYS = ("code", "seq", "message", "expected", "actual", "class")
BUNDLE_FINDING_KEYS = ("code", "seq", "class", "message", "expected", "actual")
CHECKPOINT_FINDING_KEYS = ("code", "class", "seq", "message", "expected", "actual")


def _jsonable(value: Any) -> Any:
    """Report values as JSON (a tampered column may hold bytes)."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        return "0x" + bytes(value).hex()
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    return value


@dataclass(frozen=True)
class Finding:
    """A failed check.  ``extra``: more report keys after the standard ones, in order
    (``file`` of a bundle finding, ``range`` and ``checkpoint`` of a checkpoint finding)."""

    code: str
    seq: int | None
    cls: FindingClass
    message: str
    expected: Any = None
    actual: Any = None
    extra: tuple[tuple[str, Any], ...] = ()

    def with_extra(self, **keys: Any) -> Finding:
        """This finding with more report keys (appended after the existing ones)."""
        return replace(self, extra=self.extra + tuple(keys.items()))

    def to_dict(self, keys: Sequence[str] = FINDING_KEYS) -> dict[str, Any]:
        """The JSON report object: ``keys`` in order, then ``extra``."""
        values = {"code": self.code, "seq": self.seq, "class": FindingClass(self.cls).value,
                  "message": self.message, "expected": _jsonable(self.expected),
                  "actual": _jsonable(self.actual)}
        return {**{k: values[k] for k in keys}, **dict(self.extra)}


@dataclass(frozen=True)
class Abstention:
    """An abstained check: what could not be confirmed, and why."""

    seq: int | None
    check: str
    reason: str
    message: str
    extra: tuple[tuple[str, Any], ...] = ()

    def with_extra(self, **keys: Any) -> Abstention:
        """This abstention with more report keys (appended after the existing ones)."""
        return replace(self, extra=self.extra + tuple(keys.items()))

    def to_dict(self) -> dict[str, Any]:
        """The JSON report object ``{seq, check, reason, message, ...extra}``."""
        return {"seq": self.seq, "check": self.check, "reason": self.reason,
                "message": self.message, **dict(self.extra)}


def row_disposition(failed: bool, abstained: bool) -> Disposition:
    """A row is failed if any check failed, else abstained if any abstained, else verified."""
    if failed:
        return Disposition.FAILED
    return Disposition.ABSTAINED if abstained else Disposition.VERIFIED


def outcome(report: dict[str, Any]) -> str:
    """``failed`` if the report has any finding, else ``unverified`` if a row is unverified
    or anything abstained, else ``passed``."""
    if report["findings"]:
        return Outcome.FAILED.value
    if report["summary"]["unverified"] or report["abstentions"]:
        return Outcome.UNVERIFIED.value
    return Outcome.PASSED.value


REDACTED = "redacted"  # the abstention reason of a payload erased by a redaction


def only_redactions(report: dict[str, Any]) -> bool:
    """Whether everything a report did not verify is a lawful redaction: no finding, and
    every abstention a payload erased by a redaction entry (reason ``redacted``, on a row).
    Such a run keeps the outcome ``unverified`` (the erased bytes cannot be confirmed) but
    needs no human review and is a baseline for ``--since-last`` (docs/audit.md)."""
    abstentions = report.get("abstentions") or []
    return not report["findings"] and bool(abstentions) and all(
        a.get("reason") == REDACTED and a.get("seq") is not None for a in abstentions)

# Audit findings about the ledger as a whole, not a row present (not counted as failed rows).
LEDGER_LEVEL_CODES = frozenset({
    "seq_gap", "head_missing", "entries_beyond_head", "head_beyond_entries",
    "head_hash_mismatch", "rewritten_since_audit", "checkpoint_truncated",
    "checkpoint_inconsistent", "checkpoint_unverified", "checkpoint_origin_mismatch",
    "stored_tree_inconsistent", "tree_larger_than_ledger", "entries_gap"})


@dataclass(frozen=True)
class SummaryStyle:
    """How one command words its summary line (docs/audit.md, docs/export.md)."""

    title: str                                  # "audit complete"
    scope: str                                  # "ledger" / "bundle"
    is_scope_level: Callable[[dict[str, Any]], bool]  # a finding about the whole
    review_when_failed: bool                    # abstentions ask for review even if failed
    count_unrowed_abstentions: bool             # "; N ledger-level check(s) not verified"


AUDIT_SUMMARY = SummaryStyle("audit complete", "ledger",
                             lambda f: f["code"] in LEDGER_LEVEL_CODES, False, True)
EXPORT_SUMMARY = SummaryStyle("verify-export complete", "bundle",
                              lambda f: f["seq"] is None, True, False)


def summary_line(report: dict[str, Any], style: SummaryStyle = AUDIT_SUMMARY) -> str:
    """``<title>: R rows, V verified, F failed, U unverified``, then ``, N redacted`` (the
    payloads abstained as erased by a redaction), `` (human review needed)`` (unless
    :func:`only_redactions`) and the counts
    of findings (and abstentions) about the whole."""
    s = report["summary"]
    abstentions = report.get("abstentions") or []
    review = (s["unverified"] or abstentions and (
        style.review_when_failed or report.get("outcome") != Outcome.FAILED)) \
        and not only_redactions(report)
    redacted = sum(1 for a in abstentions if a.get("reason") == REDACTED)
    line = (f"{style.title}: {s['rows']} rows, {s['verified']} verified, {s['failed']} "
            f"failed, {s['unverified']} unverified"
            + (f", {redacted} redacted" if redacted else "")
            + (" (human review needed)" if review else ""))
    extra = sum(1 for f in report["findings"] if style.is_scope_level(f))
    if extra:
        line += f"; {extra} {style.scope}-level finding(s)"
    unrowed = sum(1 for a in abstentions if a.get("seq") is None)
    if style.count_unrowed_abstentions and unrowed:
        line += f"; {unrowed} {style.scope}-level check(s) not verified"
    return line
