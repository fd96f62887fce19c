"""HTTP service throughput: concurrent single appends (group commit) vs sequential
single-append transactions, both measured in the same run on the same machine.

Baseline: ``Ledger.append(submission)`` called sequentially in-process, one transaction
(one fsync) each: the rate a producer gets without batching.  Then a real ``ledger
serve`` (uvicorn, one worker, on 127.0.0.1) and 32 clients, each on its own keep-alive
connection, appending single submissions (``POST /v1/entries``) as fast as their
receipts come back; a minimal HTTP/1.1 client on asyncio keeps the load generator's own
CPU cost small (the machine has 2 vCPUs, shared by server, client and database).
Every response is checked (201 + receipt).  Every loop is bounded in count and time.
The 32-client load runs twice per round: with a signed JWT receipt per entry (the default),
and asking for batch receipts (``Prefer: receipt=batch``: one signature per committed batch,
docs/format-receipt.md).
"""

from __future__ import annotations

import asyncio
import json
import multiprocessing as mp
import os
import re
import signal
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg
from sqlalchemy import distinct, func, select

from bench.common import available, pg_url, print_table, sqlite_url, submissions
from ledger import Ledger
from ledger.clock import SystemClock
from ledger.crypto.keys import Keyring
from ledger.crypto.tokens import ledger_signer
from ledger.ops.tokens import mint_access_token
from ledger.store.schema import entries

CLIENTS = 32
TARGET = 3.0
TIME_LIMIT_S = 120.0
ROOT = Path(__file__).resolve().parent.parent
_RUNNING = re.compile(rb"Uvicorn running on http://127\.0\.0\.1:\d+")


@contextmanager
def serving(db_url: str, keys: Path, log: Path, *extra: str) -> Iterator[int]:
    """``ledger serve`` in a subprocess; yields its port once every worker has started;
    stops it (SIGTERM)."""
    workers = int(extra[extra.index("--workers") + 1]) if "--workers" in extra else 1
    with socket.socket() as sock:  # a free port (--workers N cannot use port 0)
        sock.bind(("127.0.0.1", 0))
        free = sock.getsockname()[1]
    cmd = [sys.executable, "-m", "ledger", "--db", db_url, "serve", "--port", str(free),
           "--keys", str(keys), "--no-access-log", "--log-level", "info", *extra]
    with open(log, "wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, cwd=ROOT)
    try:
        deadline = time.monotonic() + 30
        port = None
        while port is None and time.monotonic() < deadline and proc.poll() is None:
            started = log.read_bytes().count(b"Application startup complete")
            port = free if _RUNNING.search(log.read_bytes()) and started >= workers else None
            time.sleep(0.05)
        if port is None:
            raise RuntimeError(f"ledger serve did not start: {log.read_text()[-2000:]}")
        yield port
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)


