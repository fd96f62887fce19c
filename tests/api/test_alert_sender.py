"""The alert sender against a real webhook receiver process: signed bodies, retries with
backoff on 5xx and network errors, no retry on a refusal (4xx); and the settings of the
operations options refuse what cannot run."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from ledger.api.settings import Settings
from ledger.crypto.alert_sign import check_alert
from ledger.crypto.keys import public_jwk, raw_public
from ledger.crypto.tokens import JwtSigner
from ledger.errors import UsageError
from ledger.service.alerts import AlertSender, build_alert

ROOT = Path(__file__).resolve().parents[2]


def _receiver(tmp: Path, *args: str) -> tuple[subprocess.Popen[bytes], str, Path]:
    out = tmp / "got.jsonl"
    proc = subprocess.Popen([sys.executable, "-m", "tests.system.webhook_receiver", str(out),
                             *args], stdout=subprocess.PIPE, cwd=ROOT)
    assert proc.stdout is not None
    port = proc.stdout.readline().decode().split()[1]
    proc.stdout.close()
    return proc, f"http://127.0.0.1:{port}/hook", out


def _signer() -> tuple[JwtSigner, dict[str, Any]]:
    key = Ed25519PrivateKey.generate()
    jwk = public_jwk("test.example/alerts", raw_public(key), "2026-01-01T00:00:00Z")
    return JwtSigner(jwk["kid"], key, {"keys": [jwk]}), {"keys": [jwk]}


def _alert() -> dict[str, Any]:
    return build_alert("checkpoint_overdue", now_us=int(time.time() * 1e6),
                       origin="test.example/alerts", ledger_id="l-1",
                       head={"size": 1, "head_hash": "sha256:00"}, checkpoint=None,
                       detail={"uncovered_entries": 1})


def _lines(out: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in out.read_text().splitlines()] if out.exists() else []


def _send(url: str, signer: JwtSigner, retries: int) -> tuple[AlertSender, float]:
    sender = AlertSender([url], signer, retries=retries, backoff_s=0.05)
    sender.start()
    t0 = time.monotonic()
    sender.send(_alert())
    sender.stop(timeout_s=30)
    return sender, time.monotonic() - t0


@pytest.mark.parametrize("status, retries, attempts, delivered", [
    (500, 3, 3, 1),   # two 500s, then 204: delivered on the third attempt
    (503, 1, 2, 0),   # retries exhausted
    (429, 3, 3, 1),
    (400, 5, 1, 0),   # a refusal is final
])
def test_retries_follow_the_status(tmp_path: Path, status: int, retries: int, attempts: int,
                                   delivered: int) -> None:
    proc, url, out = _receiver(tmp_path, "--fail-first", "2", "--fail-status", str(status))
    try:
        signer, jwks = _signer()
        sender, _ = _send(url, signer, retries)
        got = _lines(out)
        assert len(got) == attempts
        assert sender.delivered == delivered
        ids = {json.loads(g["body"])["alert"]["id"] for g in got}
        assert len(ids) == 1  # the same alert every time: receivers de-duplicate by id
        for g in got:
            # the body as received, read strictly (docs/format-alert.md)
            alert = check_alert(g["body"].encode(), jwks)
            assert alert["kind"] == "checkpoint_overdue"
            assert g["headers"]["Content-Type"] == "application/json"
            assert g["headers"]["Ledger-Alert-Id"] == alert["id"]
    finally:
        proc.terminate()
        proc.wait(10)


def test_an_unreachable_webhook_is_retried_then_given_up(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed once the block ends: connections are refused
    signer, _ = _signer()
    sender, took = _send(f"http://127.0.0.1:{port}/hook", signer, 2)
    assert sender.delivered == 0 and took < 20


def _wait_for(out: Path, n: int, within_s: float) -> float | None:
    t0 = time.monotonic()
    while time.monotonic() - t0 < within_s:
        if len(_lines(out)) >= n:
            return time.monotonic() - t0
        time.sleep(0.02)
    return None


def test_a_slow_receiver_delays_neither_the_others_nor_its_own_deadline(tmp_path: Path) -> None:
    """A receiver that drips its answer a byte every 0.2 s, listed first: the second gets
    the alert at once (it used to wait 45 s: one delivery thread, a 5 s timeout per read
    and no overall deadline), and the slow one's attempt ends at its deadline."""
    (tmp_path / "slow").mkdir()
    (tmp_path / "fast").mkdir()
    slow, slow_url, _ = _receiver(tmp_path / "slow", "--drip-s", "30")
    fast, fast_url, fast_out = _receiver(tmp_path / "fast")
    try:
        signer, _ = _signer()
        sender = AlertSender([slow_url, fast_url], signer, retries=0, timeout_s=1.5)
        sender.start()
        t0 = time.monotonic()
        sender.send(_alert())
        took = _wait_for(fast_out, 1, within_s=10)
        assert took is not None and took < 1.0
        while sender.failed == 0 and time.monotonic() - t0 < 10:
            time.sleep(0.05)
        assert (sender.delivered, sender.failed) == (1, 1)
        assert time.monotonic() - t0 < 3.0  # the deadline, not the drip, ended it
        sender.stop(timeout_s=5)
    finally:
        for p in (slow, fast):
            p.terminate()
            p.wait(10)


def _peak_rss_kib() -> int:
    with open("/proc/self/status", encoding="ascii") as fh:
        return next(int(line.split()[1]) for line in fh if line.startswith("VmHWM:"))


def test_a_huge_answer_is_not_read(tmp_path: Path) -> None:
    """A receiver answering 200 with a 512 MiB body: the sender reads the status line
    (a few KiB at most) and hangs up; before, the whole body was read into memory."""
    proc, url, out = _receiver(tmp_path, "--answer-bytes", str(512 << 20))
    try:
        signer, _ = _signer()
        before = _peak_rss_kib()
        sender, took = _send(url, signer, 0)
        assert sender.delivered == 1 and took < 5
        deadline = time.monotonic() + 10
        sent = Path(str(out) + ".sent")
        while not sent.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert int(sent.read_text()) < 64 << 20  # what the kernel's buffers took, no more
        assert _peak_rss_kib() - before < 64 * 1024
    finally:
        proc.terminate()
        proc.wait(10)


@pytest.mark.parametrize("kw, field", [
    ({"log_format": "xml"}, "log_format"),
    ({"alert_webhooks": ["ftp://x"]}, "alert_webhook"),
    ({"audit_every": "often"}, "audit_every"),
    ({"store_down_after": "0s"}, "store_down_after"),
    ({"alert_retries": -1}, "alert_retries"),
])
def test_operations_settings_out_of_bounds_are_usage_errors(kw: dict[str, Any],
                                                            field: str) -> None:
    with pytest.raises(UsageError) as caught:
        Settings(db_url="sqlite:///x.db", **kw)
    assert caught.value.field == field


def test_operations_settings_travel_through_the_environment() -> None:
    s = Settings(db_url="sqlite:///x.db", alert_webhooks=("https://h.example/a",),
                 audit_every="1h", log_format="json")
    assert Settings.from_env({"LEDGER_SERVE_SETTINGS": s.to_env()}) == s
    assert s.seconds("audit_every") == 3600 and s.seconds("checkpoint_overdue") is None
