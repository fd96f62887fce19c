"""A ``ledger reverify`` process killed with SIGKILL in the middle of its run, then resumed
with ``--resume``: the resumed run is the killed run continued from its checkpoint, and
its report is a fresh run's (SQLite and PostgreSQL)."""

from __future__ import annotations

import json
import signal
from typing import Any

import pytest
from click.testing import CliRunner
from sqlalchemy import text

from ledger import Ledger
from ledger.cli.main import cli
from ledger.store.db import make_engine
from tests.system.killing import kill_after_progress

ENTRIES = 4_000  # 8 pages


def _sub(i: int) -> dict[str, Any]:
    """Every 40th a math result the installed QWED re-executor runs in a worker (it
    disagrees: stored BLOCKED, fresh VERIFIED), the others of an engine no re-executor
    handles."""
    return {"result": {"status": "BLOCKED", "agent_message": "no", "developer_fields": {},
                       "proof_ref": None}, "engine": "math" if i % 40 == 0 else "acme-math",
            "query": f"{i} + 1 = {i + 1}"}


def reverify_runs(url: str) -> list[Any]:
    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            return list(conn.execute(text(
                "SELECT id, next_seq, state, range_start, range_end, "
                "(SELECT count(*) FROM reverify_outcomes o WHERE o.run_id = r.id) AS saved "
                "FROM audit_runs r WHERE job = 'reverify' ORDER BY id")))
    finally:
        engine.dispose()


def _killed_after_first_page(url: str, *args: str) -> Any:
    """Run ``ledger reverify ARGS`` in a session of its own, SIGKILL its process group once
    the run has committed a page; returns the run row (asserting it is still running)."""
    status = kill_after_progress(url, ["reverify", *args], reverify_runs)
    assert status == -signal.SIGKILL, "the run finished before it could be killed"
    (run,) = reverify_runs(url)
    assert run.state == "running" and 0 < run.next_seq < ENTRIES
    assert run.saved == run.next_seq  # every seq before the checkpoint has its outcome
    return run


def _comparable(report: dict[str, Any]) -> dict[str, Any]:
    """What a resumed run must share with a fresh one (not its times or its run id)."""
    keep = ("range", "filters", "limits", "summary", "by_engine", "reexecutors", "outcome")
    out = {k: report[k] for k in keep}
    out["outcomes"] = [{k: v for k, v in o.items() if k not in ("seconds", "engine_seconds")}
                       for o in report["outcomes"]]
    return out


@pytest.mark.slow
@pytest.mark.parametrize("workers", ["1", "2"])
def test_sigkilled_reverify_resumes_to_a_fresh_runs_report(db_url: str, workers: str) -> None:
    with Ledger.init(db_url) as L:
        assert all(r.ok for r in L.append_many([_sub(i) for i in range(ENTRIES)]))
    run = _killed_after_first_page(db_url, "--workers", workers, "--time-limit", "30")

    res = CliRunner().invoke(cli, ["--db", db_url, "reverify", "--resume", "--workers",
                                   workers, "--time-limit", "30", "--json-report", "-"])
    assert res.exit_code == 1, res.output  # disagreements
    resumed = json.loads(res.stdout)
    assert resumed["run_id"] == run.id and resumed["resumed"] is True
    (done,) = reverify_runs(db_url)
    assert (done.state, done.next_seq, done.saved) == ("complete", ENTRIES, ENTRIES)

    res = CliRunner().invoke(cli, ["--db", db_url, "reverify", "--time-limit", "30",
                                   "--json-report", "-"])
    assert res.exit_code == 1, res.output
    fresh = json.loads(res.stdout)
    assert fresh["run_id"] != run.id and fresh["resumed"] is False
    assert _comparable(resumed) == _comparable(fresh)
    assert resumed["summary"] == {"entries": ENTRIES, "agrees": 0, "disagrees": ENTRIES // 40,
                                  "not_reexecutable": ENTRIES - ENTRIES // 40,
                                  "engine_error": 0}
    assert [o["seq"] for o in resumed["outcomes"]] == list(range(ENTRIES))
