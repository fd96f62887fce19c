"""``ledger reverify`` with QWED 8.0.0's real engines on SQLite and PostgreSQL: results the
engines produced agree when re-executed; self-consistent forgeries (proof recomputed,
attestation valid) that ``ledger audit`` passes each disagree, with the differing fields;
erased inputs are not re-executable; hostile inputs are bounded by the sandbox."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ledger.facade import Ledger
from ledger.integrations.qwed import EvidenceRecorder, submission
from ledger.ops.custody import Ask
from ledger.ops.reverify import ReverifyOptions
from tests.integrations.conftest import ISSUER, JWKS, ledger_cli
from tests.keyrings import ledger_keyring

pytestmark = pytest.mark.slow  # real engines in worker processes: seconds per ledger


def _attested(dr: Any, engine: str, query: str) -> Any:
    from qwed_new.core.diagnostics import admission_decision
    from qwed_new.core.trust import attest_and_enforce

    return attest_and_enforce(dr, engine=engine, query=query, admission=admission_decision)


def _admission(dr: Any) -> str:
    from qwed_new.core.diagnostics import admission_decision

    return str(admission_decision(dr).value)


def forgeries(recorder: EvidenceRecorder) -> list[dict[str, Any]]:
    """Three wrong claims made self-consistent: each proof_ref is the hash of the stored
    preimage, each attestation is signed by the trusted issuer over it and the query."""
    from qwed_new.core.diagnostics import DiagnosticResult
    from qwed_new.core.sql_verifier import SQLVerifier

    out = []
    # a false identity claimed true, its evidence recomputed for "difference 0"
    q = "(x + 1)**2 = x**2 + 1"
    fields = {"left_side": "(x + 1)**2", "right_side": "x**2 + 1",
              "simplified_difference": "0"}
    dr = _attested(DiagnosticResult.verified("Identity is true", {"is_valid": True,
                                             "result": True, **fields}, evidence=fields),
                   "math", q)
    out.append(submission(dr, engine="math", query=q, evidence=fields, admission=_admission(dr)))
    # an unsatisfiable set of constraints flipped to SAT, the proof string recomputed
    dev = {"symbol_table": [{"name": "x", "type": "Int"}], "constraints": ["x > 2", "x < 1"],
           "model": {"x": "3"}, "deterministic_verdict": "SAT"}
    pre = str(["x > 2", "x < 1"])
    dr = _attested(DiagnosticResult.verified("Logic constraints are satisfiable — model "
                                             "found", dev, {}, proof_data=pre),
                   "logic", "x > 2, x < 1")
    out.append(submission(dr, engine="logic", query="x > 2, x < 1", proof_preimage=pre,
                          admission=_admission(dr)))
    # the verdict of a harmless query, attested and stored for a destructive one
    with recorder:
        safe = SQLVerifier().verify_sql("SELECT name FROM users WHERE id = 1",
                                        "CREATE TABLE users (id INT, name TEXT)")
    dr = _attested(safe, "sql", "DROP TABLE users")
    out.append(submission(dr, engine="sql", query="DROP TABLE users", recorder=recorder,
                          admission=_admission(dr)))
    return out


@pytest.fixture
def ledger_with_results(db_url: str) -> tuple[str, list[int], list[int]]:
    from tests.integrations.qwed_engines import install_issuer, produce

    install_issuer()
    recorder = EvidenceRecorder()
    with recorder:
        produced = produce(5)
    subs = [submission(p.result, engine=p.engine, query=p.query, admission=p.admission,
                       recorder=recorder) for p in produced]
    forged = forgeries(recorder)
    with Ledger.init(db_url) as ledger:
        ledger.trust_issuer(ISSUER, json.loads(JWKS.read_text()))
        res = ledger.append_many(subs + forged, producer="gateway")
    assert all(r.ok for r in res), [r.error for r in res if not r.ok]
    seqs = [int(r.seq) for r in res]  # type: ignore[arg-type]
    return db_url, seqs[:len(subs)], seqs[len(subs):]


def _by_seq(report: dict[str, Any]) -> dict[int, dict[str, Any]]:
    return {o["seq"]: o for o in report["outcomes"]}


def test_real_results_agree_and_self_consistent_forgeries_disagree(
        ledger_with_results: tuple[str, list[int], list[int]]) -> None:
    url, real, forged = ledger_with_results
    with Ledger.open(url) as ledger:
        audit = ledger.audit()
        report = ledger.reverify(ReverifyOptions(workers=2))
    # the audit cannot tell: every hash and every attestation checks
    assert audit.outcome == "passed" and audit.findings == ()
    out = _by_seq(report)
    for seq in real:
        o = out[seq]
        want = "not_reexecutable" if o["engine"] == "fact" else "agrees"
        assert o["outcome"] == want, o
        assert o["reexecutor"] == {"name": "qwed", "engine": o["engine"],
                                   "version": "qwed 8.0.0"}
    assert out[real[6]]["reason"] == "inputs_not_stored"  # fact: the context is not stored
    math, logic, sql = (out[s] for s in forged)
    diff = {d["field"]: d for d in math["differences"]}
    assert math["outcome"] == "disagrees"
    assert diff["developer_fields.is_valid"]["fresh"] is False
    assert diff["developer_fields.simplified_difference"] == {
        "field": "developer_fields.simplified_difference", "stored": "0", "fresh": "2*x"}
    assert "proof_ref" in diff and diff["evidence.verdict"]["fresh"] == "disproven"
    diff = {d["field"]: d for d in logic["differences"]}
    assert diff["status"] == {"field": "status", "stored": "VERIFIED", "fresh": "UNVERIFIABLE"}
    assert diff["developer_fields.deterministic_verdict"]["fresh"] == "UNSAT"
    assert diff["proof_ref"]["fresh"] is None
    diff = {d["field"]: d for d in sql["differences"]}
    assert diff["developer_fields.is_valid"] == {"field": "developer_fields.is_valid",
                                                 "stored": True, "fresh": False}
    assert diff["developer_fields.constraint_id"]["fresh"] == "sql_verifier.malicious"
    assert diff["evidence.query"] == {"field": "evidence.query", "stored":
                                      "SELECT name FROM users WHERE id = 1",
                                      "fresh": "DROP TABLE users"}
    assert report["summary"]["disagrees"] == 3 and report["outcome"] == "disagrees"
    # the command: exit 1 on a disagreement, and the filters
    code, _, err = ledger_cli(url, "reverify", "--seq", str(forged[0]))
    assert code == 1 and f"seq {forged[0]}: math disagrees" in err
    code, _, err = ledger_cli(url, "reverify", "--engine", "sql", "--to", str(forged[0]))
    assert code == 0, err  # the real sql results only
    code, _, err = ledger_cli(url, "reverify", "--engine", "fact")
    assert code == 3 and "1 not re-executable" in err


def test_erased_inputs_are_not_reexecutable_redacted(
        ledger_with_results: tuple[str, list[int], list[int]], tmp_path: Path) -> None:
    url, real, _ = ledger_with_results
    sql_seq, schema_seq = real[3], real[5]
    with Ledger.open(url) as ledger:
        ledger.redact(Ask("erasure request", "DSR-9"),
                      keyring=ledger_keyring(ledger, tmp_path / "keys"), seqs=[sql_seq, schema_seq],
                      payloads=["query", "evidence"])
        report = ledger.reverify(ReverifyOptions(seqs=(sql_seq, schema_seq)))
    out = _by_seq(report)
    for seq in (sql_seq, schema_seq):
        assert out[seq]["outcome"] == "not_reexecutable"
        assert out[seq]["reason"] == "redacted", out[seq]
    assert report["outcome"] == "not_reexecutable"


def test_hostile_inputs_are_bounded_by_time_and_memory(db_url: str) -> None:
    """Two unattested BLOCKED math results whose stored expressions are hostile: one whose
    simplification runs for minutes, one that allocates gigabytes; each ends as an engine
    error at its limit and the entries after them are still re-verified."""
    subs = [{"result": {"status": "BLOCKED", "agent_message": "x",
                        "developer_fields": {}, "proof_ref": None},
             "engine": "math", "query": q}
            for q in ("(x+y+z+w)**30 = 0", "expand((x+y+z)**9000) = 0",
                      "(x + 1)**2 = x**2 + 2*x + 1")]
    with Ledger.init(db_url) as ledger:
        assert all(r.ok for r in ledger.append_many(subs))
        forever = ledger.reverify(ReverifyOptions(seqs=(0, 2), time_limit_s=2.0,
                                                  memory_mb=2048))
        huge = ledger.reverify(ReverifyOptions(seqs=(1,), time_limit_s=30.0, memory_mb=220))
    f = _by_seq(forever)
    assert f[0]["outcome"] == "engine_error" and f[0]["reason"] == "time_limit"
    assert 2.0 <= f[0]["seconds"] < 5.0
    assert f[2]["outcome"] == "disagrees"  # re-executed: VERIFIED, not the stored BLOCKED
    assert forever["worker_restarts"] == 1
    h = _by_seq(huge)[1]
    assert h["outcome"] == "engine_error" and h["reason"] == "memory_limit", h
    assert h["seconds"] < 30.0
