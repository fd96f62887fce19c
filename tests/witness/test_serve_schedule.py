"""``ledger serve --checkpoint-every`` with two real witnesses and a real TSA: scheduled
checkpoints are cosigned and time-stamped, and ``GET /v1/checkpoint`` serves them."""

from __future__ import annotations

import json
import time

import pytest

from ledger.core.cosignature import parse_vkey
from ledger.crypto.cosign import check_cosignatures
from ledger.errors import UsageError
from ledger.ops.anchor import timestamps_of
from ledger.ops.checkpoint import latest_checkpoint
from ledger.ops.schedule import Schedule, parse_every
from tests.api.server import Server, start_server, stop_process
from tests.api.test_append import valid


@pytest.mark.parametrize("text,want", [("30s", Schedule(seconds=30)), ("5m", Schedule(300)),
                                       ("1h", Schedule(3600)), ("1000e", Schedule(entries=1000)),
                                       ("7entries", Schedule(entries=7))])
def test_parse_every(text, want):
    assert parse_every(text) == want


@pytest.mark.parametrize("text", ["", "30", "0s", "-1s", "5x", "e"])
def test_parse_every_refuses(text):
    with pytest.raises(UsageError):
        parse_every(text)


def test_scheduled_checkpoints_are_cosigned_and_timestamped(db_url, ledger, keyring,
                                                            witnesses, tsa, tmp_path):
    anchors = tmp_path / "anchors.json"
    anchors.write_text(json.dumps({
        "witnesses": [{"url": w.url, "vkey": w.vkey} for w in witnesses],
        "tsa": {"url": tsa.url, "certs": str(tsa.ca_file)}, "timeout_s": 5}))
    log = tmp_path / "serve.log"
    proc, url = start_server(db_url, keyring.path, log, "--checkpoint-every", "3e",
                             "--anchors", str(anchors))
    try:
        srv = Server("x", db_url, keyring.path, ledger.meta.origin, proc, url, log)
        srv.tokens = {r: srv.token(r, f"t-{r}") for r in ("producer", "auditor")}
        with srv.client("producer") as c:
            for _ in range(4):
                assert c.post("/v1/entries", json=valid()).status_code == 201
        note = _wait_for_cosigned(srv, 2)
        assert check_cosignatures(note, [parse_vkey(w.vkey) for w in witnesses]).valid
    finally:
        stop_process(proc)
    row = latest_checkpoint(ledger.ctx)
    assert row is not None and row.size >= 3 and timestamps_of(ledger.ctx, row.size)


def _wait_for_cosigned(srv: Server, n: int) -> str:
    deadline = time.monotonic() + 30
    with srv.client("auditor") as c:
        while time.monotonic() < deadline:
            r = c.get("/v1/checkpoint")
            if r.status_code == 200 and r.text.count("witness.example/w") >= n:
                return r.text
            time.sleep(0.2)
    raise AssertionError(f"no cosigned checkpoint served: {srv.log.read_text()[-2000:]}")


def test_bad_schedule_is_a_usage_error(sqlite_url, keyring, tmp_path):
    from click.testing import CliRunner

    from ledger import Ledger
    from ledger.cli.main import cli

    Ledger.init(sqlite_url, origin="ledger.example/witnessed").close()
    res = CliRunner().invoke(cli, ["--db", sqlite_url, "serve", "--keys", str(keyring.path),
                                   "--checkpoint-every", "soon"])
    assert res.exit_code == 2 and "checkpoint-every" in res.output
