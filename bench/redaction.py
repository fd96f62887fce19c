"""Redaction cost against raw baselines measured in the same run (docs/performance.md).

* ``ledger redact --subject`` of 1 % of a ledger (10,000 entries of a 1,000,000-entry
  ledger at ``--scale 1``) vs a raw DELETE of the same number of payload rows of another
  subject (guard rows inserted first, as the database's trigger requires, one
  transaction): the price of planning, the redaction entries and the WAL checkpoint;
* the audit rate with 1 % of the entries redacted vs the same ledger before (target
  >= 0.95x): what the redaction map and the ``redacted`` abstentions cost.
"""

from __future__ import annotations

import json
import random
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.common import available, pg_url, print_table, sqlite_url
from ledger import Ledger
from ledger.demo.samples import bench_submission
from ledger.ops.audit import AuditOptions
from ledger.ops.custody import Ask

EVERY = 100  # 1 % of the entries belong to the redacted subject, 1 % to the raw one


def fill(url: str, n: int, batch: int = 2000) -> float:
    """``n`` entries; seq % 100 == 0 has subject "dsr-a", == 50 "dsr-b".  Seconds."""
    t0 = time.perf_counter()
    with Ledger.init(url, origin="bench.example/redaction") as led:
        rng = random.Random(1)
        for start in range(0, n, batch):
            subs = []
            for i in range(start, min(n, start + batch)):
                s = bench_submission(i, rng)
                s["subject"] = "dsr-a" if i % EVERY == 0 else "dsr-b" if i % EVERY == 50 \
                    else f"req-{i}"
                s["query"] = f"prompt number {i} of a user"
                subs.append(json.dumps(s).encode())
            led.append_many(subs)
    return time.perf_counter() - t0


def audit_rate(url: str) -> tuple[float, dict[str, Any]]:
    with Ledger.open(url) as led:
        t0 = time.perf_counter()
        rep = led.audit(AuditOptions(check_attestations=False))
        dt = time.perf_counter() - t0
    assert rep.summary.failed == 0, rep.findings[:3]
    return rep.summary.rows / dt, rep


def raw_delete(url: str, n: int) -> float:
    """Entries per second of the baseline: guard rows + DELETE of the payload rows of the
    entries of subject "dsr-b", one transaction, driver level."""
    seqs = [s for s in range(50, n, EVERY)]
    with Ledger.open(url) as led:
        pg = led.engine.dialect.name == "postgresql"
        ph = "%s" if pg else "?"
        raw = led.engine.raw_connection()
        try:
            cur = raw.cursor()
            t0 = time.perf_counter()
            if not pg:
                cur.execute("BEGIN IMMEDIATE")
            pids = [s * 8 + k for s in seqs for k in range(6)]
            cur.executemany(f"INSERT INTO redacted_payloads (seq, slot, redaction_seq) "
                            f"VALUES ({ph}, {ph}, {ph})",
                            [(p // 8, p % 8, n + 1) for p in pids])
            cur.executemany(f"DELETE FROM payloads WHERE pid = {ph}", [(p,) for p in pids])
            raw.commit() if pg else cur.execute("COMMIT")
            if not pg:
                cur.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            dt = time.perf_counter() - t0
        finally:
            raw.close()
    return len(seqs) / dt


def redact_rate(url: str) -> tuple[float, int]:
    from ledger.clock import SystemClock
    from ledger.crypto.keys import Keyring

    with Ledger.open(url) as led, tempfile.TemporaryDirectory() as keys:
        ring = Keyring.load(keys)  # redactions are signed by the ledger key
        ring.generate(led.meta.origin, SystemClock().now_us())
        t0 = time.perf_counter()
        out = led.redact(Ask("bench data-subject request"), subject="dsr-a", keyring=ring)
        dt = time.perf_counter() - t0
    return len(out.targets) / dt, len(out.targets)


def run(backends: list[str], scale: float = 1.0) -> list[list[Any]]:
    n = max(int(1_000_000 * scale), 2 * EVERY)
    rows: list[list[Any]] = []
    notes: list[str] = []
    with tempfile.TemporaryDirectory() as tmpdir:
        for kind in available(backends):
            ctx = sqlite_url(Path(tmpdir)) if kind == "sqlite" else pg_url()
            with ctx as url:
                secs = fill(url, n)
                before, _ = audit_rate(url)
                ours, count = redact_rate(url)
                after, rep = audit_rate(url)
                base = raw_delete(url, n)  # last: its deletions are findings, on purpose
                redacted = sum(1 for a in rep.abstentions if a.reason == "redacted")
                rows.append([kind, f"redact --subject ({count:,} entries, entries/s)", ours,
                             base, ours / base, "-"])
                rows.append([kind, f"audit rows/s, {redacted:,} payloads redacted vs none",
                             after, before, after / before, ">= 0.95"])
                notes.append(f"{kind}: {n:,} entries appended in {secs:.0f} s")
    print_table(f"redaction on a {n:,}-entry ledger (ratio = ours / baseline)",
                ["backend", "measure", "ours", "baseline", "ratio", "target"], rows)
    for line in notes:
        print(line)
    return rows
