"""Verified reads over HTTP: what checking every row on the way out costs.

A real ``ledger serve`` (one worker, 127.0.0.1) answers ``GET /v1/entries?limit=100`` (an
auditor's page: every row checked -- body and entry hash, the next entry's link, each
payload's commitment, every column against its envelope -- and shaped from the envelope).
The baseline is the *same* server, the same route, authentication and JSON encoding, with
only the shaping replaced by the one before verified reads: every field from the indexed
columns and the payload bytes as stored, nothing checked (``_unverified_shape``, bench
only, run by ``python -m bench.read serve-unverified ...``).  Target: verified >= 0.7x of
unverified pages/s.

Then one entry: ``GET /v1/entries/{seq}`` (verified on the server), the same with
``?proof=true`` (the inclusion proof against the stored checkpoint), and
``LedgerReader.get`` (the client checks the proof, the checkpoint signature and the entry
itself again): latencies reported, no target.  Every loop is bounded in count and time.
"""

from __future__ import annotations

import json
import random
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

from bench.common import available, pg_url, print_table, sqlite_url, submissions
from bench.service import ROOT, serving
from ledger import Ledger
from ledger.clock import SystemClock, format_us
from ledger.core.entry import hash_hex, payload_map
from ledger.crypto.keys import Keyring
from ledger.crypto.tokens import ledger_signer
from ledger.ops.tokens import mint_access_token

PAGE = 100
TARGET = 0.7
REQUESTS = 240
ROUNDS = 6
TIME_LIMIT_S = 60.0


def _unverified_view(row: Any, blobs: Any) -> dict[str, Any]:
    """A row as the views shaped it before verified reads: the columns, the payloads as
    stored, nothing checked (bench only)."""
    import orjson

    try:
        env = orjson.loads(bytes(row.envelope))
    except ValueError:
        env = {}
    slots = payload_map(row.kind, env.get("v", 1)) if row.kind else {}
    text = {n: blobs[s][1].decode("utf-8", "replace") for n, s in slots.items() if s in blobs}
    doc = None
    main = text.get("result") or text.get("event") or text.get("report") \
        or text.get("request") or text.get("order")
    if main:
        try:
            doc = orjson.loads(main)
        except ValueError:
            doc = None
    result = doc if row.kind == "result" and isinstance(doc, dict) else None
    return {
        "seq": row.seq, "recorded_at": format_us(row.recorded_at), "kind": row.kind,
        "status": row.status, "agent_message": result.get("agent_message") if result else None,
        "engine": row.engine, "constraint_id": row.constraint_id,
        "subject": row.subject if row.subject is not None else text.get("subject"),
        "admission": row.admission,
        "developer_fields": result.get("developer_fields") if result else None,
        "producer": row.producer, "idempotency_key": row.idempotency_key,
        "proof_ref": row.proof_ref, "att_verdict": row.att_verdict, "att_kid": row.att_kid,
        "att_iss": row.att_iss, "preimage": text.get("preimage"),
        "attestation": text.get("attestation"), "query": text.get("query"),
        "meta": None, "document": doc if result is None else None,
        "payloads": env.get("payloads") or {},
        "envelope": bytes(row.envelope).decode("utf-8", "replace"),
        "body_hash": hash_hex(bytes(row.body_hash)), "prev_hash": hash_hex(bytes(row.prev_hash)),
        "entry_hash": hash_hex(bytes(row.entry_hash)),
    }


def _unverified_shape(conn: Any, ctx: Any, f: Any, rows: Any, layer: str, *_: Any,
                      ) -> tuple[list[dict[str, Any]], int, int, int]:
    from ledger.ops.view import project

    return [project(_unverified_view(r, b), layer) for r, b in rows], 0, len(rows), 0


def serve_unverified(argv: list[str]) -> None:
    """``ledger serve`` with the unverified shaping (the baseline server)."""
    import ledger.ops.query as q
    from ledger.cli.main import cli

    q._shape = _unverified_shape  # type: ignore[assignment]
    cli.main(argv, prog_name="ledger", standalone_mode=True)


def _token(keys: Path, origin: str) -> str:
    signer = ledger_signer(Keyring.load(keys), origin)
    return mint_access_token(signer, role="auditor", subject="bench", ttl_s=3600,
                             issuer=origin, audience=origin, now_s=int(time.time()))


