"""Tenants: appends of several tenants in parallel, and the audit of one tenant.

1. Single appends (one transaction each) by writer processes: one writer of one tenant, two
   writers of two tenants, four writers of four tenants, four writers of one tenant --
   entries/s and the ratio to one writer, in the same run (docs/tenants.md: the target is four
   tenants >= 2x one writer), with the share of the machine's CPU busy during each run
   (Linux ``/proc/stat``: every process, the database server's included).  The last column,
   ``1 / busy`` of the single writer, is the most any number of writers could reach over it
   on this machine were nothing serialised: what one writer leaves idle.
2. A ledger of four tenants (equal shares, appended in batches): the whole audit against
   ``ledger audit --tenant`` of one tenant -- rows/s and time.
"""

from __future__ import annotations

import multiprocessing as mp
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.common import available, pg_url, print_table, sqlite_url, submissions
from ledger import Ledger

TENANTS = ["t0", "t1", "t2", "t3"]


def _writer(url: str, tenant: str, subs: list[bytes], start: Any, done: Any) -> None:
    with Ledger.open(url) as L:
        start.wait()
        for s in subs:
            r = L.append(s, tenant=tenant)
            assert r.ok, r.error
    done.put(len(subs))


def _cpu() -> tuple[int, int] | None:
    """(total, idle) jiffies of all CPUs since boot; None where /proc/stat is not."""
    try:
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:9]]
    except OSError:
        return None
    return sum(v), v[3] + v[4]


def _parallel(url: str, plan: list[tuple[str, list[bytes]]]) -> tuple[float, float | None]:
    """(entries/s, share of the machine's CPU busy) of the writers of ``plan`` (tenant,
    submissions), started together."""
    ctx = mp.get_context("spawn")
    start, done = ctx.Event(), ctx.Queue()
    procs = [ctx.Process(target=_writer, args=(url, t, subs, start, done)) for t, subs in plan]
    for p in procs:
        p.start()
    time.sleep(2.0)  # every writer has opened its ledger
    before = _cpu()
    t0 = time.perf_counter()
    start.set()
    n = sum(done.get() for _ in procs)
    elapsed = time.perf_counter() - t0
    after = _cpu()
    for p in procs:
        p.join()
    busy = None
    if before is not None and after is not None and after[0] > before[0]:
        busy = 1 - (after[1] - before[1]) / (after[0] - before[0])
    return n / elapsed, busy


def _appends(url_of: Any, n: int) -> list[list[Any]]:
    subs = submissions(n, seed=7)
    rows = []
    cases = [("1 writer, 1 tenant", [("t0", subs)]),
             ("2 writers, 2 tenants", [(t, subs[i::2]) for i, t in enumerate(TENANTS[:2])]),
             ("4 writers, 4 tenants", [(t, subs[i::4]) for i, t in enumerate(TENANTS)]),
             ("4 writers, 1 tenant", [("t0", subs[i::4]) for i in range(4)])]
    base = None
    for name, plan in cases:
        with url_of() as url:
            Ledger.init(url).close()
            got, busy = _parallel(url, plan)
            with Ledger.open(url) as L:
                assert L.audit().findings == ()
        if base is None:
            base = got
            ceiling = f"{1 / busy:.2f}" if busy else "-"
        else:
            ceiling = ""
        rows.append([name, got, got / base, "-" if busy is None else f"{busy:.0%}", ceiling])
    return rows


def _audit(url_of: Any, n: int) -> list[list[Any]]:
    subs = submissions(n, seed=9)
    with url_of() as url, Ledger.init(url) as L:
        for i, t in enumerate(TENANTS):
            part = subs[i::4]
            for j in range(0, len(part), 1000):
                L.append_many(part[j:j + 1000], tenant=t)
        t0 = time.perf_counter()
        whole = L.audit()
        t_whole = time.perf_counter() - t0
        t0 = time.perf_counter()
        one = L.audit_tenant("t1")
        t_one = time.perf_counter() - t0
        assert whole.findings == () and one.findings == ()
        return [["whole ledger", whole.summary.rows, t_whole, whole.summary.rows / t_whole, 1.0],
                ["one tenant (--tenant t1)", one.summary.rows, t_one, one.summary.rows / t_one,
                 t_one / t_whole]]


def run(backends: list[str], scale: float) -> None:
    n_app, n_audit = int(2000 * scale), int(40000 * scale)
    for kind in available(backends):
        with tempfile.TemporaryDirectory() as tmp:
            def url_of(kind: str = kind, tmp: str = tmp) -> Any:
                return sqlite_url(Path(tmp)) if kind == "sqlite" else pg_url()

            print_table(f"tenants, {kind}: {n_app} single appends (one transaction each)",
                        ["writers", "entries/s", "x one writer", "CPU busy", "1 / busy"],
                        _appends(url_of, n_app))
            print_table(f"tenants, {kind}: audit of {n_audit} entries of 4 tenants",
                        ["audit", "rows", "seconds", "rows/s", "time vs whole"],
                        _audit(url_of, n_audit))
