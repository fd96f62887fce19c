"""Realistic submissions from several engines, for the demo and the benchmarks.

Shapes follow the upstream producer (QWED 8.0): VERIFIED results with the
evidence whose ``json.dumps(sort_keys=True)`` is their proof, a logic result
whose proof is the ``repr`` of a Python list, proven-false results, fact-engine
results capped at UNVERIFIABLE, trust-gate BLOCKED results, advisory checks.
"""

from __future__ import annotations

import random
from typing import Any

from ledger.core.diagnostics import AdvisoryCheck, DiagnosticResult
from ledger.core.digest import digest_text


def _sub(result: DiagnosticResult, engine: str, **extra: Any) -> dict[str, Any]:
    return {"result": result.to_dict(), "engine": engine, **extra}


def math_verified(i: int, rng: random.Random) -> dict[str, Any]:
    values = [round(rng.uniform(-1000, 1000), 4) for _ in range(24)]
    evidence = {
        "expression": f"irr(cashflows_{i})", "calculated": sum(values) / len(values),
        "claimed": sum(values) / len(values), "tolerance": 1e-09, "cashflows": values,
        "method": "sympy.nsolve", "iterations": rng.randint(3, 40), "converged": True,
    }
    result = DiagnosticResult.verified(
        "Claim verified — computed value matches the claim",
        {"constraint_id": "math_verifier.irr_converged", "iterations": evidence["iterations"],
         "calculated_value": evidence["calculated"], "claimed_value": evidence["claimed"],
         "methods_used": ["sympy.nsolve", "numpy.irr"], "is_valid": True,
         "advisory_checks": [AdvisoryCheck(
             "floating-point-constants", constraint_id="precision.float-constants",
             details={"constants": ["0.05"], "note": "Binary floating-point values can be "
                      "inexact; results may differ from exact decimal arithmetic."})]},
        evidence)
    return _sub(result, "math", evidence=evidence, subject=f"req-{i:06d}",
                query=f"Is the IRR of cashflows_{i} equal to the claimed value?",
                meta={"qwed_version": "8.0.0", "model": "demo-model-1"})


def logic_verified(i: int, rng: random.Random) -> dict[str, Any]:
    assertions = [("x", "Int"), ("y", "Int"), f"x + y == {i}", "x > 0", "y > 0"]
    preimage = repr(assertions)  # upstream hashes a Python repr, not JSON
    result = DiagnosticResult.verified(
        "Claim verified — the constraints are satisfiable",
        {"constraint_id": "logic_verifier.sat", "model": {"x": 1, "y": i - 1},
         "solver": "z3", "is_valid": True}, evidence=None, proof_data=preimage)
    return _sub(result, "logic", proof_preimage=preimage, subject=f"req-{i:06d}")


def math_disproven(i: int, rng: random.Random) -> dict[str, Any]:
    evidence = {"claimed": 42, "calculated": 41.999, "residual": 0.001}
    result = DiagnosticResult.disproven(
        "Claim is false — computed value differs from the claim",
        {"constraint_id": "math_verifier.value_mismatch", "expected": 41.999, "actual": 42},
        evidence)
    return _sub(result, "math", evidence=evidence, subject=f"req-{i:06d}")


def fact_unverifiable(i: int, rng: random.Random) -> dict[str, Any]:
    result = DiagnosticResult.unverifiable(
        "Claim could not be deterministically verified",
        {"constraint_id": "fact_verifier.heuristic_supported",
         "deterministic_verdict": "SUPPORTED", "deterministic_confidence": 0.94,
         "citations": [{"sentence": "Acme Corp was founded in 2020.", "relevance": 0.98}],
         "advisory_checks": [AdvisoryCheck("llm_fallback",
                                           constraint_id="fact_verifier.llm_advisory_only",
                                           details={"llm_verdict": "SUPPORTED",
                                                    "llm_confidence": 0.65})]})
    return _sub(result, "fact", subject=f"req-{i:06d}")