def _pages(port: int, token: str, n: int, rng: random.Random, requests: int = REQUESTS,
           ) -> float:
    """Pages/s of GET /v1/entries?limit=PAGE at random positions (keep-alive)."""
    with httpx.Client(base_url=f"http://127.0.0.1:{port}",
                      headers={"Authorization": f"Bearer {token}"}, timeout=30) as c:
        c.get("/v1/entries", params={"limit": PAGE}).raise_for_status()  # warm
        done, t0 = 0, time.perf_counter()
        while done < requests and time.perf_counter() - t0 < TIME_LIMIT_S:
            after = rng.randrange(-1, max(0, n - PAGE))
            r = c.get("/v1/entries", params={"limit": PAGE, "after": after})
            r.raise_for_status()
            if len(r.json()["entries"]) != PAGE:
                raise RuntimeError("short page")
            done += 1
        return done / (time.perf_counter() - t0)


def _latency_ms(fn: Any, runs: int = 60) -> float:
    fn()
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1000


def _backend(kind: str, url: str, tmp: Path, n: int) -> list[list[Any]]:
    origin = f"bench.example/read-{kind}"
    keys = tmp / "keys"
    with Ledger.init(url, origin=origin) as L:
        ring = Keyring.load(keys)
        ring.generate(origin, SystemClock().now_us())
        subs = submissions(n)
        for i in range(0, n, 2000):
            L.append_many(subs[i:i + 2000])
        L.checkpoint(ring)
    token = _token(keys, origin)
    rng = random.Random(7)
    rows: list[list[Any]] = []
    base_cmd = ["--db", url, "serve", "--keys", str(keys), "--no-access-log",
                "--log-level", "warning"]
    with serving(url, keys, tmp / "verified.log") as port, \
            _unverified_server(tmp, base_cmd) as base_port:
        # alternating rounds on both servers, so that the machine's load meets both alike
        ratios, vs, us = [], [], []
        for _ in range(ROUNDS):
            v = _pages(port, token, n, rng, REQUESTS // ROUNDS)
            u = _pages(base_port, token, n, rng, REQUESTS // ROUNDS)
            vs.append(v)
            us.append(u)
            ratios.append(v / u)
        verified, unverified = statistics.median(vs), statistics.median(us)
        seq = n // 2
        with httpx.Client(base_url=f"http://127.0.0.1:{port}",
                          headers={"Authorization": f"Bearer {token}"}, timeout=30) as c:
            one = _latency_ms(lambda: c.get(f"/v1/entries/{seq}").raise_for_status())
            proof = _latency_ms(lambda: c.get(f"/v1/entries/{seq}",
                                              params={"proof": "true"}).raise_for_status())
        from ledger.client import LedgerReader

        jwks = json.loads((keys / "jwks.json").read_text("utf-8"))
        state = tmp / "reader-state.json"
        with LedgerReader(f"http://127.0.0.1:{port}", token, state, keys=jwks) as reader:
            client = _latency_ms(lambda: reader.get(seq))
    rows.append([kind, f"page of {PAGE}, verified vs unverified (pages/s; median ratio of "
                 f"{ROUNDS} alternating rounds, range {min(ratios):.2f}-{max(ratios):.2f})",
                 f"{verified:.1f}", f"{unverified:.1f}", f"{statistics.median(ratios):.2f}",
                 f">= {TARGET}"])
    rows.append([kind, "one entry: GET /v1/entries/{seq} (server-verified), ms", f"{one:.2f}",
                 "", "", "report"])
    rows.append([kind, "one entry with ?proof=true, ms", f"{proof:.2f}", f"{one:.2f}",
                 f"{one / proof:.2f}", "report"])
    rows.append([kind, "one entry through LedgerReader.get (client-verified), ms",
                 f"{client:.2f}", f"{one:.2f}", f"{one / client:.2f}", "report"])
    return rows


@contextmanager
def _unverified_server(tmp: Path, base_cmd: list[str]) -> Iterator[int]:
    """The baseline server (``serve-unverified``) on a free port, stopped afterwards."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    log = tmp / "unverified.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "bench.read", "serve-unverified",
                                 *base_cmd, "--port", str(port)], stdout=out,
                                stderr=subprocess.STDOUT, cwd=ROOT)
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/v1/health", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.1)
        else:
            raise RuntimeError(f"baseline server did not start: {log.read_text()[-2000:]}")
        yield port
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)


def run(backends: list[str], scale: float = 1.0) -> list[list[Any]]:
    n = max(1000, int(5000 * scale))
    rows: list[list[Any]] = []
    for kind in available(backends):
        with tempfile.TemporaryDirectory() as d:
            tmp = Path(d)
            urls = sqlite_url(tmp) if kind == "sqlite" else pg_url()
            with urls as url:
                rows += _backend(kind, url, tmp, n)
    print_table(f"Verified reads over HTTP ({n} entries, auditor layer)",
                ["backend", "measure", "verified", "baseline", "ratio", "target"], rows)
    return rows


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "serve-unverified":
        serve_unverified(sys.argv[2:])
