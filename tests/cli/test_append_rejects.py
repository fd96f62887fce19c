"""``ledger append`` on SQLite and PostgreSQL: a rejection naming an unstorable key is
printed and quarantined between its stored neighbours; when the store fails after a batch
committed, the committed entries' lines are already out, the error is one line (no
traceback) and the exit status is the documented 4.  ``ledger quarantine status|prune``."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from sqlalchemy import text

from ledger.cli.main import cli
from ledger.facade import Ledger
from tests.api.test_store_faults import _allow_connections
from tests.store.pgadmin import own_database, terminate_backends

ROOT = Path(__file__).resolve().parents[2]


def ok(i: int) -> str:
    return json.dumps({"engine": "logic", "subject": f"s-{i}",
                       "result": {"status": "BLOCKED", "agent_message": f"m {i}"}})


@pytest.mark.parametrize("key", ["a\x00b", "k" * 300], ids=["nul", "long"])
def test_a_rejection_naming_an_unstorable_key_between_stored_entries(db_url, tmp_path, key):
    Ledger.init(db_url).close()
    bad = json.dumps({"engine": "logic", key: 1,
                      "result": {"status": "BLOCKED", "agent_message": "m"}})
    src = tmp_path / "in.jsonl"
    src.write_text("\n".join([ok(0), bad, ok(1)]) + "\n")
    r = CliRunner().invoke(cli, ["--db", db_url, "append", str(src)])
    assert r.exit_code == 2 and r.exception is None or isinstance(r.exception, SystemExit)
    lines = [json.loads(x) for x in r.stdout.splitlines()]
    assert [x["ok"] for x in lines] == [True, False, True]
    assert [x.get("seq") for x in lines] == [0, None, 1]
    assert lines[1]["error"]["code"] == "unknown_field"
    with Ledger.open(db_url) as L, L.engine.connect() as conn:
        (field,) = conn.execute(text("SELECT field FROM quarantine")).scalars().all()
    assert len(field) <= 256 and "\x00" not in field


def test_a_store_fault_after_a_commit_keeps_the_committed_lines(tmp_path):
    with own_database() as url:
        Ledger.init(url).close()
        proc = subprocess.Popen([sys.executable, "-m", "ledger", "--db", url, "append", "-"],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, cwd=ROOT)
        try:
            assert proc.stdin and proc.stdout
            proc.stdin.write(("\n".join(ok(i) for i in range(1000)) + "\n").encode())
            proc.stdin.flush()
            first = [json.loads(proc.stdout.readline()) for _ in range(1000)]
            assert [x["seq"] for x in first] == list(range(1000))
            _allow_connections(url, False)
            terminate_backends(url)
            time.sleep(0.2)
            proc.stdin.write(("\n".join(ok(i) for i in range(1000, 1010)) + "\n").encode())
            proc.stdin.close()
            rest, err = proc.stdout.read(), proc.stderr.read()  # type: ignore[union-attr]
            assert proc.wait(timeout=120) == 4, err
        finally:
            _allow_connections(url, True)
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            for pipe in (proc.stdin, proc.stdout, proc.stderr):
                if pipe is not None and not pipe.closed:
                    pipe.close()
        assert rest == b"" and b"Traceback" not in err
        assert err.decode().strip().startswith("error: store_unavailable")
        with Ledger.open(url) as L:
            assert L.head()["size"] == 1000


def test_quarantine_status_and_prune_commands(db_url, tmp_path):
    Ledger.init(db_url).close()
    src = tmp_path / "bad.jsonl"
    src.write_text('{"engine": "x"}\n{"engine": "y"}\n')
    run = CliRunner().invoke
    assert run(cli, ["--db", db_url, "append", "--producer", "p", str(src)]).exit_code == 2
    st = json.loads(run(cli, ["--db", db_url, "quarantine", "status", "--format", "json"]
                        ).stdout)
    assert (st["rows"], st["dropped"], st["producers"]["p"]["rows"]) == (2, 0, 2)
    assert "rows" in run(cli, ["--db", db_url, "quarantine", "status"]).stdout
    r = run(cli, ["--db", db_url, "quarantine", "prune", "--before", "2000-01-01"])
    assert r.exit_code == 0 and r.stdout.startswith("pruned 0 ")
    r = run(cli, ["--db", db_url, "quarantine", "prune", "--before", "2999-01-01T00:00:00Z",
                  "--producer", "p"])
    assert r.exit_code == 0 and r.stdout.startswith("pruned 2 "), r.output
    r = run(cli, ["--db", db_url, "quarantine", "prune", "--before", "yesterday"])
    assert r.exit_code == 2 and "bad_time" in r.output
