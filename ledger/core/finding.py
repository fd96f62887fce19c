"""Findings, dispositions and outcomes: the one vocabulary of every check (docs/audit.md).

Every check ends in exactly one :class:`Disposition`.  A failed check is a :class:`Finding`
(a stable ``code``, a documented :class:`FindingClass`, the ``seq`` it is about); an
abstained one is an :class:`Abstention` (a ``reason``, for a person to look at).  A report
(``ledger audit``, ``ledger verify-export``) has one :func:`outcome`, one exit code
(:data:`EXIT_CODES`) and one :func:`summary_line`.  Pure: used by the audit, the checkpoint
checks, the offline verifiers and the HTTP layer alike.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Any

from ledger.errors import UsageError


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
_STANDARD = frozenset(FINDING_KEYS)


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
    (``file`` of a bundle finding, ``range`` and ``checkpoint`` of a checkpoint finding).
    ``keys``: the order of the standard keys in its JSON object (one of the three historical
    orders above; a checkpoint finding is written in ``CHECKPOINT_FINDING_KEYS``)."""

    code: str
    seq: int | None
    cls: FindingClass
    message: str
    expected: Any = None
    actual: Any = None
    extra: tuple[tuple[str, Any], ...] = ()
    keys: tuple[str, ...] = FINDING_KEYS

    def with_extra(self, **keys: Any) -> Finding:
        """This finding with more report keys (appended after the existing ones)."""
        return replace(self, extra=self.extra + tuple(keys.items()))

    def to_dict(self, keys: Sequence[str] | None = None) -> dict[str, Any]:
        """The JSON report object: ``keys`` (default: its own ``keys``) in order, then
        ``extra``."""
        values = {"code": self.code, "seq": self.seq, "class": FindingClass(self.cls).value,
                  "message": self.message, "expected": _jsonable(self.expected),
                  "actual": _jsonable(self.actual)}
        return {**{k: values[k] for k in (self.keys if keys is None else keys)},
                **dict(self.extra)}

    def reported(self, keys: tuple[str, ...] | None = None) -> Finding:
        """This finding as its report holds it: ``expected`` and ``actual`` as JSON values
        (bytes as ``0x`` hex, tuples as lists), written in ``keys`` (default: its own), so
        that ``Finding.from_json(f.to_json()) == f``."""
        return replace(self, cls=FindingClass(self.cls), expected=_jsonable(self.expected),
                       actual=_jsonable(self.actual),
                       extra=tuple((k, _jsonable(v)) for k, v in self.extra),
                       keys=self.keys if keys is None else keys)

    def line(self) -> str:
        """``seq S: <class> <code>: <message>``, as the commands list findings."""
        return f"seq {self.seq}: {FindingClass(self.cls).value} {self.code}: {self.message}"

    def to_json(self) -> dict[str, Any]:
        """The finding's JSON object, in its key order (``to_dict()``)."""
        return self.to_dict()

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> Finding:
        """The finding of a JSON object :meth:`to_json` wrote (the order of its standard keys
        is kept; every other key, in order, is ``extra``).  Raises UsageError."""
        keys = tuple(k for k in obj if k in _STANDARD)
        if len(keys) != len(_STANDARD) or any(k in _STANDARD for k in list(obj)[6:]):
            raise UsageError("a finding must be an object with code, seq, class, message, "
                             "expected and actual first", code="bad_finding")
        try:
            klass = FindingClass(obj["class"])
        except ValueError:
            raise UsageError(f"unknown finding class {obj['class']!r}",
                             code="bad_finding") from None
        return cls(obj["code"], obj["seq"], klass, obj["message"], obj["expected"],
                   obj["actual"], tuple((k, v) for k, v in obj.items() if k not in _STANDARD),
                   keys)


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

    def to_json(self) -> dict[str, Any]:
        """The abstention's JSON object (``to_dict()``)."""
        return self.to_dict()

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> Abstention:
        """The abstention of a JSON object :meth:`to_json` wrote.  Raises UsageError."""
        if list(obj)[:4] != ["seq", "check", "reason", "message"]:
            raise UsageError("an abstention must be an object with seq, check, reason and "
                             "message first", code="bad_abstention")
        return cls(obj["seq"], obj["check"], obj["reason"], obj["message"],
                   tuple(list(obj.items())[4:]))


def row_disposition(failed: bool, abstained: bool) -> Disposition:
    """A row is failed if any check failed, else abstained if any abstained, else verified."""
    if failed:
        return Disposition.FAILED
    return Disposition.ABSTAINED if abstained else Disposition.VERIFIED


