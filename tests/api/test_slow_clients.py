"""Slow and many clients cannot take ``ledger serve`` down: a request head must be
complete within ``--head-timeout``, a body within ``--body-timeout`` of its head (408,
then the connection closes), and a process holds fewer connections than its open-files
limit allows, closing the longest idle one beyond, so health keeps answering.

Before: 1,124 idle connections with incomplete heads against a server limited to 1,024
descriptors made health fail 54 of 55 probes on both engines, and slow heads and bodies
stayed open indefinitely.  Here a real ``ledger serve`` runs with 256 descriptors (so its
connection cap is 256 less the reserve) and 1-second timeouts, against raw sockets.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from ledger.crypto.keys import Keyring
from ledger.crypto.tokens import ledger_signer
from ledger.ops.limits import RESERVED_FDS, descriptor_cap
from ledger.ops.tokens import mint_access_token
from tests.api.server import ROOT, prepare_ledger, start_server, stop_process
from tests.conftest import ENGINES, engine_url

NOFILE = 256
IDLE_CLIENTS = 300  # more than the server's descriptors
TIMEOUT_S = 1.0
SLOW_HEAD = b"GET /v1/health HTTP/1.1\r\nHost: x\r\n"  # never ends


@pytest.fixture(scope="module", params=ENGINES)
def served(request, tmp_path_factory) -> Iterator[tuple[str, int, str, str]]:
    """A dedicated server of each engine, shared by this module: (host, port, log path,
    a producer token)."""
    tmp_path = tmp_path_factory.mktemp(f"slow-{request.param}")
    url = engine_url(request.param, request, tmp_path)
    origin = f"test.example/slow-{request.param}"
    prepare_ledger(url, tmp_path / "keys", origin)
    log = tmp_path / "serve.log"
    proc, base = start_server(url, tmp_path / "keys", log, "--head-timeout", "1s",
                              "--body-timeout", "1s", "--access-log", nofile=NOFILE)
    host, port = base.removeprefix("http://").split(":")
    token = mint_access_token(ledger_signer(Keyring.load(tmp_path / "keys"), origin),
                              role="producer", subject="slow", ttl_s=3600, issuer=origin,
                              audience=origin, now_s=int(time.time()))
    try:
        yield host, int(port), str(log), token
    finally:
        stop_process(proc)


def _open(addr: tuple[str, int], data: bytes) -> socket.socket | None:
    try:
        s = socket.create_connection(addr, timeout=5)
        s.sendall(data)
        return s
    except OSError:
        return None


def _answer(s: socket.socket, within: float) -> bytes | None:
    """What the server sent before closing ``s`` (None: still open after ``within``)."""
    s.settimeout(within)
    got = b""
    try:
        while data := s.recv(65536):
            got += data
    except TimeoutError:
        return None
    except OSError:
        pass  # reset: closed
    return got


def _healthy(base: str) -> bool:
    try:
        return httpx.get(base + "/v1/health", timeout=3).status_code == 200
    except httpx.HTTPError:
        return False


@pytest.mark.slow
def test_idle_connections_beyond_the_descriptor_limit_leave_health_answering(served):
    host, port, log, _ = served
    base = f"http://{host}:{port}"
    idle = [s for s in (_open((host, port), SLOW_HEAD) for _ in range(IDLE_CLIENTS)) if s]
    try:
        assert len(idle) > NOFILE
        probes = [_healthy(base) for _ in range(10)]
        assert all(probes), f"health failed {probes.count(False)} of {len(probes)} probes"
        # every idle connection is closed by the server: evicted, or timed out with a 408
        deadline = time.monotonic() + TIMEOUT_S + 3
        answers = [_answer(s, max(0.01, deadline - time.monotonic())) for s in idle]
        assert None not in answers, f"{answers.count(None)} idle connections still open"
        timed_out = [a for a in answers if a]
        assert timed_out and all(a.startswith(b"HTTP/1.1 408 ") for a in timed_out)
    finally:
        for s in idle:
            s.close()
    assert _healthy(base)
    assert "Too many open files" not in Path(log).read_text("utf-8", "replace")


def test_a_head_trickling_in_is_cut_off_at_the_head_timeout(served):
    host, port = served[:2]
    s = _open((host, port), b"GET /v1/health HTTP/1.1\r\n")
    assert s is not None
    start = time.monotonic()
    try:
        for _ in range(4):  # a header byte every 0.4 s does not extend the deadline
            time.sleep(0.4)
            try:
                s.sendall(b"X")
            except OSError:
                break
        answer = _answer(s, 5)
    finally:
        s.close()
    assert answer is not None and answer.startswith(b"HTTP/1.1 408 "), answer
    assert b"application/problem+json" in answer and b'"head_timeout"' in answer
    assert time.monotonic() - start < TIMEOUT_S + 2


def test_a_body_that_never_ends_is_cut_off_at_the_body_timeout(served):
    host, port, log, token = served
    offset = Path(log).stat().st_size
    head = (b"POST /v1/entries HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Authorization: Bearer " + token.encode() + b"\r\n"
            b"Content-Length: 1000\r\n\r\n{\"result\":")
    s = _open((host, port), head)
    assert s is not None
    start = time.monotonic()
    try:
        answer = _answer(s, TIMEOUT_S + 4)
    finally:
        s.close()
    assert answer is not None, "the connection stayed open"
    assert answer.startswith(b"HTTP/1.1 408 ") and b'"body_timeout"' in answer, answer
    assert time.monotonic() - start < TIMEOUT_S + 2
    # the route reading the body then finds its client gone: one INFO line, no traceback
    text = _log_since(log, offset, "status=499")
    assert "client_disconnect" in text and "Traceback" not in text, text


def test_a_quick_keep_alive_client_is_not_cut_off(served):
    host, port = served[:2]
    with httpx.Client(base_url=f"http://{host}:{port}", timeout=5) as c:
        for _ in range(3):
            assert c.get("/v1/health").status_code == 200
            time.sleep(0.6)  # under the head timeout between requests


@pytest.mark.parametrize("args, says", [
    (["--max-connections", "100000000"], "open-files limit"),
    (["--head-timeout", "0s"], "head-timeout"),
    (["--body-timeout", "soon"], "body-timeout"),
])
def test_bad_connection_bounds_are_usage_errors(tmp_path, args, says):
    url = f"sqlite:///{tmp_path / 'l.db'}"
    prepare_ledger(url, tmp_path / "keys", "test.example/bounds")
    run = subprocess.run([sys.executable, "-m", "ledger", "--db", url, "serve", "--keys",
                          str(tmp_path / "keys"), "--port", "0", *args], cwd=ROOT,
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 2, run.stderr
    assert says in run.stderr


def test_the_connection_cap_stays_below_the_descriptor_limit():
    assert descriptor_cap(1024) == 1024 - RESERVED_FDS
    assert descriptor_cap(NOFILE) < NOFILE and descriptor_cap(10) >= 16


def _log_since(log: str, offset: int, until: str, within: float = 5.0) -> str:
    """The server log written after ``offset``, once it holds ``until`` (or ``within``)."""
    deadline = time.monotonic() + within
    while True:
        text = Path(log).read_bytes()[offset:].decode("utf-8", "replace")
        if until in text or time.monotonic() > deadline:
            return text
        time.sleep(0.05)


@pytest.mark.parametrize("route", ["/v1/entries", "/v1/entries/batch"])
def test_a_client_gone_mid_body_is_logged_at_info_without_a_traceback(served, route):
    """Before: every such request wrote two ERROR lines with a traceback each (the
    ledger's "unhandled error" and uvicorn's "Exception in ASGI application"), so a
    producer hanging up mid-body could flood the error log."""
    host, port, log, token = served
    offset = Path(log).stat().st_size
    s = _open((host, port), b"POST " + route.encode() + b" HTTP/1.1\r\nHost: x\r\n"
              b"Content-Type: application/json\r\nAuthorization: Bearer " + token.encode()
              + b"\r\nContent-Length: 1000\r\n\r\n" + b'{"result": {"status": "VER')
    assert s is not None
    time.sleep(0.2)  # the route is reading the body
    s.close()
    text = _log_since(log, offset, "status=499")
    assert "Traceback" not in text and " error " not in text, text
    (line,) = [ln for ln in text.splitlines() if "client_disconnect" in ln]
    assert line.split()[1:3] == ["info", "client_disconnect"], line
    assert f"route={route}" in line and "producer=slow" in line
    (access,) = [ln for ln in text.splitlines() if ln.split()[2:3] == ["request"]]
    assert f"route={route} status=499" in access, access  # nothing sent; not a 5xx
    assert _healthy(f"http://{host}:{port}")
