"""A real ``ledger serve`` on a fixed port that a test can kill and start again, so a
client keeps one URL across a restart (tests/client, tests/system)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

from ledger.crypto.keys import Keyring
from ledger.crypto.tokens import ledger_signer
from ledger.ops.tokens import mint_access_token
from tests.api.server import ROOT, prepare_ledger

START_TIMEOUT_S = 30


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class LedgerServer:
    """``ledger serve`` for ``db_url`` on 127.0.0.1:``port``; ``start``/``kill``/``stop``."""

    def __init__(self, db_url: str, tmp: Path, origin: str, *extra: str) -> None:
        self.db_url, self.tmp, self.origin, self.extra = db_url, tmp, origin, extra
        self.keys = tmp / "keys"
        prepare_ledger(db_url, self.keys, origin)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0

    def token(self, role: str = "producer", subject: str = "gateway-1",
              tenant: str | None = None) -> str:
        signer = ledger_signer(Keyring.load(self.keys), self.origin)
        return mint_access_token(signer, role=role, subject=subject, ttl_s=3600,
                                 issuer=self.origin, audience=self.origin,
                                 now_s=int(time.time()), tenant=tenant)

    def start(self) -> LedgerServer:
        self.starts += 1
        log = self.tmp / f"serve-{self.starts}.log"
        cmd = [sys.executable, "-m", "ledger", "--db", self.db_url, "serve", "--host",
               "127.0.0.1", "--port", str(self.port), "--keys", str(self.keys),
               "--no-access-log", "--log-level", "warning", *self.extra]
        with open(log, "wb") as out:
            self.proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, cwd=ROOT,
                                         env=dict(os.environ))
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            try:
                if httpx.get(self.url + "/v1/health", timeout=2).status_code == 200:
                    return self
            except httpx.TransportError:
                pass
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"ledger serve did not start:\n{log.read_text('utf-8', 'replace')}")

    def kill(self) -> None:
        """SIGKILL: the server dies mid-flight, as in a crash."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=10)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
