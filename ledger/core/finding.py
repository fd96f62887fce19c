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


# -- the finding codes --------------------------------------------------------------
# Every code ``ledger audit`` reports, with its class, what its seq points at and what it
# means, written once: docs/audit.md's two tables of findings are rendered from here
# (:func:`render_code_table`; tests/core/test_finding.py keeps them equal and checks that
# the checks construct each code with its class here).  The anchoring policy's codes are
# docs/anchoring.md's.


@dataclass(frozen=True)
class CodeDoc:
    """One finding code: its class, what its ``seq`` is, what it means (with what its
    ``expected`` / ``actual`` hold) and whether it is about the ledger as a whole rather
    than a row present (not counted as a failed row)."""

    cls: FindingClass
    seq: str
    meaning: str
    ledger_level: bool = False


_C = CodeDoc
_K = FindingClass
# ``ledger audit``'s finding codes (the table of docs/audit.md's "Findings", in its order)
AUDIT_CODES: dict[str, CodeDoc] = {
    "seq_gap": _C(_K.DELETED, "the first missing seq",
        "entries are missing before a row, or at the end of the range (first missing seq "
        "/ the next seq present, null at the end)", True),
    "envelope_hash_mismatch": _C(_K.PAYLOAD_MODIFIED, "the row",
        "the envelope does not hash to the stored `body_hash` (stored / recomputed)"),
    "entry_out_of_place": _C(_K.REORDERED, "the row",
        "the entry was hashed at another seq within ±16 (this seq / the seq it was hashed"
        " at)"),
    "entry_hash_mismatch": _C(_K.PAYLOAD_MODIFIED, "the row",
        "`entry_hash` does not recompute from prev/seq/time/body (recomputed / stored)"),
    "hash_not_committed": _C(_K.FORKED, "the previous row",
        "the previous entry is not the one this row links to: rewritten with a recomputed"
        " hash, or a fork (this row's `prev_hash` / the previous row's stored hash)"),
    "broken_link": _C(_K.FORKED, "the row",
        "`prev_hash` is not the previous entry's hash (previous hash or genesis / "
        "`prev_hash`)"),
    "tenant_seq_mismatch": _C(_K.REORDERED, "the row",
        "the row's `tseq` is not the next place in its tenant's chain (expected / `tseq`;"
        " a jump over entries missing from the ledger is the `seq_gap`'s)"),
    "tenant_invalid": _C(_K.PAYLOAD_MODIFIED, "the row",
        "the row's tenant id or `tseq` breaks its rule ([tenants.md](tenants.md))"),
    "tenant_not_in_tree": _C(_K.FORKED, "the row",
        "`ledger audit --tenant`: the entry's leaf is not the stored tree's leaf at its seq"
        " (stored leaf or null / the entry's leaf)"),
    "time_reversed": _C(_K.REORDERED, "the row",
        "`recorded_at` is earlier than an earlier row's (latest earlier time / this "
        "row's)"),
    "row_unreadable": _C(_K.PAYLOAD_MODIFIED, "the row",
        "stored values have types the checks cannot read"),
    "envelope_unreadable": _C(_K.PAYLOAD_MODIFIED, "the row",
        "the envelope is not JSON"),
    "foreign_envelope": _C(_K.FORKED, "the row",
        "envelope version, ledger id or kind does not match (`[1, ledger id, row kind]` /"
        " the envelope's)"),
    "column_mismatch": _C(_K.PAYLOAD_MODIFIED, "the row",
        "a queryable or digest column differs from the hashed envelope (envelope value / "
        "column value)"),
    "payload_missing": _C(_K.DELETED, "the row",
        "a payload named by the envelope is not stored and no redaction names it (digest "
        "/ null)"),
    "redaction_not_applied": _C(_K.POLICY_VIOLATION, "the row",
        "a payload is still stored although an earlier redaction entry erased it (null / "
        "the redaction seq)"),
    "redaction_invalid": _C(_K.CONTRACT_VIOLATION, "the redaction",
        "its `request` document is not `ledger-redaction/1` (strict reading: closed "
        "format, sorted targets, valid payload names, a non-empty reason)"),
    "redaction_role_invalid": _C(_K.POLICY_VIOLATION, "the redaction",
        "the envelope's `role` is not `custodian` or `operator` (allowed / role)"),
    "redaction_target_invalid": _C(_K.CONTRACT_VIOLATION, "the redaction",
        "a target does not exist, is not a result entry, or is not earlier than the "
        "redaction (`result` / the target's kind); or, for a redaction in the chain of a "
        "tenant other than `default`, is not that tenant's entry (the tenant / `another "
        "tenant`)"),
    "redaction_of_held_entry": _C(_K.POLICY_VIOLATION, "the redaction",
        "a target was under a legal hold in force at the redaction (null / the hold seqs)"),
    "redaction_signature_invalid": _C(_K.SIGNATURE_INVALID, "the redaction",
        "its `ledger-redaction/2` signature does not verify with the `--key` ledger keys,"
        " or its claims are not this ledger and this request document (docs/format.md, "
        '"Redaction signatures"): a redaction written without the ledger key'),
    "redaction_unsigned": _C(_K.SIGNATURE_INVALID, "the redaction",
        "an unsigned `ledger-redaction/1` request after a signed redaction in the chain"),
    "redaction_under_unreadable_hold": _C(_K.POLICY_VIOLATION, "the redaction",
        "a target is earlier than a hold entry in force at the redaction whose order "
        "cannot be read (not stored, not the document its envelope commits to, or not a "
        "valid `ledger-hold/1`): such a hold may have held it, so it counts as holding "
        "every earlier entry until a release names it (null / the hold seqs)"),
    "hold_invalid": _C(_K.CONTRACT_VIOLATION, "the hold",
        "its `order` document is not `ledger-hold/1`, or its action differs from the "
        "envelope"),
    "hold_role_invalid": _C(_K.POLICY_VIOLATION, "the hold",
        "the envelope's `role` is not `custodian` or `operator`"),
    "hold_target_invalid": _C(_K.CONTRACT_VIOLATION, "the hold",
        "a held entry does not exist, is not a result entry or is not earlier, or (a hold "
        "in the chain of a tenant other than `default`) is not that tenant's entry; or a "
        "release names no hold in force"),
    "payload_digest_mismatch": _C(_K.PAYLOAD_MODIFIED, "the row",
        "a payload's bytes do not hash to its digest (digest / actual)"),
    "invalid_status": _C(_K.CONTRACT_VIOLATION, "the row",
        "status is not VERIFIED, UNVERIFIABLE or BLOCKED"),
    "proof_on_non_verified": _C(_K.CONTRACT_VIOLATION, "the row",
        "a non-VERIFIED row carries a proof_ref"),
    "verified_without_proof": _C(_K.CONTRACT_VIOLATION, "the row",
        "a VERIFIED row has no proof_ref"),
    "verified_without_evidence": _C(_K.CONTRACT_VIOLATION, "the row",
        "a VERIFIED row stores no evidence preimage"),
    "proof_mismatch": _C(_K.PAYLOAD_MODIFIED, "the row",
        "SHA-256 of the stored preimage is not the proof_ref (proof_ref / recomputed)"),
    "result_unreadable": _C(_K.PAYLOAD_MODIFIED, "the row",
        "the result document is not JSON, or not an object"),
    "result_envelope_mismatch": _C(_K.PAYLOAD_MODIFIED, "the row",
        "`result.status` or `result.proof_ref` differs from the envelope"),
    "document_unreadable": _C(_K.PAYLOAD_MODIFIED, "the row",
        "a `key_event`, `audit_run`, `import` or `reverify_run` document is not a JSON "
        "object"),
    "document_envelope_mismatch": _C(_K.PAYLOAD_MODIFIED, "the row",
        "a `key_event` document's action/issuer/kid/thumbprint, an `audit_run` or "
        "`reverify_run` document's outcome, or an `import` document's outcome or source, "
        "differs from the envelope"),
    "authoritative_inconsistent": _C(_K.CONTRACT_VIOLATION, "the row",
        "`is_authoritative` is not `proof_ref != null`"),
    "empty_agent_message": _C(_K.CONTRACT_VIOLATION, "the row",
        "`agent_message` is missing or empty"),
    "non_advisory_check": _C(_K.CONTRACT_VIOLATION, "the row",
        "an advisory check's `advisory_only` is not true"),
    "policy:": _C(_K.POLICY_VIOLATION, "the row",
        'a rule of the engine policy matches (null / `{"engine", "status"}`), e.g. '
        "`policy:fact-never-verified`"),
    "attestation_on_non_verified": _C(_K.CONTRACT_VIOLATION, "the row",
        "a non-VERIFIED row stores an attestation"),
    "attestation_malformed": _C(_K.SIGNATURE_INVALID, "the row",
        "the stored token does not decode"),
    "attestation_alg_not_allowed": _C(_K.SIGNATURE_INVALID, "the row",
        "`alg` is not ES256"),
    "attestation_typ": _C(_K.SIGNATURE_INVALID, "the row",
        "`typ` is not `qwed-attestation+jwt`"),
    "attestation_crit": _C(_K.SIGNATURE_INVALID, "the row",
        "the header has `crit`"),
    "attestation_unknown_kid": _C(_K.SIGNATURE_INVALID, "the row",
        "the issuer has trusted keys, but none active at this row under the token's kid "
        "(unknown, retired or revoked)"),
    "attestation_signature_invalid": _C(_K.SIGNATURE_INVALID, "the row",
        "no active key under the kid verifies the signature"),
    "attestation_claims_missing": _C(_K.SIGNATURE_INVALID, "the row",
        "a required claim (`iss sub iat exp jti qwed`) is missing, `iat`/`exp` are not "
        "integers, or `qwed.result` is not an object"),
    "attestation_key_compromised": _C(_K.SIGNATURE_INVALID, "the row",
        "the verifying key was revoked as compromised since a time at or before the row's"
        " `recorded_at`"),
    "attestation_not_yet_valid": _C(_K.SIGNATURE_INVALID, "the row",
        "`iat` is more than 5 minutes after the row's `recorded_at`"),
    "attestation_expired_at_record": _C(_K.SIGNATURE_INVALID, "the row",
        "`exp` is at or before the row's `recorded_at`"),
    "attestation_status_mismatch": _C(_K.SIGNATURE_INVALID, "the row",
        "the signed status is not VERIFIED"),
    "attestation_proof_mismatch": _C(_K.SIGNATURE_INVALID, "the row",
        "`qwed.proof_hash` is not the row's proof_ref"),
    "attestation_query_mismatch": _C(_K.SIGNATURE_INVALID, "the row",
        "`qwed.query_hash` does not hash the stored query"),
    "attestation_admission_mismatch": _C(_K.SIGNATURE_INVALID, "the row",
        "`qwed.admission` differs from the row's admission"),
    "attestation_issuer_mismatch": _C(_K.SIGNATURE_INVALID, "the row",
        "the signature verifies with a key trusted at this row for another issuer than "
        "the token's `iss` (a forgery attempt)"),
    "attestation_nbf_after_record": _C(_K.SIGNATURE_INVALID, "the row",
        "`nbf` is more than 5 minutes after the row's `recorded_at`"),
    "attestation_version_unsupported": _C(_K.SIGNATURE_INVALID, "the row",
        '`qwed.version` is present and not `"1.0"`'),
    "attestation_subject_mismatch": _C(_K.SIGNATURE_INVALID, "the row",
        "`sub` is not the signed `qwed.query_hash`"),
    "attestation_engine_mismatch": _C(_K.SIGNATURE_INVALID, "the row",
        "the signed `qwed.result.engine` is not the row's engine"),
    "head_missing": _C(_K.TRUNCATED, "0",
        "the head row is missing", True),
    "entries_beyond_head": _C(_K.FORKED, "the head size",
        "entries exist past the recorded head, i.e. inserted behind the append path (head"
        " size / entries)", True),
    "head_beyond_entries": _C(_K.TRUNCATED, "the entry count",
        "the head records more entries than exist (head size / entries)", True),
    "head_hash_mismatch": _C(_K.FORKED, "the last seq",
        "the head hash is not the last entry's hash (head / last entry)", True),
    "tenant_head_mismatch": _C(_K.FORKED, "the tenant's last entry (0 when it has none)",
        "a tenant's `tenant_heads` row is not its last entry (recorded `count hash` / the "
        "entries' `count hash`)", True),
    "rewritten_since_audit": _C(_K.FORKED, "the last seq the previous recorded audit covered",
        "that entry's hash differs from the `head_hash` the audit recorded (recorded / "
        "current, null if the entry is gone)", True),
}

