"""Anchors: checkpoint latency plain vs with 2 witnesses vs with 2 witnesses + a TSA, and
witness cosignatures per second, all on loopback in one run.

The witnesses are two real ``ledger witness serve`` processes (uvicorn, their own SQLite
state, synchronous=FULL); the TSA is OpenSSL's ``openssl ts -reply`` behind a small HTTP
handler (one ``openssl`` process per token, which dominates its cost).  Each round
appends 20 entries and then makes one checkpoint of each kind in turn (so load from other
processes hits every kind alike); the table gives the median and the 90th percentile.
Cosignatures per second: one client re-submitting the latest checkpoint (same size,
old = size: verified, persisted and cosigned each time) over a keep-alive connection.
"""

from __future__ import annotations

import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from bench.common import available, pg_url, print_table, sqlite_url
from ledger import Ledger
from ledger.core.cosignature import format_add_checkpoint
from ledger.crypto.cosign import generate_cosigner, load_vkeys
from ledger.crypto.keys import Keyring
from ledger.crypto.timestamp import load_tsa_trust
from ledger.demo.samples import realistic
from ledger.ops.checkpoint import (
    AnchorConfig,
    WitnessEndpoint,
    make_anchored_checkpoint,
    make_checkpoint,
)
from ledger.witness.local_tsa import LocalTsa

ORIGIN = "bench.example/anchors"
ROUNDS = 15
COSIGN_REQUESTS = 300


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _witness(folder: Path, name: str, jwks: Path) -> tuple[subprocess.Popen[bytes], str, Path]:
    generate_cosigner(folder, name)
    (folder / "w.json").write_text(json.dumps({
        "name": name, "key": "witness.pem", "state": "state.db",
        "logs": [{"origin": ORIGIN, "key_files": [str(jwks)]}]}))
    port = _port()
    proc = subprocess.Popen([sys.executable, "-m", "ledger", "witness", "serve", "--config",
                             str(folder / "w.json"), "--port", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env=dict(os.environ))
    url = f"http://127.0.0.1:{port}"
    for _ in range(300):
        try:
            httpx.get(url + "/vkey", timeout=1)
            return proc, url, folder / "witness.vkey"
        except httpx.TransportError:
            time.sleep(0.1)
    raise RuntimeError("witness did not start")


def _ms(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return (time.perf_counter() - t0) * 1000


def _p90(xs: list[float]) -> float:
    return sorted(xs)[int(0.9 * (len(xs) - 1))]


def _one_backend(url: str, tmp: Path, tsa: LocalTsa) -> tuple[list[list[object]], float]:
    ring = Keyring.load(tmp / "keys")
    ring.generate(ORIGIN, 1)
    procs = []
    try:
        ws = [_witness(tmp / f"w{i}", f"bench.example/w{i}", ring.path / "jwks.json")
              for i in (1, 2)]
        procs = [p for p, _, _ in ws]
        endpoints = tuple(WitnessEndpoint(load_vkeys(v)[0], u) for _, u, v in ws)
        two = AnchorConfig(endpoints)
        full = AnchorConfig(endpoints, tsa.url, load_tsa_trust(tsa.ca_file))
        times: dict[str, list[float]] = {"plain": [], "2 witnesses": [],
                                         "2 witnesses + TSA": []}
        with Ledger.init(url, origin=ORIGIN) as ledger:
            for r in range(ROUNDS):
                for n, (kind, samples) in enumerate(times.items()):
                    ledger.append_many(realistic(20, start=100 * (3 * r + n)))
                    if kind == "plain":
                        samples.append(_ms(lambda: make_checkpoint(ledger.ctx, ring)))
                    else:
                        cfg = two if kind == "2 witnesses" else full
                        samples.append(_ms(
                            lambda cfg=cfg: _check(make_anchored_checkpoint(ledger.ctx, ring,
                                                                            cfg))))
            rate = _cosign_rate(ledger, ring, ws[0][1])
        base = statistics.median(times["plain"])
        rows = [[kind, round(statistics.median(v), 1), round(_p90(v), 1),
                 round(statistics.median(v) / base, 1)] for kind, v in times.items()]
        return rows, rate
    finally:
        for p in procs:
            p.terminate()
            p.wait(10)


def _check(report) -> None:
    if report.failed or report.tsa_error:
        raise RuntimeError(f"anchoring failed: {report.failed} {report.tsa_error}")


def _cosign_rate(ledger: Ledger, ring: Keyring, url: str) -> float:
    note = make_checkpoint(ledger.ctx, ring)
    size = int(note.split("\n")[1])
    body = format_add_checkpoint(size, [], note).encode()
    with httpx.Client(base_url=url, timeout=10) as c:
        t0 = time.perf_counter()
        for _ in range(COSIGN_REQUESTS):
            if c.post("/add-checkpoint", content=body).status_code != 200:
                raise RuntimeError("the witness refused the re-submission")
        return COSIGN_REQUESTS / (time.perf_counter() - t0)


def run(backends: list[str], scale: float = 1.0) -> None:
    del scale  # latency per checkpoint does not depend on the ledger size (O(log n))
    with tempfile.TemporaryDirectory() as d, LocalTsa(Path(d) / "tsa") as tsa:
        for kind in available(backends):
            tmp = Path(d) / kind
            tmp.mkdir()
            ctx = sqlite_url(tmp) if kind == "sqlite" else pg_url()
            with ctx as url:
                rows, rate = _one_backend(url, tmp, tsa)
            print_table(f"checkpoint latency, {kind} ({ROUNDS} rounds, ms)",
                        ["checkpoint", "median", "p90", "x plain"], rows)
            print(f"witness cosignatures per second ({kind} log, one keep-alive client):"
                  f" {rate:.0f}")
