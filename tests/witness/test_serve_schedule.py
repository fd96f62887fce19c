"""``ledger serve --checkpoint-every`` with two real witnesses and a real TSA: scheduled
checkpoints are cosigned and time-stamped, and ``GET /v1/checkpoint`` serves them."""

from __future__ import annotations

import json
import time

import pytest

from ledger.core.cosignature import parse_vkey
from ledger.core.schedule import Schedule, parse_every
from ledger.crypto.cosign import check_cosignatures
from ledger.errors import UsageError
from ledger.ops.checkpoint import latest_checkpoint, timestamps_of
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


@pytest.mark.slow
def test_a_witness_that_stops_cosigning_is_alerted_and_counted(db_url, ledger, keyring,
                                                               witnesses, tmp_path):
    """Two real witnesses, one of them stopped: scheduled checkpoints are cosigned by the
    other only; the watchdog sends a signed ``witness_overdue`` alert naming the stopped
    witness (never the live one) to a real webhook receiver, and ``/metrics`` shows each
    witness's last cosigned size and the failures."""
    from ledger.crypto.alert_sign import check_alert
    from tests.system.test_operations import Receiver, _scrape, _value

    live, stopped = witnesses
    stopped.stop()
    anchors = tmp_path / "anchors.json"
    anchors.write_text(json.dumps({
        "witnesses": [{"url": w.url, "vkey": w.vkey} for w in witnesses], "timeout_s": 2}))
    receiver = Receiver(tmp_path)
    log = tmp_path / "serve.log"
    proc, url = start_server(db_url, keyring.path, log, "--checkpoint-every", "3e",
                             "--anchors", str(anchors), "--witness-overdue", "1s",
                             "--watch-poll", "200ms", "--alert-webhook", receiver.url,
                             "--alert-backoff", "100ms")
    try:
        srv = Server("x", db_url, keyring.path, ledger.meta.origin, proc, url, log)
        srv.tokens = {r: srv.token(r, f"t-{r}") for r in ("producer", "auditor", "operator")}
        with srv.client("producer") as c:
            for _ in range(4):
                assert c.post("/v1/entries", json=valid()).status_code == 201
        _wait_for_cosigned(srv, 1)
        got = receiver.wait_for("witness_overdue")
        jwks = json.loads((keyring.path / "jwks.json").read_text())
        alert = check_alert(got["envelope"], jwks)
        assert alert["detail"]["witness"] == stopped.name
        assert alert["detail"]["cosigned_size"] == 0 and alert["detail"]["checkpoint_size"] >= 3
        named = {json.loads(r["body"])["alert"]["detail"].get("witness")
                 for r in receiver.received()
                 if json.loads(r["body"])["alert"]["kind"] == "witness_overdue"}
        assert named == {stopped.name}  # the live witness cosigned: never alerted
        m = _scrape(srv)
        size = latest_checkpoint(ledger.ctx).size  # type: ignore[union-attr]
        assert _value(m, "ledger_witness_cosigned_size", f'{{witness="{live.name}"}}') >= 3
        assert _value(m, "ledger_witness_cosigned_size", f'{{witness="{live.name}"}}') <= size
        assert _value(m, "ledger_witness_failures_total", f'{{witness="{stopped.name}"}}') >= 1
    finally:
        stop_process(proc)
        stop_process(receiver.proc)  # type: ignore[arg-type]
        if receiver.proc.stdout is not None:
            receiver.proc.stdout.close()