async def _client(port: int, token: bytes, bodies: list[bytes], deadline: float,
                  latencies: list[float], batch: bool = False) -> int:
    """One keep-alive connection appending ``bodies`` one after another (``batch``: asking
    for batch receipts, ``Prefer: receipt=batch``)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    head = (b"POST /v1/entries HTTP/1.1\r\nHost: bench\r\nAuthorization: Bearer " + token
            + (b"\r\nPrefer: receipt=batch" if batch else b"")
            + b"\r\nContent-Type: application/json\r\nContent-Length: ")
    done = 0
    try:
        for body in bodies:
            if time.perf_counter() > deadline:
                break
            t0 = time.perf_counter()
            writer.write(head + str(len(body)).encode() + b"\r\n\r\n" + body)
            await writer.drain()
            status = await reader.readline()
            length = 0
            while (line := await reader.readline()) not in (b"\r\n", b""):
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":", 1)[1])
            data = await reader.readexactly(length)
            latencies.append(time.perf_counter() - t0)
            if not status.startswith(b"HTTP/1.1 201") or b'"receipt"' not in data or \
                    (b"~" in data) is not batch:
                raise RuntimeError(f"append failed: {status!r} {data[:300]!r}")
            done += 1
    finally:
        writer.close()
    return done


def _load(port: int, token: str, bodies: list[bytes], clients: int, out: Any,
          batch: bool = False) -> None:
    """In a process of its own: ``clients`` connections share ``bodies``."""
    async def main() -> tuple[int, float, list[float]]:
        latencies: list[float] = []
        per = [bodies[i::clients] for i in range(clients)]
        t0 = time.perf_counter()
        deadline = t0 + TIME_LIMIT_S
        counts = await asyncio.gather(*(_client(port, token.encode(), p, deadline, latencies,
                                                batch) for p in per))
        return sum(counts), time.perf_counter() - t0, latencies

    try:
        out.put(asyncio.run(main()))
    except Exception as exc:  # noqa: BLE001 - reported by the parent
        out.put(exc)


def http_load(port: int, token: str, bodies: list[bytes], clients: int, batch: bool = False,
              ) -> tuple[float, float, float]:
    """(appends/s, p50 ms, p99 ms) of ``clients`` concurrent HTTP clients."""
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    proc = ctx.Process(target=_load, args=(port, token, bodies, clients, out, batch))
    proc.start()
    got = out.get(timeout=TIME_LIMIT_S + 60)
    proc.join(timeout=30)
    if isinstance(got, Exception):
        raise RuntimeError(f"load generator failed: {got!r}")
    n, elapsed, lat = got
    lat.sort()
    return n / elapsed, 1000 * statistics.median(lat), 1000 * lat[int(0.99 * (len(lat) - 1))]


def sequential(db_url: str, subs: list[bytes]) -> float:
    """Single-append transactions, one after another, in-process (the baseline)."""
    with Ledger.open(db_url) as ledger:
        t0 = time.perf_counter()
        for s in subs:
            ledger.append(s, producer="bench")
        return len(subs) / (time.perf_counter() - t0)


def commit_floor(kind: str, url: str, n: int) -> float:
    """Rate of one-row write transactions through the bare driver, same durability
    settings (SQLite WAL + synchronous=FULL; PostgreSQL defaults): the fsync floor that
    group commit amortizes.  Uses a scratch table beside (not in) the ledger's tables."""
    if kind == "sqlite":
        path = url.removeprefix("sqlite:///") + ".floor"
        conn = sqlite3.connect(path, isolation_level=None)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=FULL")
        conn.execute("CREATE TABLE IF NOT EXISTS floor (i INTEGER, pad BLOB)")
        t0 = time.perf_counter()
        for i in range(n):
            conn.execute("BEGIN IMMEDIATE")
            conn.execute("INSERT INTO floor VALUES (?, ?)", (i, b"x" * 1500))
            conn.execute("COMMIT")
        rate = n / (time.perf_counter() - t0)
        conn.close()
        for suffix in ("", "-wal", "-shm"):
            Path(path + suffix).unlink(missing_ok=True)
        return rate
    with psycopg.connect(url.replace("postgresql+psycopg://", "postgresql://")) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS bench_floor (i int, pad bytea)")
        conn.commit()
        t0 = time.perf_counter()
        for i in range(n):
            conn.execute("INSERT INTO bench_floor VALUES (%s, %s)", (i, b"x" * 1500))
            conn.commit()
        rate = n / (time.perf_counter() - t0)
        conn.execute("DROP TABLE bench_floor")
        conn.commit()
        return rate


def entries_per_commit(url: str, producer: str) -> float:
    """Mean entries per transaction for one producer (a batch shares its recorded_at)."""
    with Ledger.open(url) as ledger, ledger.engine.connect() as conn:
        n, commits = conn.execute(
            select(func.count(), func.count(distinct(entries.c.recorded_at)))
            .where(entries.c.producer == producer)).one()
    return n / max(commits, 1)


