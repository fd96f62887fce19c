"""Real servers for the HTTP tests: ``ledger serve`` (uvicorn) in a subprocess on
127.0.0.1 with a port the OS picks, one per engine, shared by every test module
(started on first use, stopped at the end of the session); a real httpx client.

The test modules of tests/api/ and tests/system/ import :func:`server`, :func:`start_server`
and the ``api`` fixture from here.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from ledger.clock import SystemClock
from ledger.crypto.keys import Keyring
from ledger.crypto.tokens import ledger_signer
from ledger.facade import Ledger
from ledger.ops.tokens import ROLES, mint_access_token
from tests.conftest import ENGINES, engine_url

START_TIMEOUT_S = 30
ROOT = Path(__file__).resolve().parents[2]
_RUNNING = re.compile(r"Uvicorn running on http://127\.0\.0\.1:(\d+)")


@dataclass
class Server:
    """One running ``ledger serve`` process and what a test needs to talk to it."""

    kind: str
    db_url: str
    keys_dir: Path
    origin: str
    proc: subprocess.Popen[bytes]
    base_url: str
    log: Path
    tokens: dict[str, str] = field(default_factory=dict)

    def client(self, role: str | None = None, **kw: Any) -> httpx.Client:
        headers = {"Authorization": f"Bearer {self.tokens[role]}"} if role else {}
        return httpx.Client(base_url=self.base_url, headers=headers, timeout=30.0, **kw)

    def token(self, role: str, subject: str, ttl_s: int = 3600,
              tenant: str | None = None) -> str:
        signer = ledger_signer(Keyring.load(self.keys_dir), self.origin)
        return mint_access_token(signer, role=role, subject=subject, ttl_s=ttl_s,
                                 issuer=self.origin, audience=self.origin,
                                 now_s=int(time.time()), tenant=tenant)

    def scoped(self, role: str, tenant: str | None, subject: str | None = None,
               ) -> httpx.Client:
        """A client with a fresh ``role`` token of ``tenant`` (None: operator-level)."""
        token = self.token(role, subject or f"{role}-{tenant}", tenant=tenant)
        return httpx.Client(base_url=self.base_url, timeout=30.0,
                            headers={"Authorization": f"Bearer {token}"})

    def stop(self) -> None:
        stop_process(self.proc)


def stop_process(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


def prepare_ledger(db_url: str, keys_dir: Path, origin: str) -> None:
    Ledger.init(db_url, origin=origin).close()
    Keyring.load(keys_dir).generate(origin, SystemClock().now_us())


def start_server(db_url: str, keys_dir: Path, log: Path, *extra: str,
                 env: dict[str, str] | None = None, nofile: int | None = None
                 ) -> tuple[subprocess.Popen[bytes], str]:
    """Start ``ledger serve --port 0`` and return (process, base URL) once it is healthy
    (``nofile``: the server's open-files limit, soft and hard)."""
    cmd = [sys.executable, "-m", "ledger", "--db", db_url, "serve", "--host", "127.0.0.1",
           "--port", "0", "--keys", str(keys_dir), "--no-access-log", "--log-level",
           "info", *extra]
    out = open(log, "wb")  # noqa: SIM115 - the child writes to it until it stops
    def limit() -> None:
        import resource
        resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))

    proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, cwd=ROOT,
                            env={**os.environ, **(env or {})},
                            preexec_fn=limit if nofile else None)
    out.close()
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        m = _RUNNING.search(log.read_text("utf-8", "replace"))
        if m:
            url = f"http://127.0.0.1:{m.group(1)}"
            if httpx.get(url + "/v1/health", timeout=5).status_code == 200:
                return proc, url
        if proc.poll() is not None:
            break
        time.sleep(0.05)
    stop_process(proc)
    raise RuntimeError(f"ledger serve did not start:\n{log.read_text('utf-8', 'replace')}")


_SERVERS: dict[str, Server] = {}


def server(kind: str, request: pytest.FixtureRequest) -> Server:
    """The shared server for ``kind`` (started on first use; stopped at session end)."""
    if kind in _SERVERS and _SERVERS[kind].proc.poll() is None:
        return _SERVERS[kind]
    tmp = request.getfixturevalue("tmp_path_factory").mktemp(f"api-{kind}")
    db_url = engine_url(kind, request, tmp)
    origin = f"test.example/ledger-{kind}"
    keys = tmp / "keys"
    prepare_ledger(db_url, keys, origin)
    log = tmp / "serve.log"
    # proofs of the shared servers' tests sign when asked (the bound itself is pinned by
    # tests/api/test_proofs.py on a server of its own)
    proc, url = start_server(db_url, keys, log, "--checkpoint-on-demand-interval", "1s")
    srv = Server(kind, db_url, keys, origin, proc, url, log)
    srv.tokens = {role: srv.token(role, f"test-{role}") for role in ROLES}
    _SERVERS[kind] = srv
    request.config.add_cleanup(srv.stop)
    return srv


@pytest.fixture(params=ENGINES)
def api(request: pytest.FixtureRequest) -> Server:
    """The running server of each engine."""
    return server(request.param, request)
