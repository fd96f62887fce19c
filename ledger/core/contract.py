"""The result contract as data: one table of rules, used by submission validation
(:mod:`ledger.core.submission`, which rejects), the audit and export verification
(:mod:`ledger.core.audit`, which reports findings) and the shared test vectors
(``tests/vectors/contract.json``, written by ``scripts/gen-vectors-contract``, also fed to
the independent ``scripts/verify_bundle.py``).

A rule reads one *result view*: a mapping with the result document's keys (``status``,
``agent_message``, ``developer_fields``, ``proof_ref``, ``is_authoritative``) and, where
the caller knows it, ``attestation`` (anything not None: an attestation is attached).
Each rule carries both of its stable codes: ``rejection`` (the code a submission is
refused with) and ``code`` (the finding code of the audit; None when only submission
validation checks it).  Pure: no I/O.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

VERIFIED = "VERIFIED"
STATUSES = ("VERIFIED", "UNVERIFIABLE", "BLOCKED")
PROOF_REF_RE = re.compile(r"sha256:[0-9a-f]{64}")

# A finder yields one (field, expected, actual, params) per violation of its rule;
# ``params`` fill the ``{...}`` of the rule's messages and field.
Finder = Callable[[Mapping[str, Any]], Iterator[tuple[str, Any, Any, dict[str, Any]]]]


@dataclass(frozen=True)
class Rule:
    """One invariant of a result, with its codes and messages."""

    rejection: str  # submission rejection code
    code: str | None  # audit finding code (None: checked at submission only)
    field: str  # the result field the rule is about (relative to the result)
    message: str  # the rejection message
    finding_message: str | None
    # dataclasses.field spelled out: the ``field`` attribute above shadows the name
    find: Finder = dataclasses.field(repr=False, compare=False)


@dataclass(frozen=True)
class Violation:
    """One violation of ``rule``; ``field`` names the exact place (an index filled in)."""

    rule: Rule
    field: str
    expected: Any
    actual: Any
    params: dict[str, Any]

    @property
    def code(self) -> str | None:
        return self.rule.code

    @property
    def rejection(self) -> str:
        return self.rule.rejection

    @property
    def message(self) -> str:
        return self.rule.message.format(**self.params)

    @property
    def finding_message(self) -> str:
        return (self.rule.finding_message or self.rule.message).format(**self.params)


def advisory_flag_ok(flag: Any) -> bool:
    """``advisory_only`` must be true (JSON ``true`` or the integer 1; never 1.0)."""
    return flag is True or (type(flag) is int and flag == 1)


def _status(doc: Mapping[str, Any]) -> Iterator[tuple[str, Any, Any, dict[str, Any]]]:
    status = doc.get("status")
    if not isinstance(status, str) or status not in STATUSES:
        yield "status", STATUSES, status, {}


def _agent_message(doc: Mapping[str, Any]) -> Iterator[tuple[str, Any, Any, dict[str, Any]]]:
    msg = doc.get("agent_message")
    if not isinstance(msg, str) or not msg.strip():
        yield "agent_message", "non-empty", msg, {}


def _proof_ref_form(doc: Mapping[str, Any]) -> Iterator[tuple[str, Any, Any, dict[str, Any]]]:
    ref = doc.get("proof_ref")
    if ref is not None and (not isinstance(ref, str) or not PROOF_REF_RE.fullmatch(ref)):
        yield "proof_ref", "sha256:…", ref, {}


def _proof_missing(doc: Mapping[str, Any]) -> Iterator[tuple[str, Any, Any, dict[str, Any]]]:
    if doc.get("status") == VERIFIED and doc.get("proof_ref") is None:
        yield "proof_ref", "sha256:…", None, {}


def _proof_extra(doc: Mapping[str, Any]) -> Iterator[tuple[str, Any, Any, dict[str, Any]]]:
    status, ref = doc.get("status"), doc.get("proof_ref")
    if status != VERIFIED and ref is not None:
        yield "proof_ref", None, ref, {"status": status}


def _authoritative(doc: Mapping[str, Any]) -> Iterator[tuple[str, Any, Any, dict[str, Any]]]:
    want = doc.get("proof_ref") is not None
    if doc.get("is_authoritative") is not want:
        yield "is_authoritative", want, doc.get("is_authoritative"), {}


def _advisory(doc: Mapping[str, Any]) -> Iterator[tuple[str, Any, Any, dict[str, Any]]]:
    dev = doc.get("developer_fields")
    checks = dev.get("advisory_checks") if isinstance(dev, dict) else None
    if not isinstance(checks, list):
        return
    for i, c in enumerate(checks):
        if isinstance(c, dict) and "advisory_only" in c and not advisory_flag_ok(
                c["advisory_only"]):
            yield (f"developer_fields.advisory_checks[{i}].advisory_only", True,
                   c["advisory_only"], {"i": i})


def _attestation(doc: Mapping[str, Any]) -> Iterator[tuple[str, Any, Any, dict[str, Any]]]:
    if doc.get("attestation") is not None and doc.get("status") != VERIFIED:
        yield "attestation", None, None, {}


INVALID_STATUS = Rule(
    "invalid_status", "invalid_status", "status",
    "must be one of VERIFIED, UNVERIFIABLE, BLOCKED (case-sensitive)",
    "status is not VERIFIED, UNVERIFIABLE or BLOCKED", _status)
EMPTY_AGENT_MESSAGE = Rule(
    "empty_agent_message", "empty_agent_message", "agent_message",
    "must be a non-empty string (Layer 1 diagnostics are mandatory)",
    "agent_message is empty", _agent_message)
MALFORMED_PROOF_REF = Rule(
    "malformed_proof_ref", None, "proof_ref",
    "must be 'sha256:' followed by 64 lowercase hex digits, or null", None, _proof_ref_form)
VERIFIED_WITHOUT_PROOF = Rule(
    "verified_without_proof", "verified_without_proof", "proof_ref",
    "a VERIFIED result must carry a proof_ref", "a VERIFIED row has no proof_ref",
    _proof_missing)
PROOF_ON_NON_VERIFIED = Rule(
    "proof_on_non_verified", "proof_on_non_verified", "proof_ref",
    "a {status} result must not carry a proof_ref", "a {status} row carries a proof_ref",
    _proof_extra)
AUTHORITATIVE_INCONSISTENT = Rule(
    "authoritative_inconsistent", "authoritative_inconsistent", "is_authoritative",
    "must equal (proof_ref is not null)",
    "is_authoritative must equal (proof_ref is not null)", _authoritative)
NON_ADVISORY_CHECK = Rule(
    "non_advisory_check", "non_advisory_check",
    "developer_fields.advisory_checks[i].advisory_only",
    "advisory checks must have advisory_only true; they never influence the verdict",
    "advisory_checks[{i}].advisory_only is not true", _advisory)
ATTESTATION_ON_NON_VERIFIED = Rule(
    "attestation_on_non_verified", "attestation_on_non_verified", "attestation",
    "only a VERIFIED result carries an attestation", "only VERIFIED rows carry one",
    _attestation)

# Every rule, in the order submission validation applies them (the first one violated
# is the rejection).
RULES: tuple[Rule, ...] = (
    INVALID_STATUS, EMPTY_AGENT_MESSAGE, MALFORMED_PROOF_REF, VERIFIED_WITHOUT_PROOF,
    PROOF_ON_NON_VERIFIED, AUTHORITATIVE_INCONSISTENT, NON_ADVISORY_CHECK,
    ATTESTATION_ON_NON_VERIFIED,
)
# What the audit checks on a stored row, in its report order: the hashed envelope's
# status/proof_ref, then the stored result document, then the attached attestation.
ENVELOPE_RULES: tuple[Rule, ...] = (INVALID_STATUS, PROOF_ON_NON_VERIFIED,
                                    VERIFIED_WITHOUT_PROOF)
DOCUMENT_RULES: tuple[Rule, ...] = (AUTHORITATIVE_INCONSISTENT, EMPTY_AGENT_MESSAGE,
                                    NON_ADVISORY_CHECK)
ATTESTATION_RULES: tuple[Rule, ...] = (ATTESTATION_ON_NON_VERIFIED,)
# What submission validation checks of the result before its attestation (RULES in order,
# without the attestation rule, which is checked once the attestation's type is known).
SUBMISSION_RULES: tuple[Rule, ...] = tuple(r for r in RULES if r not in ATTESTATION_RULES)


def violations(view: Mapping[str, Any], rules: tuple[Rule, ...] = RULES) -> list[Violation]:
    """Every violation of ``rules`` by the result ``view``, in rule order."""
    if (rules is ENVELOPE_RULES and envelope_clean(view)) \
            or (rules is DOCUMENT_RULES and document_clean(view)) \
            or (rules is SUBMISSION_RULES and envelope_clean(view) and document_clean(view)
                and _proof_ref_clean(view)) \
            or (rules is ATTESTATION_RULES and (view.get("attestation") is None
                                                or view.get("status") == VERIFIED)):
        return []
    return [Violation(rule, where, expected, actual, params)
            for rule in rules for where, expected, actual, params in rule.find(view)]


# -- the clean case, decided at once (the audit's and the append's hot path) -------------
# For the rule sets applied to every row and every submission, one test that is true
# exactly when the rules find nothing; tests/core/test_contract_fast.py pins each to its rules
# (property-tested on arbitrary documents).  When it is false, the rules themselves run.
def envelope_clean(view: Mapping[str, Any]) -> bool:
    """True exactly when :data:`ENVELOPE_RULES` find nothing in ``view``."""
    status, ref = view.get("status"), view.get("proof_ref")
    return (type(status) is str and status in STATUSES
            and (ref is not None) == (status == VERIFIED))


def _proof_ref_clean(view: Mapping[str, Any]) -> bool:
    ref = view.get("proof_ref")
    return ref is None or (isinstance(ref, str) and PROOF_REF_RE.fullmatch(ref) is not None)


def document_clean(doc: Mapping[str, Any]) -> bool:
    """True exactly when :data:`DOCUMENT_RULES` find nothing in ``doc``."""
    if doc.get("is_authoritative") is not (doc.get("proof_ref") is not None):
        return False
    msg = doc.get("agent_message")
    if not isinstance(msg, str) or not msg.strip():
        return False
    dev = doc.get("developer_fields")
    checks = dev.get("advisory_checks") if isinstance(dev, dict) else None
    if isinstance(checks, list):
        for c in checks:
            if isinstance(c, dict) and "advisory_only" in c \
                    and not advisory_flag_ok(c["advisory_only"]):
                return False
    return True


def finding_codes(view: Mapping[str, Any]) -> list[str]:
    """The audit finding codes ``view`` violates (rules the audit checks), in rule order."""
    return [v.code for v in violations(view) if v.code is not None]