def _median_round(results: list[tuple[float, float, float]]) -> tuple[float, float, float]:
    return sorted(results)[len(results) // 2]


def _backend(kind: str, tmp: Path, scale: float, rounds: int) -> list[list[Any]]:
    """Rounds alternate the baseline and the HTTP loads (the machine is shared: load and
    fsync cost drift during a run); medians are reported, ratios are of medians."""
    n_seq, n_http = max(50, int(300 * scale)), max(CLIENTS * 8, int(2000 * scale))
    pool = iter(submissions(2 * rounds * (n_seq + 2 * n_http + 100) + 200, seed=21))

    def take(n: int) -> list[bytes]:
        return [next(pool) for _ in range(n)]

    base: list[float] = []
    one: list[tuple[float, float, float]] = []
    many: dict[int, list[tuple[float, float, float]]] = {1: [], 2: []}
    many_b: dict[int, list[tuple[float, float, float]]] = {1: [], 2: []}  # batch receipts
    with (sqlite_url(tmp) if kind == "sqlite" else pg_url()) as url:
        origin = f"bench.example/{kind}"
        Ledger.init(url, origin=origin).close()
        keys = tmp / f"keys-{kind}"
        ring = Keyring.load(keys)
        ring.generate(origin, SystemClock().now_us())
        signer = ledger_signer(ring, origin)

        def token(subject: str) -> str:
            return mint_access_token(signer, role="producer", subject=subject, ttl_s=3600,
                                     issuer=origin, audience=origin, now_s=int(time.time()))

        extra = os.environ.get("LEDGER_BENCH_SERVE_ARGS", "").split()
        floors: list[float] = []
        for workers in (1, 2):
            with serving(url, keys, tmp / f"serve-{kind}-{workers}.log", "--workers",
                         str(workers), *extra) as port:
                http_load(port, token("warm-up"), take(100), 4)  # connections, caches
                for _ in range(rounds):
                    floors.append(commit_floor(kind, url, n_seq))
                    base.append(sequential(url, take(n_seq)))
                    if workers == 1:
                        one.append(http_load(port, token("one"), take(100), 1))
                    many[workers].append(http_load(port, token(f"many-{workers}"),
                                                   take(n_http), CLIENTS))
                    many_b[workers].append(http_load(port, token(f"batch-{workers}"),
                                                     take(n_http), CLIENTS, batch=True))
        batch = {w: entries_per_commit(url, f"many-{w}") for w in many}
        batch_b = {w: entries_per_commit(url, f"batch-{w}") for w in many_b}
    b, floor = statistics.median(base), statistics.median(floors)
    rows: list[list[Any]] = [
        [kind, "raw 1-row commits, bare driver (fsync floor)", 1, floor, "-", "-", "-",
         f"{floor / b:.2f}", "info"],
        [kind, "sequential Ledger.append (1 txn each), in-process", 1, b, "-", "-", "1.0",
         "1.00", "baseline"]]
    r1 = _median_round(one)
    rows.append([kind, "HTTP, 1 client, 1 worker", 1, r1[0], r1[1], r1[2], "1.0",
                 f"{r1[0] / b:.2f}", "-"])
    for label, runs, sizes in (("receipt per entry", many, batch),
                               ("batch receipts", many_b, batch_b)):
        for workers, results in runs.items():
            r = _median_round(results)
            lo, hi = min(x[0] for x in results) / b, max(x[0] for x in results) / b
            rows.append([kind, f"HTTP, {CLIENTS} clients, {workers} worker(s), {label}",
                         CLIENTS, r[0], r[1], r[2], f"{sizes[workers]:.1f}",
                         f"{r[0] / b:.2f} ({lo:.1f}-{hi:.1f})", f">= {TARGET:.1f}"])
    print(f"{kind}: per round: fsync floor {[round(x) for x in floors]}, baseline "
          f"{[round(x) for x in base]}, {CLIENTS} clients "
          f"{[round(x[0]) for w in many for x in many[w]]}, batch receipts "
          f"{[round(x[0]) for w in many_b for x in many_b[w]]}", file=sys.stderr)
    return rows


def receipt_signing(sizes: tuple[int, ...] = (1, 16, 64)) -> list[list[Any]]:
    """In-process: receipt cost per appended item, a JWT each vs one batch receipt for ``n``
    items (what the group committer's finish step pays), best of 20."""
    import hashlib

    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    from ledger.api.receipts import sign_batch_receipts, sign_receipt
    from ledger.crypto.keys import public_jwk, raw_public
    from ledger.crypto.tokens import JwtSigner
    from ledger.ops.append import AppendResult

    key = Ed25519PrivateKey.generate()
    jwk = public_jwk("bench.example/receipts", raw_public(key), "2026-12-01T00:00:00Z")
    signer = JwtSigner(jwk["kid"], key, {"keys": [jwk]})
    results = [AppendResult(ok=True, seq=i, entry_hash="sha256:" + hashlib.sha256(
        b"%d" % i).hexdigest(), recorded_at="2026-12-01T00:00:00.000001Z")
        for i in range(max(sizes))]
    rows = []
    for n in sizes:
        def each(n: int = n) -> None:
            for r in results[:n]:
                sign_receipt(signer, r, origin="o", ledger_id="l", producer="p", now_s=1)

        def batch(n: int = n) -> None:
            sign_batch_receipts(signer, [(r, "p") for r in results[:n]], origin="o",
                                ledger_id="l", now_s=1)

        best = {}
        for name, fn in (("each", each), ("batch", batch)):
            times = []
            for _ in range(20):
                t0 = time.perf_counter()
                fn()
                times.append(time.perf_counter() - t0)
            best[name] = 1e6 * min(times) / n
        rows.append([n, best["each"], best["batch"], f"{best['each'] / best['batch']:.1f}"])
    print_table("receipts: microseconds per appended item (one process, best of 20)",
                ["items per commit", "JWT per entry", "batch receipt", "ratio"], rows)
    return rows


def run(backends: list[str], scale: float = 1.0, rounds: int = 3) -> list[list[Any]]:
    receipt_signing()
    rows: list[list[Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        for kind in available(backends):
            rows += _backend(kind, Path(tmp), scale, rounds)
    print_table("HTTP service: single appends/s, medians of interleaved rounds (ratio = vs "
                "sequential single-append transactions in the same run; per-round range)",
                ["backend", "mode", "clients", "appends/s", "p50 ms", "p99 ms",
                 "entries/commit", "ratio", "target"], rows)
    print(json.dumps({"cpus": os.cpu_count(), "load_avg": os.getloadavg()}))
    return rows