# The findings of ``ledger audit --checkpoint`` (ledger/ops/checkpoint/check.py; all ledger-level)
CHECKPOINT_CODES: dict[str, CodeDoc] = {
    "checkpoint_truncated": _C(_K.TRUNCATED, "the ledger's size: the first missing seq",
        "the ledger has fewer entries than the checkpoint committed to (`{size, root}` of"
        " the checkpoint / `{size}` of the ledger)", True),
    "checkpoint_inconsistent": _C(_K.REWRITTEN, "`range`'s start",
        "the first `size` entries no longer hash to the checkpoint's root; `range` is "
        "`[start, end)` holding the first difference, exact when `end = start + 1` — "
        "except when the stored nodes could not be used to locate it: then `range` is "
        "`[size - 1, size)` and locates nothing ([merkle.md](merkle.md#what-checkpoints-"
        "catch-and-how)) (`{size, root}` of the checkpoint / of the entries)", True),
    "stored_tree_inconsistent": _C(_K.FORKED, "the checkpoint's `size - 1` (0 when empty)",
        "the stored Merkle tree (what proofs are served from) is not a consistent "
        "extension of the checkpoint over the current entries (`{size, root}` of the "
        "checkpoint / of the entries at the stored tree's size)", True),
    "tree_larger_than_ledger": _C(_K.TRUNCATED, "the ledger's size",
        "the stored tree covers more entries than exist (`{size}` of the tree / of the "
        "ledger)", True),
    "tenant_heads_mismatch": _C(_K.FORKED, "the checkpoint's `size - 1` (0 when empty)",
        "the checkpoint's `tenants` line does not commit to the tenant heads the entries give"
        " at its size, or is missing while tenants other than default have entries "
        "(`{tenants, root}` of the checkpoint / of the entries)", True),
    "entries_gap": _C(_K.DELETED, "the missing seq",
        "a seq is missing in the entries (up to 10 reported)", True),
    "checkpoint_unverified": _C(_K.SIGNATURE_INVALID, "0",
        "the checkpoint does not parse, or its signature does not verify with the `--key`"
        " keys", True),
    "checkpoint_origin_mismatch": _C(_K.SIGNATURE_INVALID,
        "the checkpoint's `size - 1` (0 when empty)",
        "the checkpoint is for another ledger (`{origin}` of the checkpoint / of this "
        "ledger)", True),
}

