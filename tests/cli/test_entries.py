"""``ledger append`` through Click's CliRunner: the items of a JSON array file are judged
one by one, with the same strict reading as a single submission."""

from __future__ import annotations

import json

from click.testing import CliRunner

from ledger import Ledger
from ledger.cli.main import cli
from ledger.ops.samples import realistic


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
