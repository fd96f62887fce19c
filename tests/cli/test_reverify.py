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