FINDING_CODES: dict[str, CodeDoc] = {**AUDIT_CODES, **CHECKPOINT_CODES}
# Audit findings about the ledger as a whole, not a row present (not counted as failed rows).
LEDGER_LEVEL_CODES = frozenset(c for c, d in FINDING_CODES.items() if d.ledger_level)
# the tables of docs/audit.md rendered from the registries: name -> (codes, begin, end)
CODE_TABLES: dict[str, dict[str, CodeDoc]] = {"audit": AUDIT_CODES,
                                              "checkpoint": CHECKPOINT_CODES}


def code_table_marks(name: str) -> tuple[str, str]:
    """The comments around the table ``name`` of :data:`CODE_TABLES` in docs/audit.md."""
    return (f"<!-- {name} findings: generated from ledger/core/finding.py, do not edit -->",
            f"<!-- end of the {name} findings -->")


def render_code_table(name: str) -> str:
    """The table ``name`` of :data:`CODE_TABLES` as docs/audit.md shows it, between its
    marks; in the audit's table a ledger-level code says so (every checkpoint finding is
    ledger-level, which the text above that table says once)."""
    begin, end = code_table_marks(name)
    lines = [begin, "| code | class | seq | meaning (`expected` / `actual`) |", "|---|---|---|---|"]
    for code, d in CODE_TABLES[name].items():
        shown = "policy:<rule id>" if code == "policy:" else code
        note = " (ledger-level)" if d.ledger_level and name == "audit" else ""
        lines.append(f"| `{shown}` | `{d.cls.value}` | {d.seq} | {d.meaning}{note} |")
    return "\n".join([*lines, end])


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
