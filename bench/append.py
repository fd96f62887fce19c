"""Append throughput: single appends and batches of 1000, against raw driver inserts.

Raw baseline = the very rows the ledger stored (entry row + its payload rows),
inserted with the driver (``sqlite3`` / psycopg), no lock, no validation, no
hashing: one commit per submission ("single") or per 1000 ("batched").
Durability is the same on both sides: SQLite WAL + synchronous=FULL, PostgreSQL
defaults (fsync on, synchronous_commit on).
"""

from __future__ import annotations

import multiprocessing as mp
import os
import sqlite3
import tempfile
import time
from pathlib import Path
from typing import Any

import psycopg
from sqlalchemy import select

from bench.common import available, pg_url, print_table, rate, sqlite_url, submissions
from ledger import Ledger
from ledger.store.schema import entries, payloads

BATCH = 1000


def _stored_rows(subs: list[bytes]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    with tempfile.TemporaryDirectory() as tmp, sqlite_url(Path(tmp)) as url:
        with Ledger.init(url) as L:
            for i in range(0, len(subs), BATCH):
                L.append_many(subs[i:i + BATCH])
            with L.engine.connect() as conn:
                erows = [dict(r._mapping) for r in conn.execute(select(entries)
                                                                 .order_by(entries.c.seq))]
                prows = [dict(r._mapping) for r in conn.execute(select(payloads))]
    by_seq: dict[int, list[dict[str, Any]]] = {}
    for p in prows:  # payloads by entry: pid = seq * 8 + slot
        by_seq.setdefault(p["pid"] // 8, []).append(p)
    return erows, [by_seq.get(e["seq"], []) for e in erows]


def _cols() -> list[str]:
    return [c.name for c in entries.columns]


def _raw_sqlite(path: str, erows, prows, batch: int) -> None:
    cols = _cols()
    ins_e = f"INSERT INTO entries ({','.join(cols)}) VALUES ({','.join('?' * len(cols))})"
    ins_p = "INSERT INTO payloads (pid, salt, data) VALUES (?, ?, ?)"
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=FULL")
    for i in range(0, len(erows), batch):
        conn.execute("BEGIN")
        conn.executemany(ins_e, [tuple(r[c] for c in cols) for r in erows[i:i + batch]])
        conn.executemany(ins_p, [(p["pid"], p["salt"], p["data"]) for ps in prows[i:i + batch]
                                 for p in ps])
        conn.execute("COMMIT")
    conn.close()


def _raw_pg(url: str, erows, prows, batch: int) -> None:
    cols = _cols()
    ins_e = f"INSERT INTO entries ({','.join(cols)}) VALUES ({','.join(['%s'] * len(cols))})"
    ins_p = "INSERT INTO payloads (pid, salt, data) VALUES (%s, %s, %s)"
    with psycopg.connect(url.replace("postgresql+psycopg://", "postgresql://")) as conn:
        for i in range(0, len(erows), batch):
            with conn.cursor() as cur:
                cur.executemany(ins_e, [tuple(r[c] for c in cols) for r in erows[i:i + batch]])
                cur.executemany(ins_p, [(p["pid"], p["salt"], p["data"])
                                        for ps in prows[i:i + batch] for p in ps])
            conn.commit()


def _fresh(kind: str, tmp: Path):
    return sqlite_url(tmp) if kind == "sqlite" else pg_url()


def _measure(kind: str, tmp: Path, subs: list[bytes], erows, prows, batch: int,
             ) -> tuple[float, float]:
    n = len(subs)
    with _fresh(kind, tmp) as url:
        Ledger.init(url).close()
        if kind == "sqlite":
            raw = rate(n, lambda: _raw_sqlite(url.removeprefix("sqlite:///"), erows, prows,
                                              batch))
        else:
            raw = rate(n, lambda: _raw_pg(url, erows, prows, batch))
    with _fresh(kind, tmp) as url, Ledger.init(url) as L:
        if batch == 1:
            ours = rate(n, lambda: [L.append(s) for s in subs])
        else:
            ours = rate(n, lambda: [L.append_many(subs[i:i + batch])
                                    for i in range(0, n, batch)])
    return ours, raw


def _pooled(kind: str, tmp: Path, subs: list[bytes], workers: int) -> float:
    """Batched appends with the validation pool (LEDGER_VALIDATE_WORKERS=workers); the
    pool is started before the clock runs (a long-lived process pays that once)."""
    from ledger.ops import append as append_ops

    n = len(subs)
    old = os.environ.get("LEDGER_VALIDATE_WORKERS")
    os.environ["LEDGER_VALIDATE_WORKERS"] = str(workers)
    try:
        append_ops.validate_batch(subs[:BATCH], None, "warm-up", append_ops.default_judge)
        with _fresh(kind, tmp) as url, Ledger.init(url) as L:
            return rate(n, lambda: [L.append_many(subs[i:i + BATCH])
                                    for i in range(0, n, BATCH)])
    finally:
        append_ops.shutdown_pool()
        if old is None:
            os.environ.pop("LEDGER_VALIDATE_WORKERS", None)
        else:
            os.environ["LEDGER_VALIDATE_WORKERS"] = old


def _writer(url: str, subs: list[bytes], barrier, out) -> None:
    with Ledger.open(url) as L:
        barrier.wait()
        t0 = time.perf_counter()
        for s in subs:
            L.append(s)
        out.put(time.perf_counter() - t0)


def _concurrent(n: int, writers: int) -> tuple[float, float]:
    """Total rows/s of ``writers`` processes vs one, single appends on PostgreSQL."""
    rates = []
    for w in (1, writers):
        per = n // w
        subs = submissions(per * w, seed=11)
        with pg_url() as url:
            Ledger.init(url).close()
            ctx = mp.get_context("spawn")
            barrier, out = ctx.Barrier(w), ctx.Queue()
            procs = [ctx.Process(target=_writer, args=(url, subs[i * per:(i + 1) * per],
                                                       barrier, out)) for i in range(w)]
            for p in procs:
                p.start()
            times = [out.get(timeout=600) for _ in procs]
            for p in procs:
                p.join()
            rates.append(per * w / max(times))
    return rates[1], rates[0]


def run(backends: list[str], scale: float = 1.0) -> list[list[Any]]:
    n_single = int(1000 * scale)
    n_batch = int(20000 * scale)
    rows: list[list[Any]] = []
    single_subs, batch_subs = submissions(n_single), submissions(n_batch, seed=2)
    single_rows, batch_rows = _stored_rows(single_subs), _stored_rows(batch_subs)
    with tempfile.TemporaryDirectory() as tmp:
        for kind in available(backends):
            ours, raw = _measure(kind, Path(tmp), single_subs, *single_rows, batch=1)
            rows.append([kind, "single append (1 commit each)", ours, raw, ours / raw, ">= 0.6"])
            ours, raw = _measure(kind, Path(tmp), batch_subs, *batch_rows, batch=BATCH)
            rows.append([kind, f"batched append ({BATCH}/commit)", ours, raw, ours / raw,
                         ">= 0.6"])
            pooled = _pooled(kind, Path(tmp), batch_subs, 1)
            rows.append([kind, "  same, validation pool of 1 worker", pooled, raw, pooled / raw,
                         "info"])
            if kind == "postgresql":
                four, one = _concurrent(int(2000 * scale), 4)
                rows.append([kind, "4 writers vs 1 (single appends)", four, one, four / one,
                             ">= 1.5"])
    print_table("append throughput (rows/s; ratio = ledger / raw baseline)",
                ["backend", "mode", "ledger", "baseline", "ratio", "target"], rows)
    return rows
