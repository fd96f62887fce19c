"""``ledger reverify`` without running an engine: usage errors, an engine no re-executor
handles, an entry whose inputs do not check against its hashes (SQLite and PostgreSQL)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from click.testing import CliRunner
from sqlalchemy import text

from ledger.cli.main import cli
from ledger.core.reexec import INPUTS_NOT_STORED, NotReexecutable
from ledger.facade import Ledger
from ledger.ops.reverify import ReverifyOptions
from tests.tamper import unlocked


def _run(url: str, *args: str) -> tuple[int, str]:
    r = CliRunner().invoke(cli, ["--db", url, "reverify", *args], catch_exceptions=False)
    return r.exit_code, r.stderr


def _sub(query: str) -> dict:
    return {"result": {"status": "BLOCKED", "agent_message": "no", "developer_fields": {},
                       "proof_ref": None}, "engine": "acme-math", "query": query}


def test_an_engine_no_reexecutor_handles_is_not_reexecutable(db_url: str,
                                                             tmp_path: Path) -> None:
    with Ledger.init(db_url) as ledger:
        assert all(r.ok for r in ledger.append_many([_sub("1 + 1"), _sub("2 + 2")]))
    out = tmp_path / "r.json"
    code, err = _run(db_url, "--json-report", str(out))
    assert code == 3, err
    report = json.loads(out.read_text())
    assert [(o["seq"], o["outcome"], o["reason"]) for o in report["outcomes"]] == [
        (0, "not_reexecutable", "no_reexecutor"), (1, "not_reexecutable", "no_reexecutor")]
    assert "2 not re-executable" in err
    code, err = _run(db_url, "--engine", "math")  # nothing selected
    assert code == 0 and "0 entries" in err


def test_an_input_that_does_not_check_is_never_reexecuted(db_url: str) -> None:
    with Ledger.init(db_url) as ledger:
        assert all(r.ok for r in ledger.append_many([_sub("1 + 1")]))
        with unlocked(db_url) as conn:  # the stored query rewritten behind the ledger's back
            conn.execute(text("UPDATE payloads SET data = :d, codec = 0 WHERE pid = 3"),
                         {"d": b"DROP TABLE users"})
        report = ledger.reverify()
    [o] = report["outcomes"]
    assert o["outcome"] == "not_reexecutable" and o["reason"] == "integrity"
    assert "payload_digest_mismatch" in o["detail"]


def test_bad_options_are_usage_errors(sqlite_url: str) -> None:
    Ledger.init(sqlite_url).close()
    code, err = _run(sqlite_url, "--since", "yesterday")
    assert code == 2 and "--since" in err and "RFC 3339" in err
    code, err = _run(sqlite_url, "--time-limit", "0")
    assert code == 2 and "--time-limit" in err
    code, err = _run(sqlite_url, "--from", "5", "--to", "1")
    assert code == 2 and "range" in err


class _Counting:
    """A re-executor (the documented protocol) that plans nothing and counts how often the
    job asks its version."""

    name = "acme"
    engines = ("acme-math",)

    def __init__(self) -> None:
        self.asked = 0

    def version(self, engine: str) -> str:
        self.asked += 1
        return "acme-engine 2.1.0"

    def plan(self, entry: Any) -> NotReexecutable:
        return NotReexecutable(INPUTS_NOT_STORED, "acme keeps no inputs")


def test_the_version_is_asked_once_per_run_and_engine_and_the_phases_are_timed(
        db_url: str) -> None:
    plugin = _Counting()
    with Ledger.init(db_url) as ledger:
        assert all(r.ok for r in ledger.append_many([_sub(f"{i} + 1") for i in range(4)]))
        report = ledger.reverify(ReverifyOptions(reexecutors={"acme": plugin}))
    assert [o["reexecutor"] for o in report["outcomes"]] == [
        {"name": "acme", "engine": "acme-math", "version": "acme-engine 2.1.0"}] * 4
    assert plugin.asked == 1  # reading package metadata per entry cost more than an engine
    assert report["reexecutors"] == [{"name": "acme", "version": "acme-engine 2.1.0"}]
    t = report["timing"]
    assert set(t) == {"select_s", "workers_start_s", "reexecute_s", "stop_s"}
    assert all(v >= 0 for v in t.values())
    assert t["workers_start_s"] == 0  # nothing to run: no worker was started


# -- recorded runs and --resume (docs/reverify.md#recorded-resumable-runs) ----------------


def _interrupt(url: str, run_id: int, next_seq: int = 0) -> None:
    """Make a run read as interrupted at ``next_seq`` (its later outcomes forgotten), as a
    killed process leaves it (tests/system/test_reverify_sigkill.py kills a real one)."""
    with unlocked(url) as conn:
        conn.execute(text("UPDATE audit_runs SET state = 'running', next_seq = :n "
                          "WHERE id = :r"), {"n": next_seq, "r": run_id})
        conn.execute(text("DELETE FROM reverify_outcomes WHERE run_id = :r AND seq >= :n"),
                     {"n": next_seq, "r": run_id})


def test_resume_refuses_changed_options_and_a_missing_run(db_url: str) -> None:
    with Ledger.init(db_url) as ledger:
        assert all(r.ok for r in ledger.append_many([_sub("1 + 1"), _sub("2 + 2")]))
    code, err = _run(db_url, "--resume")
    assert code == 2 and "--resume" in err and "no interrupted" in err
    code, _ = _run(db_url, "--engine", "acme-math", "--time-limit", "5")
    assert code == 3
    with Ledger.open(db_url) as ledger:
        run_id = ledger.reverify()["run_id"] - 1
    _interrupt(db_url, run_id, 1)
    for args, option in ((["--time-limit", "5"], "--engine"),
                         (["--engine", "acme-math"], "--time-limit"),
                         (["--engine", "acme-math", "--time-limit", "5", "--to", "1"], "--to")):
        code, err = _run(db_url, "--resume", *args)
        assert code == 2 and option in err and "differs" in err, (args, err)
    r = CliRunner().invoke(cli, ["--db", db_url, "reverify", "--resume", "--engine",
                                 "acme-math", "--time-limit", "5", "--json-report", "-"])
    assert r.exit_code == 3, r.stderr
    report = json.loads(r.stdout)
    assert report["run_id"] == run_id and report["resumed"] is True
    assert [o["seq"] for o in report["outcomes"]] == [0, 1]
    assert report["summary"]["not_reexecutable"] == 2


def test_audit_readers_ignore_reverify_runs(db_url: str) -> None:
    """``ledger audit --resume`` continues the interrupted audit, not a later interrupted
    re-verification run; the runs listing, the last-audit monitor and ``--since-last``
    see the audit only."""
    with Ledger.init(db_url) as ledger:
        assert all(r.ok for r in ledger.append_many([_sub(f"{i} + 1") for i in range(3)]))
    r = CliRunner().invoke(cli, ["--db", db_url, "audit", "--record", "--json-report", "-"])
    assert r.exit_code == 0, r.stderr
    audit_id = json.loads(r.stdout)["run_id"]
    with Ledger.open(db_url) as ledger:
        rv = ledger.reverify()
        assert rv["run_id"] > audit_id
        # a complete re-verification run after the audit: not taken for the latest audit
        assert [x["run_id"] for x in ledger.audit_runs()["runs"]] == [audit_id]
        assert ledger.monitor_status().last_audit.run_id == audit_id
        since = CliRunner().invoke(cli, ["--db", db_url, "audit", "--since-last",
                                         "--json-report", "-"])
        assert since.exit_code == 0, since.stderr
        assert json.loads(since.stdout)["range"]["start"] == 3  # the recorded audit's end
    _interrupt(db_url, audit_id)
    _interrupt(db_url, rv["run_id"])  # the latest running run is a re-verification run
    r = CliRunner().invoke(cli, ["--db", db_url, "audit", "--resume", "--json-report", "-"])
    assert r.exit_code == 0, r.stderr
    assert json.loads(r.stdout)["run_id"] == audit_id
