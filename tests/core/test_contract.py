"""The result contract as data (ledger.core.contract) and its shared vectors
(tests/vectors/contract.json): submission validation rejects, and the audit reports,
exactly what the vectors say."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from ledger.core import contract
from ledger.core.audit import CONTRACT_VIOLATION, ChainAuditor
from ledger.core.entry import build_envelope, digest_text, genesis_hash, link
from ledger.core.policy import Policy
from ledger.core.submission import parse_submission
from ledger.errors import SubmissionError

ROOT = Path(__file__).resolve().parents[2]
CASES = json.loads((ROOT / "tests" / "vectors" / "contract.json").read_text("utf-8"))["cases"]
IDS = [c["name"] for c in CASES]
LEDGER = "00000000-0000-4000-8000-00000000c0de"
CONTRACT_CODES = {r.code for r in contract.RULES if r.code is not None}


def test_the_committed_vectors_are_a_fresh_run_of_the_generator():
    res = subprocess.run([sys.executable, str(ROOT / "scripts" / "gen-vectors-contract"),
                          "--check"], capture_output=True, text=True, check=False)
    assert res.returncode == 0, res.stderr


def test_every_rule_has_a_violating_vector_and_there_are_clean_ones():
    seen = {v["rejection"] for c in CASES for v in c["violations"]}
    assert seen == {r.rejection for r in contract.RULES}
    assert any(not c["violations"] for c in CASES)


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_the_contract_finds_what_the_vectors_say(case):
    found = contract.violations(case["document"])
    assert [{"code": v.code, "rejection": v.rejection, "field": v.field} for v in found] \
        == case["violations"]
    assert contract.finding_codes(case["document"]) == case["want"]


@pytest.mark.parametrize("case", [c for c in CASES if "is_authoritative" in c["document"]],
                         ids=[c["name"] for c in CASES if "is_authoritative" in c["document"]])
def test_submission_validation_rejects_with_the_first_violated_rule(case):
    rejections = {r.rejection for r in contract.RULES}
    try:
        parse_submission({"engine": "math", "result": json.loads(json.dumps(case["document"]))})
        got = None
    except SubmissionError as exc:
        got = (exc.code, exc.field)
    if case["violations"]:
        first = case["violations"][0]
        assert got == (first["rejection"], "result." + first["field"])
    else:  # accepted, or (VERIFIED) refused for the evidence the vectors do not carry
        assert got is None or got[0] not in rejections, got


def test_a_left_out_is_authoritative_is_derived_at_submission():
    doc = next(c["document"] for c in CASES if c["name"] == "authoritative-missing")
    with pytest.raises(SubmissionError) as err:
        parse_submission({"engine": "math", "result": dict(doc)})
    assert err.value.code == "missing_evidence"


def _stored_row(doc: dict[str, Any]) -> tuple[Any, dict[str, bytes]]:
    """One result entry at seq 0 holding ``doc`` as its stored result document."""
    stored = {k: v for k, v in doc.items() if k != "attestation"}
    payloads = {"result": json.dumps(stored, sort_keys=True, separators=(",", ":"),
                                     ensure_ascii=False).encode(),
                "attestation": doc["attestation"].encode() if "attestation" in doc else None}
    digests = {n: (digest_text(b) if b is not None else None) for n, b in payloads.items()}
    fields = {"engine": "math", "status": doc.get("status"), "constraint_id": None,
              "proof_ref": doc.get("proof_ref"), "subject": None, "producer": None,
              "idempotency_key": None, "admission": None,
              "att_verdict": "unchecked" if "attestation" in doc else "none",
              "att_kid": None, "att_iss": None}
    env_digests = {"result": digests["result"], "preimage": None,
                   "attestation": digests["attestation"], "query": None, "meta": None}
    envelope = build_envelope(LEDGER, "result", fields, env_digests)
    e = link(genesis_hash(LEDGER), 0, 1_000_000, envelope)
    row = SimpleNamespace(seq=0, kind="result", recorded_at=1_000_000, envelope=envelope,
                          body_hash=e.body_hash, prev_hash=e.prev_hash, entry_hash=e.entry_hash,
                          doc_digest=digests["result"], preimage_digest=None,
                          attestation_digest=digests["attestation"], query_digest=None,
                          meta_digest=None, **fields)
    # the stored payloads by slot, (salt, bytes): a v1 entry has no salts (revision 0005)
    return row, {slot: (None, payloads[n]) for n, slot in (("result", 0), ("attestation", 2))
                 if payloads[n] is not None}


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_the_audit_reports_what_the_vectors_say(case):
    row, blobs = _stored_row(case["document"])
    auditor = ChainAuditor(LEDGER, 0, genesis_hash(LEDGER), 0, Policy((), "none"))
    out = auditor.check_row(row, blobs)
    found = [f.code for f in out.findings if f.cls == CONTRACT_VIOLATION
             and f.code in CONTRACT_CODES]
    assert sorted(found) == sorted(case["want"])


def test_advisory_only_must_be_true_or_the_integer_one():
    assert contract.advisory_flag_ok(True) and contract.advisory_flag_ok(1)
    for flag in (1.0, False, 0, "true", None, [1]):
        assert not contract.advisory_flag_ok(flag), flag
