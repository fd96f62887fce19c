"""The request head (request line + headers) is capped at 32 KiB by ``ledger serve``: a
larger head is answered 431 at once and not read further, so the server's memory stays
bounded (before: a 256 MiB header was read in full and answered 200).

A real ``ledger serve`` process and raw sockets: the hostile client streams 64 MiB of head
while a reader collects the answer.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from ledger.api.limits import MAX_HEAD_BYTES
from tests.api.server import prepare_ledger, start_server, stop_process

HOSTILE_BYTES = 64 * 1024 * 1024
ANSWER_WITHIN_S = 10.0
RSS_GROWTH_MAX = 32 * 1024 * 1024


@pytest.fixture(scope="module")
def served(tmp_path_factory) -> Iterator[tuple[str, int, int]]:
    """A dedicated server (its memory is measured): (host, port, pid)."""
    tmp: Path = tmp_path_factory.mktemp("heads")
    url = f"sqlite:///{tmp / 'ledger.db'}"
    prepare_ledger(url, tmp / "keys", "test.example/heads")
    proc, base = start_server(url, tmp / "keys", tmp / "serve.log")
    host, port = base.removeprefix("http://").split(":")
    try:
        yield host, int(port), proc.pid
    finally:
        stop_process(proc)


def rss(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def exchange(addr: tuple[str, int], chunks: Iterator[bytes], timeout: float = 30.0
             ) -> tuple[bytes, float]:
    """Send ``chunks`` while reading the answer until the server closes (no half-close: the
    server would take it for the end of the connection); (answer, seconds from the first
    byte sent to the end of the answer)."""
    sock = socket.create_connection(addr, timeout=timeout)
    answer = bytearray()
    done = threading.Event()

    def read() -> None:
        try:
            while data := sock.recv(65536):
                answer.extend(data)
        except OSError:
            pass  # reset after the answer: the server stopped reading our head
        done.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    start = time.monotonic()
    try:
        for chunk in chunks:
            sock.sendall(chunk)
            if done.is_set():
                break
    except OSError:
        pass  # the server closed the connection while we were still sending
    reader.join(timeout)
    elapsed = time.monotonic() - start
    sock.close()
    return bytes(answer), elapsed


def stream(head: bytes, filler: bytes, total: int) -> Iterator[bytes]:
    yield head
    sent = len(head)
    block = filler * (65536 // len(filler))
    while sent < total:
        yield block
        sent += len(block)


HOSTILE = {
    "one_huge_header": (b"GET /v1/health HTTP/1.1\r\nHost: x\r\nX-Big: ", b"a"),
    "huge_request_line": (b"GET /v1/health?q=", b"a"),
    "many_small_headers": (b"GET /v1/health HTTP/1.1\r\nHost: x\r\n", b"X-A: b\r\n"),
}


@pytest.mark.parametrize("name", list(HOSTILE))
def test_a_huge_head_is_answered_431_at_once_with_bounded_memory(served, name):
    host, port, pid = served
    head, filler = HOSTILE[name]
    before = rss(pid)
    answer, elapsed = exchange((host, port), stream(head, filler, HOSTILE_BYTES))
    growth = rss(pid) - before
    status, _, rest = answer.partition(b"\r\n")
    assert status == b"HTTP/1.1 431 Request Header Fields Too Large", answer[:200]
    head, _, data = rest.partition(b"\r\n\r\n")
    assert b"content-type: application/problem+json\r\n" in head.lower() + b"\r\n"
    body = json.loads(data)
    assert (body["status"], body["code"], body["title"]) == (
        431, "header_too_large", "Request Header Fields Too Large")
    assert body["type"] == "urn:ledger:problem:header_too_large" and body["detail"]
    assert body["error"]["code"] == "header_too_large"
    assert b"connection: close" in rest.lower()
    assert elapsed < ANSWER_WITHIN_S
    assert growth < RSS_GROWTH_MAX, f"server RSS grew by {growth} bytes"


def get(host: str, headers: bytes = b"") -> bytes:
    return b"GET /v1/health HTTP/1.1\r\nHost: " + host.encode() + b"\r\n" + headers + b"\r\n"


def test_a_head_just_under_the_cap_is_served(served):
    host, port, _ = served
    request = get(host, b"Connection: close\r\n")
    pad = MAX_HEAD_BYTES - len(request) - len(b"X-Pad: \r\n")
    request = get(host, b"Connection: close\r\nX-Pad: " + b"p" * pad + b"\r\n")
    assert len(request) == MAX_HEAD_BYTES
    answer, _ = exchange((host, port), iter([request]))
    assert answer.startswith(b"HTTP/1.1 200 "), answer[:200]
    over = request.replace(b"X-Pad: ", b"X-Pad: p")
    answer, _ = exchange((host, port), iter([over]))
    assert answer.startswith(b"HTTP/1.1 431 "), answer[:200]


def test_a_large_body_after_a_small_head_is_not_counted_as_head(served):
    """Head and a 256 KiB body in one send: the body is the route's business (401: no
    token), never a 431."""
    host, port = served[:2]
    body = b"[" + b" " * (256 * 1024) + b"]"
    request = (b"POST /v1/entries/batch HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
               b"Content-Type: application/json\r\nContent-Length: "
               + str(len(body)).encode() + b"\r\n\r\n" + body)
    answer, _ = exchange((host, port), iter([request]))
    assert answer.startswith(b"HTTP/1.1 401 "), answer[:200]


def test_pipelined_requests_each_under_the_cap_are_all_served(served):
    """Two requests of 20 KiB heads in one send: 40 KiB together, each under the cap."""
    host, port = served[:2]
    one = get(host, b"X-Pad: " + b"p" * (20 * 1024) + b"\r\n")
    last = get(host, b"Connection: close\r\nX-Pad: " + b"p" * (20 * 1024) + b"\r\n")
    answer, _ = exchange((host, port), iter([one + last]))
    assert answer.count(b"HTTP/1.1 200 ") == 2, answer[:400]


def test_serve_runs_the_head_limited_protocol():
    from uvicorn.importer import import_from_string

    from ledger.api.limits import GuardedHttpToolsProtocol
    from ledger.cli.serve import HEAD_PROTOCOL

    assert import_from_string(HEAD_PROTOCOL) is GuardedHttpToolsProtocol
