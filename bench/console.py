"""The console at scale: render times and transfer sizes, and the entry-hash lookup.

For each backend, a ledger of ``100,000 × scale`` entries is written with the benchmark's
fill (``bench.common.submissions`` in batches of 2,000 through ``Ledger.append_many``),
its recorded times spread over the 120 days before now; then:

* the entry-hash lookup (``Ledger.seq_of_entry_hash``, the console's "jump to" and
  ``GET /v1/entries/by-hash``): median of repeated lookups of hashes spread over the
  ledger, without ``ix_entries_entry_hash`` (dropped for the measurement: the code before
  revision 0012) and with it;
* ``ledger audit`` (a real process; the charts' counts come from its run), then
  ``ledger checkpoint`` (the Merkle tree synced and a checkpoint signed, as a scheduled
  checkpoint keeps them: the browser's proof check reads them);
* ``ledger serve`` (a real process) and Debian's headless Chromium driven by Playwright
  (the system browser, as the browser tests): as an auditor, seconds from the navigation
  to the view's ``data-ready`` and the bytes the view transferred (``responseBodySize``
  of every response, as sent on the wire; the decoded JSON bytes beside it), for

  - the first render of the console: a fresh page, sign-in from the URL fragment, the
    entries view (newest first is not the default: the first page by seq), static files
    included;
  - the charts view of the whole ledger (one ``GET /v1/aggregates``);
  - one entry with its inclusion proof checked in the browser (the entry in the middle).

Usage: ``scripts/bench console [--backend sqlite,postgresql] [--scale 10]`` (scale 10:
1,000,000 entries).  The databases are deleted afterwards.
"""

from __future__ import annotations

import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy import text

from bench.common import available, pg_url, print_table, sqlite_url, submissions
from ledger import Ledger
from ledger.clock import FixedClock
from ledger.crypto.keys import Keyring

ORIGIN = "bench.ledger/console"
CHROMIUM = "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]
DAY_US = 86_400_000_000
BATCH = 2000
INDEX = "ix_entries_entry_hash"


