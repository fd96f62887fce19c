"""The QWED adapter on real QWED 8.0.0 objects: the submission of every engine's result
is accepted by the ledger, with the exact preimage QWED hashed."""

from __future__ import annotations

import hashlib

import pytest

from ledger.facade import Ledger
from ledger.integrations.qwed import EvidenceRecorder, submission
from tests.integrations.conftest import ISSUER, JWKS


def test_every_engine_result_becomes_an_accepted_submission(sqlite_url: str) -> None:
    import json

    from qwed_new.core.diagnostics import merge_diagnostic_result

    from tests.integrations.qwed_engines import install_issuer, produce

    install_issuer()
    recorder = EvidenceRecorder()
    with recorder:
        produced = produce(7)
    subs = []
    for p in produced:
        sub = submission(p.result, engine=p.engine, query=p.query, admission=p.admission,
                         recorder=recorder)
        if p.result.status.value == "VERIFIED":
            pre = sub["proof_preimage"]
            assert "sha256:" + hashlib.sha256(pre.encode()).hexdigest() == p.result.proof_ref
        subs.append(sub)
    flat = submission(merge_diagnostic_result(produced[0].result), engine="math",
                      query=produced[0].query, recorder=recorder)  # the API response shape
    with Ledger.init(sqlite_url) as ledger:
        ledger.trust_issuer(ISSUER, json.loads(JWKS.read_text()))
        results = ledger.append_many([*subs, flat], producer="gateway")
    assert all(r.ok for r in results), [r.error for r in results if not r.ok]
    assert {p.engine for p in produced} == {"math", "logic", "sql", "schema", "fact", "code"}


def test_a_verified_result_without_its_evidence_is_refused_here() -> None:
    from qwed_new.core.diagnostics import DiagnosticResult

    dr = DiagnosticResult.verified("ok", {"is_valid": True}, evidence={"x": 1})
    with pytest.raises(ValueError, match="needs the evidence"):
        submission(dr, engine="math")
    assert submission(dr, engine="math", evidence={"x": 1})["proof_preimage"] == '{"x": 1}'
    with pytest.raises(ValueError, match="engine"):
        submission(dr, engine="Math Engine!", evidence={"x": 1})
