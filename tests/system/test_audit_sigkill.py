"""A ``ledger audit`` process killed with SIGKILL in the middle of its run, then resumed."""

from __future__ import annotations

import json
import signal
from typing import Any

import pytest
from click.testing import CliRunner
from sqlalchemy import text

from ledger import Ledger
from ledger.cli.main import cli
from ledger.ops.audit import AuditReport
from tests import tamper as T
from tests.ops.test_audit import audit, audit_runs, finding_set
from tests.system.killing import kill_after_progress


def _blocked(i: int) -> dict[str, Any]:
    return {"result": {"status": "BLOCKED", "agent_message": "blocked", "developer_fields": {},
                       "proof_ref": None, "is_authoritative": False},
            "engine": "math", "subject": f"s{i}"}


def _killed_after_first_save(url: str, *args: str) -> Any:
    """Run ``ledger audit ARGS`` in a session of its own and SIGKILL the whole process group
    (the audit and any worker processes) once the run has saved progress; returns the run
    row (asserting it is still ``running``)."""
    status = kill_after_progress(url, ["audit", *args], audit_runs)
    assert status == -signal.SIGKILL, "the audit finished before it could be killed"
    (run,) = audit_runs(url)
    assert run.state == "running" and 0 < run.next_seq < 60_000
    return run


def _resumed_and_fresh(url: str) -> tuple[AuditReport, AuditReport]:
    """The report of ``ledger audit --resume`` (which must exit 1: findings) and of a
    fresh audit of the same ledger."""
    res = CliRunner().invoke(cli, ["--db", url, "audit", "--resume", "--json-report", "-"])
    assert res.exit_code == 1, res.output
    with Ledger.open(url) as L:
        return AuditReport.from_json(json.loads(res.stdout)), audit(L)


@pytest.mark.slow
def test_sigkilled_cli_audit_resumes_to_the_same_report(sqlite_url):
    """``ledger audit`` on 60k rows is SIGKILLed after its first progress save; ``ledger
    audit --resume`` completes it with the summary and findings of a fresh run."""
    with Ledger.init(sqlite_url) as L:
        for i in range(0, 60_000, 5_000):
            L.append_many([_blocked(i + j) for j in range(5_000)])
    with T.unlocked(sqlite_url) as conn:
        T.update_entry(conn, 1_000, status="VERIFIED")
        T.update_entry(conn, 55_000, subject="rewritten")
    run = _killed_after_first_save(sqlite_url)

    resumed, fresh = _resumed_and_fresh(sqlite_url)
    assert resumed.run_id == run.id
    assert resumed.summary.to_json() == fresh.summary.to_json() == {
        "rows": 60_000, "verified": 59_998, "failed": 2, "unverified": 0}
    assert finding_set(resumed) == finding_set(fresh) == {("column_mismatch", 1_000),
                                                          ("column_mismatch", 55_000)}


@pytest.mark.slow
def test_sigkilled_parallel_cli_audit_resumes_to_the_same_report(sqlite_url):
    """``ledger audit --workers 2`` (the process and its workers) is SIGKILLed after its
    first progress save; ``ledger audit --resume`` finishes both parts with the summary and
    findings of a fresh run, as the same recorded run."""
    with Ledger.init(sqlite_url) as L:
        for i in range(0, 60_000, 5_000):
            L.append_many([_blocked(i + j) for j in range(5_000)])
    with T.unlocked(sqlite_url) as conn:
        T.update_entry(conn, 1_000, status="VERIFIED")
        T.update_entry(conn, 45_000, subject="rewritten")
        # deleted across the boundary of the two parts
        conn.execute(text("DELETE FROM entries WHERE seq >= 29990 AND seq < 30010"))
    run = _killed_after_first_save(sqlite_url, "--workers", "2")

    resumed, fresh = _resumed_and_fresh(sqlite_url)
    assert resumed.run_id == run.id and resumed.workers == 2
    assert resumed.summary.to_json() == fresh.summary.to_json() == {
        "rows": 59_980, "verified": 59_978, "failed": 2, "unverified": 0}
    assert resumed.findings == fresh.findings
    assert finding_set(fresh) == {("column_mismatch", 1_000), ("seq_gap", 29_990),
                                  ("column_mismatch", 45_000)}