def sql_blocked(i: int, rng: random.Random) -> dict[str, Any]:
    result = DiagnosticResult.blocked(
        "Verification blocked — attestation does not sign this admission",
        {"constraint_id": "trust_gate.claims_admission_mismatch", "token_admission": "BLOCKED",
         "expected_admission": "ADMIT", "policy": "mandatory", "verdict_status": "VERIFIED",
         "verdict_proof_ref": "sha256:" + "ab" * 32})
    return _sub(result, "sql", subject=f"req-{i:06d}")


def schema_blocked(i: int, rng: random.Random) -> dict[str, Any]:
    result = DiagnosticResult.blocked(
        "Missing required field: customer_id",
        {"constraint_id": "schema_verifier.required_missing", "missing": ["customer_id"]})
    return _sub(result, "schema", subject=f"req-{i:06d}")


MIX = [math_verified, logic_verified, math_disproven, fact_unverifiable, sql_blocked,
       schema_blocked]


def realistic(n: int, seed: int = 7, start: int = 0) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    return [MIX[i % len(MIX)](start + i, rng) for i in range(n)]


def bench_submission(i: int, rng: random.Random) -> dict[str, Any]:
    """A 1–2 KB VERIFIED math submission (the benchmark row)."""
    return math_verified(i, rng)


def rejected_examples() -> list[tuple[str, dict[str, Any]]]:
    """Submissions that break the contract, with the rule each breaks."""
    good = DiagnosticResult.verified("ok", {"constraint_id": "math_verifier.ok"}, {"v": 1})
    unverifiable_with_proof: dict[str, Any] = {
        "status": "UNVERIFIABLE", "agent_message": "inconclusive", "developer_fields": {},
        "proof_ref": good.proof_ref, "is_authoritative": True}
    return [
        ("UNVERIFIABLE result carrying a proof_ref",
         {"result": unverifiable_with_proof, "engine": "math"}),
        ("evidence that does not hash to proof_ref",
         {"result": good.to_dict(), "engine": "math", "evidence": {"v": 2}}),
        ("malformed proof_ref",
         {"result": {**good.to_dict(), "proof_ref": "sha256:XYZ"}, "engine": "math",
          "evidence": {"v": 1}}),
        ("VERIFIED without evidence", {"result": good.to_dict(), "engine": "math"}),
        ("lower-case status",
         {"result": {"status": "verified", "agent_message": "ok"}, "engine": "math"}),
    ]


def attested(i: int, key: Any, issuer: str, kid: str, iat: int, ttl_s: int = 86_400,
             ) -> dict[str, Any]:
    """A VERIFIED math result with an upstream-shaped ES256 attestation signed by ``key``,
    valid for ``ttl_s`` seconds from ``iat``."""

    from ledger.crypto.tokens import sign_es256

    query = f"Is 2 + {i} equal to {2 + i}?"
    evidence = {"expression": f"2 + {i}", "calculated": 2 + i, "claimed": 2 + i}
    result = DiagnosticResult.verified(
        "Claim verified — computed value matches the claim",
        {"constraint_id": "math_verifier.exact_match", "is_valid": True}, evidence)
    query_hash = digest_text(query.encode())
    claims = {"iss": issuer, "sub": query_hash, "iat": iat, "exp": iat + ttl_s,
              "jti": f"att_{i:012x}",
              "qwed": {"version": "1.0", "result": {"status": "VERIFIED", "verified": True,
                                                     "engine": "math", "confidence": 1.0},
                       "query_hash": query_hash, "proof_hash": result.proof_ref,
                       "admission": "ADMIT"}}
    token = sign_es256(claims, key, kid=kid, typ="qwed-attestation+jwt")
    return {"result": result.to_dict(), "engine": "math", "evidence": evidence,
            "attestation": token, "query": query, "admission": "ADMIT",
            "subject": f"req-att-{i:04d}"}
