"""The mixed load, bounded: 64 producers appending through the producer client (every
receipt verified), an auditor reading verified pages, and a custodian redacting, against
one real ``ledger serve`` per engine.  Afterwards: every acknowledged append is stored
exactly once, nothing is stored that was not acknowledged or spooled, every page the auditor
read verified (redacted payloads named, never flagged), and the audit finds nothing.

Bounded in time (``LOAD_SECONDS``, default 20 s a engine) and in memory (64 threads, small
results).  The figures are printed (``-s``) and quoted in the closing notes."""

from __future__ import annotations

import os
import threading
import time
from collections import Counter
from pathlib import Path

import httpx
import pytest

from ledger.client import LedgerClient, LedgerUnavailable
from tests.client.conftest import audit_exit, result_keys
from tests.client.server import LedgerServer
from tests.client.submissions import verified
from tests.conftest import ENGINES, engine_url

pytestmark = pytest.mark.slow

PRODUCERS = 64
SECONDS = float(os.environ.get("LOAD_SECONDS", "20"))


class Tally:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.acked: list[str] = []  # idempotency keys of appended/replayed results
        self.spooled: list[str] = []
        self.errors: Counter[str] = Counter()
        self.pages = 0
        self.rows_read = 0
        self.flagged = 0
        self.redactions = 0

    def add(self, what: str, key: str) -> None:
        with self.lock:
            (self.acked if what == "acked" else self.spooled).append(key)


def _producer(url: str, token: str, n: int, stop: float, tally: Tally, spool: Path) -> None:
    i = 0
    with LedgerClient(url, token, spool_dir=spool) as client:
        while time.monotonic() < stop:
            sub = {**verified(n * 100_000 + i, f"p{n}"), "subject": f"subj-{n % 8}"}
            i += 1
            try:
                out = client.append(sub)
            except LedgerUnavailable as exc:
                with tally.lock:
                    tally.errors[type(exc).__name__] += 1
                continue
            tally.add("acked" if out.stored else "spooled", out.idempotency_key)
        client.drain()


def _auditor(url: str, token: str, stop: float, tally: Tally) -> None:
    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"},
                      timeout=30) as c:
        after = -1
        while time.monotonic() < stop:
            r = c.get("/v1/entries", params={"after": after, "limit": 200})
            if r.status_code != 200:
                with tally.lock:
                    tally.errors[f"auditor {r.status_code}"] += 1
                time.sleep(0.1)
                continue
            body = r.json()
            with tally.lock:
                tally.pages += 1
                tally.rows_read += len(body["entries"])
                tally.flagged += body["flagged"]
            after = body["next_after"] if body["next_after"] is not None else -1


def _custodian(url: str, token: str, stop: float, tally: Tally) -> None:
    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"},
                      timeout=30) as c:
        k = 0
        while time.monotonic() < stop:
            time.sleep(SECONDS / 6)
            r = c.post("/v1/redactions", json={
                "subject": f"subj-{k % 8}", "payloads": ["preimage"],
                "reason": "erasure request", "reference": f"DSR-{k}"})
            k += 1
            with tally.lock:
                if r.status_code == 200:
                    tally.redactions += 1
                else:
                    tally.errors[f"custodian {r.status_code}"] += 1


@pytest.mark.parametrize("kind", ENGINES)
def test_producers_an_auditor_and_a_custodian_lose_nothing(
        kind: str, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    url = engine_url(kind, request, tmp_path)
    srv = LedgerServer(url, tmp_path, f"test.example/load-{kind}").start()
    tally = Tally()
    try:
        stop = time.monotonic() + SECONDS
        threads = [threading.Thread(target=_producer, args=(
            srv.url, srv.token("producer", f"gw-{n}"), n, stop, tally, tmp_path / f"spool-{n}"))
            for n in range(PRODUCERS)]
        threads.append(threading.Thread(target=_auditor, args=(
            srv.url, srv.token("auditor", "aud"), stop, tally)))
        threads.append(threading.Thread(target=_custodian, args=(
            srv.url, srv.token("custodian", "dpo"), stop, tally)))
        t0 = time.monotonic()
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=SECONDS + 120)
        assert not any(t.is_alive() for t in threads), "a worker hung"
        wall = time.monotonic() - t0
    finally:
        srv.stop()
    stored = [k for k in result_keys(url) if k is not None]
    counts = Counter(stored)
    assert not [k for k, n in counts.items() if n > 1], "stored twice"
    acknowledged = set(tally.acked) | set(tally.spooled)  # the spools were drained
    assert acknowledged <= set(counts), "an acknowledged append is missing"
    assert set(counts) <= acknowledged, "stored without being acknowledged"
    assert tally.acked and tally.pages and tally.redactions
    assert tally.flagged == 0, "a page the auditor read did not verify"
    assert not tally.errors, tally.errors
    assert audit_exit(url) in (0, 3)  # 3: the lawful erasures are abstentions
    print(f"\n[{kind}] {PRODUCERS} producers x {SECONDS:.0f} s: {len(tally.acked)} appended "
          f"({len(tally.acked) / wall:.0f}/s), {len(tally.spooled)} spooled then drained, "
          f"{tally.pages} auditor pages ({tally.rows_read} rows, 0 flagged), "
          f"{tally.redactions} redactions; every receipt verified, nothing lost or twice")

