"""The pure half of re-verification: comparing a fresh result with the stored one, the
run's outcome, and the schema engine's hash-order quirk (docs/reverify.md)."""

from __future__ import annotations

import json

from ledger.core.reexec import Fresh, Stored, compare_results, proof_ref_of, run_outcome
from ledger.integrations.qwed_reexec import align_required


def _stored(result: dict, preimage: str | None) -> Stored:
    return Stored(1, "schema", result["status"], result.get("proof_ref"), result, preimage,
                  None)


def test_a_differing_proof_names_the_evidence_fields_that_differ() -> None:
    a = json.dumps({"query": "SELECT 1", "is_valid": True}, sort_keys=True)
    b = json.dumps({"query": "DROP TABLE t", "is_valid": False}, sort_keys=True)
    stored = _stored({"status": "VERIFIED", "proof_ref": proof_ref_of(a),
                      "developer_fields": {"is_valid": True}}, a)
    fresh = Fresh({"status": "VERIFIED", "proof_ref": proof_ref_of(b),
                   "developer_fields": {"is_valid": False}}, b)
    diffs = [d.to_dict() for d in compare_results(stored, fresh,
                                                  ("developer_fields.is_valid",))]
    assert [d["field"] for d in diffs] == ["proof_ref", "evidence.is_valid", "evidence.query",
                                          "developer_fields.is_valid"]
    assert compare_results(stored, Fresh(stored.result or {}, a),
                           ("developer_fields.is_valid",)) == []


def test_run_outcome_disagreement_wins_then_not_reexecutable() -> None:
    assert run_outcome({"agrees": 3}) == "agrees"
    assert run_outcome({"agrees": 3, "engine_error": 1}) == "not_reexecutable"
    assert run_outcome({"disagrees": 1, "not_reexecutable": 4}) == "disagrees"


def _schema_evidence(issues: list) -> str:
    return json.dumps({"schema": {}, "instance": {}, "issues": issues, "verdict": "INVALID",
                       "paths_checked": 1, "constraints_checked": 2}, sort_keys=True)


def test_missing_required_issues_in_another_hash_order_are_the_same_proof() -> None:
    a = {"path": "$.a", "type": "missing_required"}
    b = {"path": "$.b", "type": "missing_required"}
    other = {"path": "$.n", "type": "type_mismatch"}
    stored_pre = _schema_evidence([a, b, other])
    fresh_pre = _schema_evidence([b, a, other])  # QWED iterated set(required) differently
    fresh = Fresh({"status": "VERIFIED", "proof_ref": proof_ref_of(fresh_pre),
                   "developer_fields": {"issues": [b, a, other]}}, fresh_pre)
    aligned = align_required(stored_pre, fresh)
    assert aligned.preimage == stored_pre
    assert aligned.result["proof_ref"] == proof_ref_of(stored_pre)
    # any other difference is left for the comparison to report
    changed = _schema_evidence([b, other, a])
    moved = Fresh({"status": "VERIFIED", "proof_ref": proof_ref_of(changed)}, changed)
    assert align_required(stored_pre, moved) is moved
    lost = _schema_evidence([b, other])
    assert align_required(stored_pre, Fresh({}, lost)).preimage == lost
