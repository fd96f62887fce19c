"""Many clients against real servers (two `ledger serve` processes on one database), then
an audit that verifies; a retry storm with idempotency keys that creates no duplicates."""

from __future__ import annotations

import random
import subprocess
import sys
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy.engine import make_url

from ledger.demo.samples import math_verified
from tests.api.server import (
    ROOT,
    Server,
    prepare_ledger,
    start_server,
    stop_process,
)

CLIENTS = 24
PER_CLIENT = 8


@dataclass
class Pair:
    """Two server processes sharing one ledger database."""

    servers: list[Server]

    @property
    def db_url(self) -> str:
        return self.servers[0].db_url


@pytest.fixture
def pair(db_url: str, tmp_path: Path) -> Iterator[Pair]:
    kind = make_url(db_url).get_backend_name()
    origin = f"test.example/concurrency-{kind}"
    keys = tmp_path / "keys"
    prepare_ledger(db_url, keys, origin)
    servers = []
    try:
        for i in range(2):
            proc, url = start_server(db_url, keys, tmp_path / f"serve-{i}.log")
            servers.append(Server(kind, db_url, keys, origin, proc, url,
                                  tmp_path / f"serve-{i}.log"))
        for s in servers:
            s.tokens = {r: s.token(r, f"conc-{r}") for r in ("producer", "auditor")}
        yield Pair(servers)
    finally:
        for s in servers:
            stop_process(s.proc)


def audit(db_url: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([sys.executable, "-m", "ledger", "--db", db_url, "audit"],
                          capture_output=True, timeout=120, cwd=ROOT)


def submission(i: int, tag: str) -> dict[str, Any]:
    sub = math_verified(i, random.Random(f"{tag}-{i}"))
    sub["subject"] = f"{tag}-{i}"
    return sub


def test_concurrent_appends_then_audit_verifies(pair: Pair) -> None:
    tag = uuid.uuid4().hex[:8]
    with pair.servers[0].client("auditor") as c:
        start = c.get("/v1/health").json()["size"]

    def client(n: int) -> list[dict[str, Any]]:
        srv = pair.servers[n % 2]
        out = []
        with srv.client("producer") as c:
            for k in range(PER_CLIENT):
                r = c.post("/v1/entries", json=submission(n * PER_CLIENT + k, tag))
                assert r.status_code == 201, r.text
                out.append(r.json())
        return out

    with ThreadPoolExecutor(CLIENTS) as pool:
        results = [x for chunk in pool.map(client, range(CLIENTS)) for x in chunk]
    total = CLIENTS * PER_CLIENT
    seqs = sorted(r["seq"] for r in results)
    assert seqs == list(range(start, start + total))  # gapless, no duplicates, one chain
    # group commit: entries of one transaction share recorded_at
    assert len({r["recorded_at"] for r in results}) < total
    with pair.servers[0].client("auditor") as c:
        head = c.get("/v1/health").json()
        assert head["size"] == start + total
        rows = c.get("/v1/entries", params={"limit": 1000, "after": start - 1}
                     ).json()["entries"]
    assert [r["entry_hash"] for r in rows] == [
        {r["seq"]: r["entry_hash"] for r in results}[s] for s in range(start, start + total)]
    done = audit(pair.db_url)
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    assert f"{start + total} rows" in done.stderr.decode()


def test_retry_storm_with_idempotency_keys_creates_no_duplicates(pair: Pair) -> None:
    tag = uuid.uuid4().hex[:8]
    keys = [f"storm-{tag}-{k}" for k in range(6)]
    bodies = {k: submission(i, tag) for i, k in enumerate(keys)}
    seen: dict[str, set[int]] = {k: set() for k in keys}
    with pair.servers[0].client("auditor") as c:
        start = c.get("/v1/health").json()["size"]

    def client(n: int) -> list[tuple[str, int]]:
        rng = random.Random(n)
        out = []
        srv = pair.servers[n % 2]
        with srv.client("producer") as c:
            for _ in range(12):
                key = rng.choice(keys)
                if rng.random() < 0.25:  # a client that gives up at once, then retries
                    try:
                        c.post("/v1/entries", json=bodies[key], timeout=0.001,
                               headers={"Idempotency-Key": key})
                    except httpx.TimeoutException:
                        pass
                r = c.post("/v1/entries", json=bodies[key], headers={"Idempotency-Key": key})
                assert r.status_code in (200, 201), r.text
                out.append((key, r.json()["seq"]))
        return out

    with ThreadPoolExecutor(16) as pool:
        for chunk in pool.map(client, range(16)):
            for key, seq in chunk:
                seen[key].add(seq)
    assert all(len(s) == 1 for s in seen.values()), seen
    with pair.servers[1].client("auditor") as c:
        for key in keys:
            rows = c.get("/v1/entries", params={"subject": bodies[key]["subject"]}
                         ).json()["entries"]
            assert len(rows) == 1 and rows[0]["idempotency_key"] == key
            assert rows[0]["seq"] in seen[key]
        assert c.get("/v1/health").json()["size"] == start + len(keys)
    done = audit(pair.db_url)
    assert done.returncode == 0, done.stderr.decode()[-2000:]
