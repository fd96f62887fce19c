"""``ledger.core.diagnostics``: our port of upstream's DiagnosticResult contract.

Where behaviour must match upstream, the expected values below were *recorded*
by running qwed==8.0.0 (``qwed_new.core.diagnostics``) on the same inputs; they
are literals, never our own function's output.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from typing import Any

import pytest

from ledger.core.diagnostics import (
    PROOF_REF_PREFIX,
    AdvisoryCheck,
    DiagnosticResult,
    DiagnosticStatus,
    compute_proof_ref,
)

V, U, B = DiagnosticStatus.VERIFIED, DiagnosticStatus.UNVERIFIABLE, DiagnosticStatus.BLOCKED
REF = "sha256:" + "ab" * 32


def sha(text: str) -> str:
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


# -- status taxonomy -------------------------------------------------------------

def test_status_values_are_exactly_three_case_sensitive_strings() -> None:
    assert [s.value for s in DiagnosticStatus] == ["VERIFIED", "UNVERIFIABLE", "BLOCKED"]
    assert DiagnosticStatus("VERIFIED") is V
    assert V == "VERIFIED"  # str enum, as upstream
    with pytest.raises(ValueError):
        DiagnosticStatus("verified")
    for name in ("HEURISTIC", "AMBIGUOUS", "CORRECTION_NEEDED"):
        with pytest.raises(ValueError):
            DiagnosticStatus(name)


# -- invariants --------------------------------------------------------------------

def test_result_is_frozen() -> None:
    r = DiagnosticResult.unverifiable("no", {})
    with pytest.raises(dataclasses.FrozenInstanceError):
        r.proof_ref = "sha256:fake"  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        r.status = V  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        r.attestation = "tok"  # type: ignore[misc]
    assert r.proof_ref is None and r.status is U


@pytest.mark.parametrize("proof_ref", [None, ""])
def test_verified_requires_non_empty_proof(proof_ref: str | None) -> None:
    with pytest.raises(ValueError, match="VERIFIED status requires proof_ref"):
        DiagnosticResult(V, "ok", {}, proof_ref)


@pytest.mark.parametrize("status", [U, B])
@pytest.mark.parametrize("proof_ref", [REF, "", "anything"])
def test_non_verified_rejects_any_proof(status: DiagnosticStatus, proof_ref: str) -> None:
    with pytest.raises(ValueError, match=f"{status.value} status requires proof_ref is None"):
        DiagnosticResult(status, "msg", {}, proof_ref)


def test_verified_proof_ref_format_is_not_checked_here_like_upstream() -> None:
    # Upstream accepts any non-empty proof_ref; the format check is the submission
    # validator's (ledger.core.submission), not the contract's.
    assert DiagnosticResult(V, "ok", {}, "p").proof_ref == "p"


@pytest.mark.parametrize("message", ["", " ", "   \t\n", "\u00a0"])
@pytest.mark.parametrize("status,proof", [(V, REF), (U, None), (B, None)])
def test_empty_or_whitespace_agent_message_rejected(message: str, status: DiagnosticStatus,
                                                     proof: str | None) -> None:
    with pytest.raises(ValueError, match="agent_message must be non-empty"):
        DiagnosticResult(status, message, {}, proof)


def test_non_string_agent_message_rejected() -> None:
    # Upstream raises AttributeError here (it calls .strip() on an int); the
    # port refuses it as a contract violation instead.
    with pytest.raises(ValueError):
        DiagnosticResult(U, 5, {})  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        DiagnosticResult(U, None, {})  # type: ignore[arg-type]


def test_status_must_be_the_enum() -> None:
    with pytest.raises(ValueError, match="status must be a DiagnosticStatus"):
        DiagnosticResult("VERIFIED", "ok", {}, REF)  # type: ignore[arg-type]


def test_attestation_only_on_verified_and_non_empty_string() -> None:
    ok = DiagnosticResult(V, "ok", {}, REF, attestation="a.b.c")
    assert ok.attestation == "a.b.c"
    for status in (U, B):
        with pytest.raises(ValueError, match="only a VERIFIED result carries one"):
            DiagnosticResult(status, "m", {}, None, attestation="a.b.c")
    with pytest.raises(ValueError, match="attestation"):
        DiagnosticResult(V, "ok", {}, REF, attestation="")
    with pytest.raises(ValueError, match="attestation"):
        DiagnosticResult(V, "ok", {}, REF, attestation=5)  # type: ignore[arg-type]
    assert DiagnosticResult(V, "ok", {}, REF, attestation=None).attestation is None


# -- factories ---------------------------------------------------------------------

def test_verified_factory_hashes_evidence() -> None:
    r = DiagnosticResult.verified("ok", {"a": 1}, {"b": 2.0})
    assert r.status is V and r.is_verified and r.is_authoritative
    assert r.proof_ref == sha('{"b": 2.0}')
    # recorded from upstream: DiagnosticResult.verified("ok", {"a": 1}, {"b": 2.0}).proof_ref
    assert r.proof_ref == "sha256:c89f869cfc3ee651e63fc040f9eec1cff3ba25656ccad620c897e4284b37b365"
    assert r.developer_fields == {"a": 1} and r.attestation is None


def test_verified_factory_prefers_proof_data_even_when_empty_evidence() -> None:
    r = DiagnosticResult.verified("ok", {}, {"ignored": True}, proof_data="['x > 2']")
    assert r.proof_ref == sha("['x > 2']")
    # proof_data="" is not None: the empty string is hashed (upstream checks `is not None`)
    r2 = DiagnosticResult.verified("ok", {}, {"ignored": True}, proof_data="")
    assert r2.proof_ref == sha("")


def test_verified_factory_with_string_evidence_hashes_raw() -> None:
    assert DiagnosticResult.verified("ok", {}, "raw text").proof_ref == sha("raw text")


def test_disproven_is_verified_with_is_valid_false_and_does_not_mutate_input() -> None:
    fields = {"is_valid": True, "x": 1}
    r = DiagnosticResult.disproven("no", fields, {"b": 2}, proof_data="P")
    assert r.status is V and r.is_authoritative and not r.is_fail_closed
    assert r.developer_fields == {"is_valid": False, "x": 1}
    assert fields == {"is_valid": True, "x": 1}
    # recorded from upstream
    assert r.proof_ref == "sha256:5c62e091b8c0565f1bafad0dad5934276143ae2ccef7a5381e8ada5b1a8d26d2"
    assert DiagnosticResult.disproven("no", {}, {"b": 2}).proof_ref == sha('{"b": 2}')


@pytest.mark.parametrize("factory,status", [(DiagnosticResult.unverifiable, U),
                                            (DiagnosticResult.blocked, B)])
def test_fail_closed_factories(factory: Any, status: DiagnosticStatus) -> None:
    r = factory("why", {"constraint_id": "c.id"})
    assert r.status is status and r.proof_ref is None and r.is_fail_closed
    assert not r.is_verified and not r.is_authoritative
    assert factory("why").developer_fields == {}
    assert factory("why", None).developer_fields == {}
    # `developer_fields or {}`: a falsy mapping is replaced by a fresh dict
    assert factory("why", {}).developer_fields == {}
    with pytest.raises(ValueError):
        factory("", {})


# -- properties --------------------------------------------------------------------

def test_properties() -> None:
    v = DiagnosticResult.verified("ok", {"constraint_id": "m.mode_unique_match"}, {"e": 1})
    u = DiagnosticResult.unverifiable("u", {"constraint_id": "f.heuristic_supported"})
    b = DiagnosticResult.blocked("b")
    assert (v.is_verified, v.is_authoritative, v.is_fail_closed) == (True, True, False)
    assert (u.is_verified, u.is_authoritative, u.is_fail_closed) == (False, False, True)
    assert (b.is_verified, b.is_authoritative, b.is_fail_closed) == (False, False, True)
    assert v.constraint_id == "m.mode_unique_match"
    assert u.constraint_id == "f.heuristic_supported"
    assert b.constraint_id is None


def test_blocked_verdict_proof_ref_grants_no_authority() -> None:
    r = DiagnosticResult.blocked("Verification blocked — proof artifact missing", {
        "constraint_id": "trust_gate.mandatory_attestation_missing", "verdict_proof_ref": REF})
    assert r.proof_ref is None and not r.is_authoritative and r.is_fail_closed


def test_advisory_checks_property_skips_malformed_items() -> None:
    inst = AdvisoryCheck(name="c")
    r = DiagnosticResult.unverifiable("u", {"advisory_checks": [
        {"name": "a"},
        {"name": "b", "advisory_only": False},
        "junk",
        5,
        None,
        inst,
        {"name": "d", "advisory_only": "yes"},
        {"name": "e", "advisory_only": 1},
        {"name": "f", "advisory_only": 0},
        {"name": "g", "advisory_only": 1.0},
    ]})
    checks = r.advisory_checks
    # recorded from upstream on the same list: ['a', 'c', 'e']
    assert [c.name for c in checks] == ["a", "c", "e"]
    assert checks[1] is inst
    assert all(c.advisory_only is True for c in checks)


@pytest.mark.parametrize("raw", ["notalist", ({"name": "t"},), {"name": "x"}, None, 3])
def test_advisory_checks_property_non_list_is_empty(raw: Any) -> None:
    assert DiagnosticResult.unverifiable("u", {"advisory_checks": raw}).advisory_checks == []
    assert DiagnosticResult.unverifiable("u", {}).advisory_checks == []


# -- AdvisoryCheck -------------------------------------------------------------------

def test_advisory_check_advisory_only_is_enforced() -> None:
    assert AdvisoryCheck(name="n").advisory_only is True
    for bad in (False, 0, 1, "yes", None, 1.0):
        with pytest.raises(ValueError, match="advisory_only must be True"):
            AdvisoryCheck(name="n", advisory_only=bad)  # type: ignore[arg-type]
    with pytest.raises(dataclasses.FrozenInstanceError):
        AdvisoryCheck(name="n").advisory_only = False  # type: ignore[misc]


def test_advisory_check_to_dict() -> None:
    c = AdvisoryCheck(name="llm_fallback", constraint_id="fact_verifier.llm_advisory_only",
                      details={"llm_verdict": "SUPPORTED", "llm_confidence": 0.65})
    assert c.to_dict() == {"name": "llm_fallback", "advisory_only": True,
                           "constraint_id": "fact_verifier.llm_advisory_only",
                           "details": {"llm_verdict": "SUPPORTED", "llm_confidence": 0.65}}
    assert list(c.to_dict()) == ["name", "advisory_only", "constraint_id", "details"]


def test_advisory_check_from_dict_defaults_and_coercions() -> None:
    # recorded from upstream: AdvisoryCheck.from_dict({}).to_dict()
    assert AdvisoryCheck.from_dict({}).to_dict() == {
        "name": "", "advisory_only": True, "constraint_id": "", "details": {}}
    # recorded from upstream: advisory_only 1 -> True, constraint_id None -> ""
    assert AdvisoryCheck.from_dict({"name": "n", "advisory_only": 1, "constraint_id": None,
                                    "details": {"k": 1}}).to_dict() == {
        "name": "n", "advisory_only": True, "constraint_id": "", "details": {"k": 1}}
    assert AdvisoryCheck.from_dict({"advisory_only": True}).advisory_only is True


@pytest.mark.parametrize("raw", [False, 0])
def test_advisory_check_from_dict_false_values_reach_post_init(raw: Any) -> None:
    with pytest.raises(ValueError, match="advisory_only must be True"):
        AdvisoryCheck.from_dict({"name": "n", "advisory_only": raw})


@pytest.mark.parametrize("raw", [2, -1, "yes", "true", None, 1.0, [True], {"v": True}])
def test_advisory_check_from_dict_other_types_rejected(raw: Any) -> None:
    # upstream raises ValueError for each of these (recorded)
    with pytest.raises(ValueError, match="bool or integer 0/1"):
        AdvisoryCheck.from_dict({"name": "n", "advisory_only": raw})


# -- to_dict / from_dict ----------------------------------------------------------------

def test_to_dict_shape_and_key_order() -> None:
    r = DiagnosticResult.verified("ok", {"a": 1}, {"b": 2.0})
    d = r.to_dict()
    assert list(d) == ["status", "agent_message", "developer_fields", "proof_ref",
                       "is_authoritative"]
    assert d == {"status": "VERIFIED", "agent_message": "ok", "developer_fields": {"a": 1},
                 "proof_ref": r.proof_ref, "is_authoritative": True}
    assert type(d["status"]) is str
    b = DiagnosticResult.blocked("b").to_dict()
    # recorded from upstream: DiagnosticResult.blocked("b").to_dict()
    assert b == {"status": "BLOCKED", "agent_message": "b", "developer_fields": {},
                 "proof_ref": None, "is_authoritative": False}
    assert "attestation" not in b


def test_to_dict_attestation_only_when_set() -> None:
    d = DiagnosticResult(V, "m", {}, "p", attestation="t").to_dict()
    # recorded from upstream
    assert d == {"status": "VERIFIED", "agent_message": "m", "developer_fields": {},
                 "proof_ref": "p", "is_authoritative": True, "attestation": "t"}
    assert list(d)[-1] == "attestation"


def test_to_dict_serializes_advisory_check_instances_without_mutating() -> None:
    inst = AdvisoryCheck(name="float", constraint_id="precision.float-constants",
                         details={"constants": ["0.1"]})
    fields = {"advisory_checks": [inst, {"name": "raw", "advisory_only": True}, "junk"]}
    r = DiagnosticResult.unverifiable("u", fields)
    d = r.to_dict()
    assert d["developer_fields"]["advisory_checks"] == [
        {"name": "float", "advisory_only": True, "constraint_id": "precision.float-constants",
         "details": {"constants": ["0.1"]}},
        {"name": "raw", "advisory_only": True},
        "junk",
    ]
    assert r.developer_fields["advisory_checks"][0] is inst  # original untouched
    json.dumps(d)  # JSON-safe


def test_round_trip_verified_unverifiable_blocked() -> None:
    for r in (DiagnosticResult.verified("ok", {"constraint_id": "x", "n": [1, 2.5]}, {"e": 1}),
              DiagnosticResult.unverifiable("u", {"constraint_id": "y"}),
              DiagnosticResult.blocked("b", {"verdict_proof_ref": REF})):
        d = r.to_dict()
        back = DiagnosticResult.from_dict(d)
        assert back == r
        assert back.to_dict() == d
        assert back.is_authoritative == d["is_authoritative"]
        assert DiagnosticResult.from_dict(json.loads(json.dumps(d))) == r


def test_round_trip_with_advisory_checks_keeps_dict_form() -> None:
    r = DiagnosticResult.unverifiable("u", {"advisory_checks": [AdvisoryCheck(name="a")]})
    back = DiagnosticResult.from_dict(r.to_dict())
    assert back.developer_fields["advisory_checks"] == [
        {"name": "a", "advisory_only": True, "constraint_id": "", "details": {}}]
    assert [c.name for c in back.advisory_checks] == ["a"]
    assert back.to_dict() == r.to_dict()


def test_from_dict_ignores_attestation_unless_asked() -> None:
    r = DiagnosticResult(V, "m", {}, REF, attestation="h.p.s")
    d = r.to_dict()
    plain = DiagnosticResult.from_dict(d)
    assert plain.attestation is None  # upstream never reads a token from input
    assert plain.to_dict() == {k: v for k, v in d.items() if k != "attestation"}
    kept = DiagnosticResult.from_dict(d, keep_attestation=True)
    assert kept == r and kept.to_dict() == d
    with pytest.raises(ValueError):
        DiagnosticResult.from_dict({"status": "BLOCKED", "agent_message": "m",
                                    "attestation": "t"}, keep_attestation=True)


def test_from_dict_ignores_is_authoritative_input() -> None:
    # the flag is derived, never read: a lying flag cannot grant authority
    r = DiagnosticResult.from_dict({"status": "BLOCKED", "agent_message": "m",
                                    "is_authoritative": True})
    assert r.is_authoritative is False


def test_from_dict_defaults() -> None:
    # recorded from upstream: {"agent_message": "m"} -> UNVERIFIABLE with {} fields
    assert DiagnosticResult.from_dict({"agent_message": "m"}).to_dict() == {
        "status": "UNVERIFIABLE", "agent_message": "m", "developer_fields": {},
        "proof_ref": None, "is_authoritative": False}


@pytest.mark.parametrize("data,exc,match", [
    ({"status": 1, "agent_message": "m"}, TypeError, "status must be a string, not int"),
    ({"status": None, "agent_message": "m"}, TypeError, "not NoneType"),
    ({"status": "verified", "agent_message": "m"}, ValueError, "invalid status 'verified'"),
    ({"status": "PASSED", "agent_message": "m"}, ValueError, "invalid status"),
    ({"status": "VERIFIED", "proof_ref": REF}, ValueError, "'agent_message' is missing or empty"),
    ({"status": "BLOCKED", "agent_message": "  "}, ValueError, "missing or empty"),
    ({"status": "BLOCKED", "agent_message": ""}, ValueError, "missing or empty"),
    ({"status": "VERIFIED", "agent_message": "m"}, ValueError, "VERIFIED status requires"),
    ({"status": "BLOCKED", "agent_message": "m", "proof_ref": REF}, ValueError,
     "BLOCKED status requires proof_ref is None"),
])
def test_from_dict_rejections_match_upstream(data: dict, exc: type, match: str) -> None:
    # exception types recorded from upstream on the same inputs
    with pytest.raises(exc, match=match):
        DiagnosticResult.from_dict(data)


# -- from_legacy_dict ------------------------------------------------------------------------

# Recorded by running qwed==8.0.0 DiagnosticResult.from_legacy_dict(data, engine).to_dict().
UPSTREAM_LEGACY: list[tuple[str, dict[str, Any], str, dict[str, Any]]] = [
    ("blocked_msg",
     {"is_correct": False, "status": "BLOCKED", "error": "E", "message": "M", "extra": 1}, "sql",
     {"status": "BLOCKED", "agent_message": "M",
      "developer_fields": {"constraint_id": "sql.legacy_blocked", "legacy_error": "E",
                           "legacy_data": {"message": "M", "extra": 1}},
      "proof_ref": None, "is_authoritative": False}),
    ("blocked_nomsg", {"status": "BLOCKED"}, "math",
     {"status": "BLOCKED", "agent_message": "Verification blocked",
      "developer_fields": {"constraint_id": "math.legacy_blocked", "legacy_error": None,
                           "legacy_data": {}},
      "proof_ref": None, "is_authoritative": False}),
    ("blocked_reasoning", {"status": "BLOCKED", "reasoning": "R", "verified": False}, "logic",
     {"status": "BLOCKED", "agent_message": "R",
      "developer_fields": {"constraint_id": "logic.legacy_blocked", "legacy_error": None,
                           "legacy_data": {"reasoning": "R", "verified": False}},
      "proof_ref": None, "is_authoritative": False}),
    ("error", {"is_correct": False, "status": "ERROR", "error": "Empty dataset"}, "math",
     {"status": "BLOCKED", "agent_message": "Verification blocked — processing error",
      "developer_fields": {"constraint_id": "math.legacy_error", "legacy_error": "Empty dataset",
                           "legacy_status": "ERROR"},
      "proof_ref": None, "is_authoritative": False}),
    ("syntax_msg", {"status": "SYNTAX_ERROR", "message": "bad"}, "math",
     {"status": "BLOCKED", "agent_message": "Verification blocked — processing error",
      "developer_fields": {"constraint_id": "math.legacy_error", "legacy_error": "bad",
                           "legacy_status": "SYNTAX_ERROR"},
      "proof_ref": None, "is_authoritative": False}),
    ("parse_none", {"status": "PARSE_ERROR"}, "logic",
     {"status": "BLOCKED", "agent_message": "Verification blocked — processing error",
      "developer_fields": {"constraint_id": "logic.legacy_error", "legacy_error": "",
                           "legacy_status": "PARSE_ERROR"},
      "proof_ref": None, "is_authoritative": False}),
    ("correction",
     {"is_correct": False, "status": "CORRECTION_NEEDED", "error": "x",
      "message": "Claimed differs", "calculated_value": 3}, "math",
     {"status": "UNVERIFIABLE", "agent_message": "Claimed differs",
      "developer_fields": {"constraint_id": "math.legacy_inconclusive",
                           "legacy_status": "CORRECTION_NEEDED",
                           "legacy_data": {"calculated_value": 3}},
      "proof_ref": None, "is_authoritative": False}),
    ("not_equiv", {"status": "NOT_EQUIVALENT", "diff": "x - 1"}, "math",
     {"status": "UNVERIFIABLE", "agent_message": "Verification inconclusive",
      "developer_fields": {"constraint_id": "math.legacy_inconclusive",
                           "legacy_status": "NOT_EQUIVALENT", "legacy_data": {"diff": "x - 1"}},
      "proof_ref": None, "is_authoritative": False}),
    ("inconclusive_truthy", {"status": "INCONCLUSIVE", "is_correct": True}, "stats",
     {"status": "UNVERIFIABLE", "agent_message": "Verification inconclusive",
      "developer_fields": {"constraint_id": "stats.legacy_inconclusive",
                           "legacy_status": "INCONCLUSIVE", "legacy_data": {}},
      "proof_ref": None, "is_authoritative": False}),
    ("insufficient", {"status": "INSUFFICIENT_EVIDENCE", "reasoning": "few"}, "fact",
     {"status": "UNVERIFIABLE", "agent_message": "few",
      "developer_fields": {"constraint_id": "fact.legacy_inconclusive",
                           "legacy_status": "INSUFFICIENT_EVIDENCE",
                           "legacy_data": {"reasoning": "few"}},
      "proof_ref": None, "is_authoritative": False}),
    ("no_proof", {"status": "NO_PROOF"}, "reasoning",
     {"status": "UNVERIFIABLE", "agent_message": "Verification inconclusive",
      "developer_fields": {"constraint_id": "reasoning.legacy_inconclusive",
                           "legacy_status": "NO_PROOF", "legacy_data": {}},
      "proof_ref": None, "is_authoritative": False}),
    ("falsy_error", {"is_correct": False, "error": "Timeout", "message": "ignored"}, "code",
     {"status": "BLOCKED", "agent_message": "Verification blocked",
      "developer_fields": {"constraint_id": "code.legacy_error", "legacy_error": "Timeout"},
      "proof_ref": None, "is_authoritative": False}),
    ("falsy_msg", {"verified": False, "message": "Could not verify"}, "math",
     {"status": "UNVERIFIABLE", "agent_message": "Could not verify",
      "developer_fields": {"constraint_id": "math.legacy_inconclusive"},
      "proof_ref": None, "is_authoritative": False}),
    ("falsy_empty", {}, "unknown",
     {"status": "UNVERIFIABLE", "agent_message": "Verification inconclusive",
      "developer_fields": {"constraint_id": "unknown.legacy_inconclusive"},
      "proof_ref": None, "is_authoritative": False}),
    ("falsy_zero_unknown_status", {"is_correct": 0, "status": "WHATEVER"}, "x",
     {"status": "UNVERIFIABLE", "agent_message": "Verification inconclusive",
      "developer_fields": {"constraint_id": "x.legacy_inconclusive"},
      "proof_ref": None, "is_authoritative": False}),
    ("falsy_is_verified_none", {"is_verified": None}, "x",
     {"status": "UNVERIFIABLE", "agent_message": "Verification inconclusive",
      "developer_fields": {"constraint_id": "x.legacy_inconclusive"},
      "proof_ref": None, "is_authoritative": False}),
    ("falsy_empty_error_string", {"is_correct": False, "error": ""}, "x",
     {"status": "UNVERIFIABLE", "agent_message": "Verification inconclusive",
      "developer_fields": {"constraint_id": "x.legacy_inconclusive"},
      "proof_ref": None, "is_authoritative": False}),
    ("is_correct_takes_precedence", {"is_correct": False, "is_verified": True}, "x",
     {"status": "UNVERIFIABLE", "agent_message": "Verification inconclusive",
      "developer_fields": {"constraint_id": "x.legacy_inconclusive"},
      "proof_ref": None, "is_authoritative": False}),
]


@pytest.mark.parametrize("name,data,engine,expected", UPSTREAM_LEGACY,
                         ids=[c[0] for c in UPSTREAM_LEGACY])
def test_from_legacy_dict_matches_upstream(name: str, data: dict, engine: str,
                                           expected: dict) -> None:
    before = json.dumps(data, sort_keys=True)
    r = DiagnosticResult.from_legacy_dict(data, engine=engine)
    assert r.to_dict() == expected
    assert json.dumps(r.to_dict(), ensure_ascii=False) == json.dumps(expected, ensure_ascii=False)
    assert r.proof_ref is None and r.is_fail_closed
    assert json.dumps(data, sort_keys=True) == before  # input not mutated


def test_from_legacy_dict_default_engine_is_unknown() -> None:
    assert DiagnosticResult.from_legacy_dict({}).constraint_id == "unknown.legacy_inconclusive"


@pytest.mark.parametrize("data", [
    {"status": "VERIFIED", "is_correct": True},
    {"status": "VERIFIED"},
    {"status": "VERIFIED", "is_correct": False, "is_verified": True},
])
def test_from_legacy_dict_verified_raises(data: dict) -> None:
    with pytest.raises(ValueError, match="cannot migrate VERIFIED"):
        DiagnosticResult.from_legacy_dict(data, engine="math")


@pytest.mark.parametrize("data", [{"status": "DISPROVEN"},
                                  {"status": "DISPROVEN", "is_correct": False}])
def test_from_legacy_dict_disproven_raises(data: dict) -> None:
    with pytest.raises(ValueError, match="cannot migrate DISPROVEN"):
        DiagnosticResult.from_legacy_dict(data, engine="math")


@pytest.mark.parametrize("data", [
    {"is_correct": True},
    {"is_verified": True},
    {"verified": 1},
    {"status": "SOMETHING", "is_correct": "yes"},
    {"status": "verified", "is_correct": True},  # lowercase is not the VERIFIED branch
    {"status": "PASSED", "verified": True},
])
def test_from_legacy_dict_unrecognized_truthy_raises(data: dict) -> None:
    # upstream raises "cannot interpret unrecognized legacy data" for each (recorded)
    with pytest.raises(ValueError, match="cannot interpret unrecognized legacy data"):
        DiagnosticResult.from_legacy_dict(data, engine="e")


def test_from_legacy_dict_never_yields_verified_or_proof() -> None:
    statuses = ["", "BLOCKED", "ERROR", "SYNTAX_ERROR", "PARSE_ERROR", "CORRECTION_NEEDED",
                "NOT_EQUIVALENT", "INCONCLUSIVE", "INSUFFICIENT_EVIDENCE", "NO_PROOF", "OTHER"]
    for status in statuses:
        for flag in (False, 0, None, ""):
            r = DiagnosticResult.from_legacy_dict({"status": status, "is_correct": flag,
                                                   "error": "e" if status else None})
            assert r.status in (U, B) and r.proof_ref is None


# -- compute_proof_ref basics (vectors are in test_proof_ref.py) ----------------------------

def test_compute_proof_ref_prefix_and_format() -> None:
    ref = compute_proof_ref({"a": 1})
    assert PROOF_REF_PREFIX == "sha256:" and ref.startswith(PROOF_REF_PREFIX)
    assert len(ref) == 71 and ref[7:] == ref[7:].lower()
    assert ref == sha('{"a": 1}')
