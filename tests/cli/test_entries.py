"""``ledger append`` through Click's CliRunner: the items of a JSON array file are judged
one by one, with the same strict reading as a single submission."""

from __future__ import annotations

import json

from click.testing import CliRunner

from ledger import Ledger
from ledger.cli.main import cli
from ledger.demo.samples import realistic


def test_json_array_items_keep_duplicate_key_detection(sqlite_url, tmp_path):
    Ledger.init(sqlite_url).close()
    good = json.dumps(realistic(1)[0])
    dup = ('{"engine":"math","result":{"status":"BLOCKED","agent_message":"a",'
           '"agent_message":"b"}}')
    path = tmp_path / "batch.json"
    path.write_text(f"[ {good} ,\n {dup} ]")
    res = CliRunner().invoke(cli, ["--db", sqlite_url, "append", str(path)])
    lines = [json.loads(x) for x in res.stdout.splitlines()]
    assert res.exit_code == 2
    assert lines[0]["ok"] is True
    assert lines[1]["error"]["code"] == "duplicate_key"


def _blocked_line(i: int) -> str:
    return json.dumps({"engine": "math", "subject": f"s{i}",
                       "result": {"status": "BLOCKED", "agent_message": f"b{i}"}})


def test_append_reads_stdin_and_flushes_every_thousand_items(sqlite_url):
    Ledger.init(sqlite_url).close()
    lines = "\n".join(_blocked_line(i) for i in range(1000)) + "\n"
    res = CliRunner().invoke(cli, ["--db", sqlite_url, "append", "-"], input=lines)
    assert res.exit_code == 0, res.output
    out = [json.loads(x) for x in res.stdout.splitlines()]
    assert [r["seq"] for r in out] == list(range(1000)) and all(r["ok"] for r in out)
    res = CliRunner().invoke(cli, ["--db", sqlite_url, "append"], input=_blocked_line(1000))
    assert res.exit_code == 0 and json.loads(res.stdout)["seq"] == 1000  # no FILES: stdin


def test_append_of_a_missing_file_exits_2_before_opening_the_ledger(sqlite_url, tmp_path):
    res = CliRunner().invoke(cli, ["--db", sqlite_url, "append", str(tmp_path / "none.json")])
    assert res.exit_code == 2 and "cannot read" in res.stderr


def test_show_and_head_print_tables_and_json(sqlite_url):
    with Ledger.init(sqlite_url) as L:
        L.append(realistic(1)[0])
        head = L.head()
    res = CliRunner().invoke(cli, ["--db", sqlite_url, "show", "0"])
    assert res.exit_code == 0, res.output
    table = dict(line.split(None, 1) for line in res.stdout.splitlines())
    assert table["seq"] == "0" and table["entry_hash"] == head["head_hash"]
    assert table["agent_message"] == realistic(1)[0]["result"]["agent_message"]
    res = CliRunner().invoke(cli, ["--db", sqlite_url, "show", "0", "--format", "json"])
    assert json.loads(res.stdout)["entry_hash"] == head["head_hash"]
    res = CliRunner().invoke(cli, ["--db", sqlite_url, "head", "--format", "json"])
    assert res.exit_code == 0 and json.loads(res.stdout) == head