def fill(url: str, n: int) -> None:
    """``n`` benchmark entries, recorded over the 120 days before now (so that the
    charts' buckets are those of a ledger in use, not of one minute)."""
    now = time.time_ns() // 1000
    start = now - 120 * DAY_US
    batches = max(1, -(-n // BATCH))
    clock = FixedClock(start)
    with Ledger.init(url, origin=ORIGIN, clock=clock) as led:
        for b, i in enumerate(range(0, n, BATCH)):
            clock.advance(start + b * (120 * DAY_US - 3_600_000_000) // batches
                          - clock.now_us())
            led.append_many(submissions(min(BATCH, n - i), seed=i, start=i), producer="gw")


def lookup_ms(url: str, n: int, indexed: bool, repeat: int) -> float:
    """Median milliseconds of ``Ledger.seq_of_entry_hash`` over ``repeat`` hashes spread
    over the ledger; without the index when ``indexed`` is false (dropped, re-created
    after)."""
    with Ledger.open(url) as led:
        seqs = [(k * 7919) % n for k in range(1, repeat + 1)]
        hashes = [led.get(s)["entry_hash"] for s in seqs]
        if not indexed:
            with led.engine.begin() as conn:
                conn.execute(text(f"DROP INDEX {INDEX}"))
        try:
            times = []
            for s, h in zip(seqs, hashes, strict=True):
                t0 = time.perf_counter()
                got = led.seq_of_entry_hash(h)
                times.append((time.perf_counter() - t0) * 1000)
                assert got == s, (got, s)
        finally:
            if not indexed:
                with led.engine.begin() as conn:
                    conn.execute(text(f"CREATE INDEX {INDEX} ON entries (entry_hash)"))
    return statistics.median(times)


def index_bytes(url: str) -> int | None:
    """The size of ``ix_entries_entry_hash`` (SQLite: from ``dbstat`` when the library has
    it; PostgreSQL: ``pg_relation_size``)."""
    with Ledger.open(url) as led, led.engine.connect() as conn:
        try:
            if url.startswith("sqlite"):
                return int(conn.execute(text(
                    f"SELECT sum(pgsize) FROM dbstat WHERE name = '{INDEX}'")).scalar() or 0)
            return int(conn.execute(text(f"SELECT pg_relation_size('{INDEX}')")).scalar())
        except Exception:  # noqa: BLE001 - SQLite built without dbstat
            return None


def _ledger(url: str, *args: str, **kw: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ledger", "--db", url, *args],
                          capture_output=True, text=True, check=True, **kw)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Tab:
    """One fresh page; the responses it received."""

    def __init__(self, ctx: Any) -> None:
        self.page = ctx.new_page()
        self.responses: list[Any] = []
        self.page.on("response", lambda r: self.responses.append(r))

    def wait_ready(self) -> None:
        self.page.wait_for_selector('#view[data-ready="true"]', timeout=120_000)

    def go(self, hash_: str) -> float:
        self.responses.clear()
        t0 = time.perf_counter()
        self.page.evaluate("h => { document.getElementById('view').dataset.ready = 'no';"
                           " location.hash = h; }", hash_)
        self.wait_ready()
        return time.perf_counter() - t0

    def sizes(self) -> tuple[int, int]:
        """(bytes on the wire, decoded bytes) of the responses since the last reset."""
        wire = decoded = 0
        for r in self.responses:
            try:
                wire += r.request.sizes()["responseBodySize"]
                decoded += len(r.body())
            except Exception:  # noqa: BLE001 - a redirect or a response without a body
                pass
        return wire, decoded


def browse(base: str, token: str, seq: int, profile: Path) -> list[list[Any]]:
    from playwright.sync_api import sync_playwright

    rows: list[list[Any]] = []
    with sync_playwright() as p:
        ctx = p.chromium.launch_persistent_context(
            str(profile), executable_path=CHROMIUM, args=ARGS, headless=True,
            viewport={"width": 1440, "height": 900})
        try:
            tab = Tab(ctx)
            t0 = time.perf_counter()
            tab.page.goto(f"{base}/console/#token={token}")
            tab.wait_ready()
            first = time.perf_counter() - t0
            assert tab.page.locator("#entries-table tbody tr").count() > 0
            rows.append(["entries view, first render (fresh page, static files)", first,
                         *tab.sizes()])
            charts = tab.go("#/charts")
            rows.append(["charts view (GET /v1/aggregates, whole ledger)", charts,
                         *tab.sizes()])
            entry = tab.go(f"#/entry/{seq}")  # the browser verifies the checkpoint first
            verdict = tab.page.inner_text("#proof-verdict")
            assert verdict.startswith("This entry's hash is in the signed tree"), verdict
            rows.append([f"entry {seq} with its proof checked in the browser", entry,
                         *tab.sizes()])
            again = tab.go(f"#/entry/{seq + 1}")
            rows.append([f"entry {seq + 1} (checkpoint already trusted)", again,
                         *tab.sizes()])
        finally:
            ctx.close()
    return rows


def console_part(kind: str, url: str, n: int, tmp: Path) -> tuple[list[list[Any]], list[Any]]:
    t0 = time.perf_counter()
    fill(url, n)
    fill_s = time.perf_counter() - t0
    before = lookup_ms(url, n, indexed=False, repeat=5)
    after = lookup_ms(url, n, indexed=True, repeat=200)
    size = index_bytes(url)
    keys = tmp / f"keys-{kind}"
    Keyring.load(keys).generate(ORIGIN, time.time_ns() // 1000)
    t0 = time.perf_counter()
    audit = subprocess.run([sys.executable, "-m", "ledger", "--db", url, "audit"],
                           capture_output=True, text=True)
    audit_s = time.perf_counter() - t0
    assert audit.returncode == 0, audit.stdout + audit.stderr
    t0 = time.perf_counter()  # the tree and a checkpoint, as a scheduled checkpoint keeps them
    _ledger(url, "checkpoint", "--keys", str(keys), "--out", str(tmp / "cp.txt"))
    checkpoint_s = time.perf_counter() - t0
    token = _ledger(url, "token", "issue", "--role", "auditor", "--subject", "bench",
                    "--keys", str(keys)).stdout.strip()
    port = _free_port()
    log = open(tmp / f"serve-{kind}.log", "wb")  # noqa: SIM115 - the server writes to it
    proc = subprocess.Popen([sys.executable, "-m", "ledger", "--db", url, "serve", "--port",
                             str(port), "--keys", str(keys), "--no-access-log"],
                            stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(base + "/v1/health", timeout=5).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline or proc.poll() is not None:
                raise RuntimeError((tmp / f"serve-{kind}.log").read_text())
            time.sleep(0.2)
        rows = browse(base, token, n // 2, tmp / f"profile-{kind}")
    finally:
        proc.terminate()
        proc.wait(30)
        log.close()
    return ([[kind, f"{n:,}", *r] for r in rows],
            [kind, f"{n:,}", fill_s, audit_s, checkpoint_s, before, after, before / after,
             "-" if size is None else f"{size / n:.0f}"])


def run(backends: list[str], scale: float = 1.0) -> list[list[Any]]:
    n = int(100_000 * scale)
    if not Path(CHROMIUM).exists():
        print(f"{CHROMIUM} is not installed (scripts/ensure-tools): no console figures")
        return []
    render: list[list[Any]] = []
    other: list[list[Any]] = []
    for kind in available(backends):
        with tempfile.TemporaryDirectory(dir=os.environ.get("LEDGER_BENCH_TMP")) as d:
            tmp = Path(d)
            with (sqlite_url(tmp) if kind == "sqlite" else pg_url()) as url:
                rows, line = console_part(kind, url, n, tmp)
                render += rows
                other.append(line)
                print_table("Console render (headless Chromium, auditor)",
                            ["engine", "entries", "view", "seconds", "bytes on the wire",
                             "bytes decoded"], rows)
    print_table("Console render (headless Chromium, auditor)",
                ["engine", "entries", "view", "seconds", "bytes on the wire",
                 "bytes decoded"], render)
    print_table("Fill, audit and the entry-hash lookup",
                ["engine", "entries", "fill s", "ledger audit s", "ledger checkpoint s",
                 "lookup ms, no index (before)", "lookup ms, ix_entries_entry_hash",
                 "before / after", "index B/entry"],
                other)
    return render