def decide_outcome(findings: int, unverified: int, abstentions: int) -> str:
    """``failed`` if there is any finding, else ``unverified`` if a row is unverified or
    anything abstained, else ``passed``."""
    if findings:
        return Outcome.FAILED.value
    if unverified or abstentions:
        return Outcome.UNVERIFIED.value
    return Outcome.PASSED.value


def outcome(report: dict[str, Any]) -> str:
    """:func:`decide_outcome` of a report object (``findings``, ``summary``,
    ``abstentions``)."""
    return decide_outcome(len(report["findings"]), report["summary"]["unverified"],
                          len(report["abstentions"]))


REDACTED = "redacted"  # the abstention reason of a payload erased by a redaction


def redactions_only(findings: int, abstained: Sequence[tuple[int | None, str | None]]) -> bool:
    """Whether everything a report did not verify is a lawful redaction: no finding, and
    every abstention (``(seq, reason)``) a payload erased by a redaction entry (reason
    ``redacted``, on a row).  Such a run keeps the outcome ``unverified`` (the erased bytes
    cannot be confirmed) but needs no human review and is a baseline for ``--since-last``
    (docs/audit.md)."""
    return not findings and bool(abstained) and all(
        reason == REDACTED and seq is not None for seq, reason in abstained)


def only_redactions(report: dict[str, Any]) -> bool:
    """:func:`redactions_only` of a report object."""
    abstentions = report.get("abstentions") or []
    return redactions_only(len(report["findings"]),
                           [(a.get("seq"), a.get("reason")) for a in abstentions])

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
    # a finding about the whole, by its (code, seq)
    is_scope_level: Callable[[str, int | None], bool]
    review_when_failed: bool                    # abstentions ask for review even if failed
    count_unrowed_abstentions: bool             # "; N ledger-level check(s) not verified"


AUDIT_SUMMARY = SummaryStyle("audit complete", "ledger",
                             lambda code, _seq: code in LEDGER_LEVEL_CODES, False, True)
EXPORT_SUMMARY = SummaryStyle("verify-export complete", "bundle",
                              lambda _code, seq: seq is None, True, False)


@dataclass(frozen=True)
class SummaryParts:
    """What a summary line is made of: the row counts, the findings' ``(code, seq)``, the
    abstentions' ``(seq, reason)`` and the outcome."""

    rows: int
    verified: int
    failed: int
    unverified: int
    findings: Sequence[tuple[str, int | None]]
    abstentions: Sequence[tuple[int | None, str | None]]
    outcome: str | None


def summary_text(p: SummaryParts, style: SummaryStyle = AUDIT_SUMMARY) -> str:
    """``<title>: R rows, V verified, F failed, U unverified``, then ``, N redacted`` (the
    payloads abstained as erased by a redaction), `` (human review needed)`` (unless
    :func:`redactions_only`) and the counts of findings (and abstentions) about the
    whole."""
    review = (p.unverified or p.abstentions and (
        style.review_when_failed or p.outcome != Outcome.FAILED)) \
        and not redactions_only(len(p.findings), p.abstentions)
    redacted = sum(1 for _seq, reason in p.abstentions if reason == REDACTED)
    line = (f"{style.title}: {p.rows} rows, {p.verified} verified, {p.failed} "
            f"failed, {p.unverified} unverified"
            + (f", {redacted} redacted" if redacted else "")
            + (" (human review needed)" if review else ""))
    extra = sum(1 for code, seq in p.findings if style.is_scope_level(code, seq))
    if extra:
        line += f"; {extra} {style.scope}-level finding(s)"
    unrowed = sum(1 for seq, _reason in p.abstentions if seq is None)
    if style.count_unrowed_abstentions and unrowed:
        line += f"; {unrowed} {style.scope}-level check(s) not verified"
    return line


def summary_line(report: dict[str, Any], style: SummaryStyle = AUDIT_SUMMARY) -> str:
    """:func:`summary_text` of a report object (``summary``, ``findings``,
    ``abstentions``, ``outcome``)."""
    s = report["summary"]
    abstentions: Iterable[dict[str, Any]] = report.get("abstentions") or []
    return summary_text(SummaryParts(
        s["rows"], s["verified"], s["failed"], s["unverified"],
        [(f["code"], f["seq"]) for f in report["findings"]],
        [(a.get("seq"), a.get("reason")) for a in abstentions], report.get("outcome")), style)
