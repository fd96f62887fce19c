"""The growth curve: one ledger per engine grown through several sizes, measured at each.

    scripts/bench scale --sizes 1000000,3000000,10000000 --backend sqlite,postgresql

One ledger per engine is filled to the first size, measured, filled on to the next size,
measured again, and so on (so the sizes share one history, as a ledger's do).  At each
size:

* **bytes per entry**: the database's bytes over the entries (SQLite: used pages after a
  WAL checkpoint; PostgreSQL: ``pg_total_relation_size`` of every table), and of them the
  indexes' (what appends and reads keep hot) and the stored Merkle nodes' (``merkle_nodes``);
* **append rate at that size**: 2,000 more realistic submissions through ``append_many``
  in batches of 500, and 200 single ``append`` calls (appends/s and their median ms);
* **proof latency** p50/p99 (ms) of 300 random entries: from the database
  (``ops.checkpoint.inclusion_proof``: the O(log n) node read) and from tiles (the reader
  client's tile code, ``ledger.client.reader_tiles``, answered by the tile reads of
  ``ledger serve``, ``ops.tiles.tile_bytes``, in process: every tile the proof needs is
  read, checked against the signed root and folded, per proof, with no cache);
* **query page latency** p50/p99 (ms): first page of 100 (developer layer) for
  engine + status, the same 90 % deep, and a subject lookup, 20 runs each;
* **audit rows/s**: the last ``AUDIT_SAMPLE`` entries (the same sample size at every size,
  so the rate is comparable; the whole ledger too while it has at most ``--full-audit``
  entries);
* tree sync and checkpoint time, and the tile storage the size implies (hash tiles:
  32 bytes per node of levels 0, 8, 16, ...; entry bundles: the mean of sampled full
  bundles times the bundles).

**The fill** goes through the append path's own code (``validate_items``, ``Prepared.seal``,
``BatchWriter`` in one ``append_transaction`` per 20,000 entries), so every entry, link,
payload row and index entry is what an append writes, and the audit passes.  To fill
fast, the submissions are a pool of ``POOL`` distinct validated submissions of the
realistic mix (``ledger.demo.samples.realistic``: six engines and shapes) that the fill
cycles through; each copy gets its own subject (``req-<seq>``) and is sealed again (fresh
salts, so every payload commitment, envelope and entry hash is distinct), but its
evidence, preimage and ``proof_ref`` repeat every ``POOL`` entries: an index on
``proof_ref`` holds ``POOL`` distinct values (PostgreSQL deduplicates repeated keys, so
that one index is smaller than with all-distinct values).  The measured appends are
fresh submissions.  Each fill step's duration is printed.
"""

from __future__ import annotations

import os
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Generator, Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

from sqlalchemy import create_engine

from bench.common import available, pg_url, print_table, sqlite_url
from ledger import Ledger
from ledger.client.reader_tiles import TreeTiles, inclusion_path_from_tiles
from ledger.core.merkle import leaf_hash, verify_inclusion
from ledger.core.tiles import HASH_SIZE, TILE_WIDTH, Tile, level_width, parse_tile_path, tree_levels
from ledger.crypto.keys import Keyring
from ledger.demo.samples import realistic
from ledger.ops.append import BatchWriter, Prepared, validate_items
from ledger.ops.audit import AuditOptions, run_audit
from ledger.ops.checkpoint import inclusion_proof, sync_tree, tree_root
from ledger.ops.query import make_filters, query
from ledger.ops.tiles import entry_bundle, tile_bytes
from ledger.store.append import append_transaction
from ledger.store.db import normalize_url

DEFAULT_SIZES = (20_000, 60_000)
POOL = 50_000
CHUNK = 20_000
PRODUCER = "bench-fill"
ORIGIN = "bench.ledger/scale"
APPENDS, APPEND_BATCH, SINGLES = 2_000, 500, 200
PROOFS = 300
PAGE_RUNS = 20
AUDIT_SAMPLE = 200_000
BUNDLE_SAMPLES = 4


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


# -- the fill --------------------------------------------------------------------------------
def make_pool(L: Ledger, n: int) -> list[Prepared]:
    prepared, rejected = validate_items(realistic(n, seed=11), PRODUCER, L.ctx.ledger_id)
    assert not rejected, rejected[:1]
    return prepared


def copy_of(p: Prepared, seq: int, ledger_id: str) -> Prepared:
    """Template ``p`` as the submission of ``seq``: its own subject, sealed again."""
    fields = dict(p.fields)
    fields["subject"] = f"req-{seq:09d}"
    q = replace(p, fields=fields, payloads=dict(p.payloads), salts={}, sealed={}, digests={},
                envelope=b"", stored={k: v for k, v in p.stored.items() if k != "subject"})
    return q.seal(ledger_id)


def ledger_size(L: Ledger) -> int:
    return int(L.head()["size"])


def bulk_fill(L: Ledger, pool: list[Prepared], target: int) -> float:
    """Grow the ledger to ``target`` entries; return seconds."""
    ctx = L.ctx
    start = ledger_size(L)
    t0 = time.perf_counter()
    for i in range(start, target, CHUNK):
        j = min(target, i + CHUNK)
        prepared = [copy_of(pool[seq % len(pool)], seq, ctx.ledger_id) for seq in range(i, j)]
        with append_transaction(ctx.engine) as txn:
            writer = BatchWriter(txn, ctx.ledger_id, ctx.clock)
            results = writer.add(prepared)
            writer.finish()
        assert all(r.ok for r in results)
        if (j // CHUNK) % 25 == 0:
            log(f"  filled {j:,}")
    return time.perf_counter() - t0


# -- storage ---------------------------------------------------------------------------------
def storage(L: Ledger) -> dict[str, int]:
    """Bytes: ``total`` (every table and index), ``indexes``, ``nodes`` (merkle_nodes)."""
    eng = create_engine(normalize_url(str(L.engine.url.render_as_string(hide_password=False))),
                        isolation_level="AUTOCOMMIT")
    try:
        with eng.connect() as conn:
            if eng.dialect.name == "sqlite":
                conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
                page = conn.exec_driver_sql("PRAGMA page_size").scalar_one()
                used = conn.exec_driver_sql("PRAGMA page_count").scalar_one() - \
                    conn.exec_driver_sql("PRAGMA freelist_count").scalar_one()
                names = [r[0] for r in conn.exec_driver_sql(
                    "SELECT name FROM sqlite_master WHERE type = 'index'")]

                def btree(name: str) -> int:
                    return int(conn.exec_driver_sql(
                        "SELECT COALESCE(SUM(pgsize), 0) FROM dbstat WHERE name = ? "
                        "AND aggregate = 1", (name,)).scalar_one())

                return {"total": int(page * used), "indexes": sum(btree(n) for n in names),
                        "nodes": btree("merkle_nodes")}
            total, indexes = conn.exec_driver_sql(
                "SELECT SUM(pg_total_relation_size(c.oid)), SUM(pg_indexes_size(c.oid)) "
                "FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
                "WHERE n.nspname = current_schema() AND c.relkind = 'r'").one()
            nodes = conn.exec_driver_sql(
                "SELECT pg_total_relation_size('merkle_nodes')").scalar_one()
            return {"total": int(total), "indexes": int(indexes), "nodes": int(nodes)}
    finally:
        eng.dispose()


def tile_storage(L: Ledger, size: int) -> tuple[int, int]:
    """(hash tile bytes, entry bundle bytes) of a tile directory of ``size`` entries; the
    bundles estimated from ``BUNDLE_SAMPLES`` full bundles read through ``ledger serve``'s
    code."""
    hashes = sum(level_width(size, level) * HASH_SIZE for level in tree_levels(size))
    full = size // TILE_WIDTH
    if not full:
        return hashes, 0
    rng = random.Random(3)
    sampled = [len(entry_bundle(L.ctx, Tile(None, rng.randrange(full)), size))
               for _ in range(BUNDLE_SAMPLES)]
    return hashes, int(statistics.mean(sampled) * size / TILE_WIDTH)


# -- latencies -------------------------------------------------------------------------------
def pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(q * len(s)))]


def timed(fn: Callable[[], Any]) -> float:
    t0 = time.perf_counter()
    fn()
    return (time.perf_counter() - t0) * 1000


def db_proofs(L: Ledger, size: int, seqs: list[int]) -> list[float]:
    return [timed(lambda s=s: inclusion_proof(L.ctx, s, size)) for s in seqs]


def _drive(flow: Generator[Any, Any, Any], answer: Callable[[str], bytes]) -> Any:
    reply: Any = None
    while True:
        try:
            step = flow.send(reply)
        except StopIteration as stop:
            return stop.value
        reply = (200, answer(step.path))


def tile_proofs(L: Ledger, size: int, root: bytes, seqs: list[int]) -> list[float]:
    """Each proof as the reader client computes it from tiles (no tile cache between
    proofs), the tiles read as ``ledger serve`` reads them; checked against the root."""
    def answer(path: str) -> bytes:
        return tile_bytes(L.ctx, parse_tile_path(path), size)

    with L.engine.connect() as conn:
        hashes = dict(conn.exec_driver_sql(
            f"SELECT seq, entry_hash FROM entries WHERE seq IN ({', '.join(map(str, seqs))})"
        ).all())
    out = []
    for s in seqs:
        t0 = time.perf_counter()
        path = _drive(inclusion_path_from_tiles(TreeTiles(size, root), s), answer)
        verify_inclusion(s, size, leaf_hash(bytes(hashes[s])), path, root)
        out.append((time.perf_counter() - t0) * 1000)
    return out


def page_latencies(L: Ledger, size: int, filled: int) -> dict[str, list[float]]:
    """``filled``: the fill wrote every seq below it (subjects ``req-<seq>``)."""
    rng = random.Random(5)
    cases: dict[str, Callable[[], dict[str, Any]]] = {
        "engine+status": lambda: {"engine": "math", "status": "VERIFIED"},
        "deep": lambda: {"engine": "math", "status": "VERIFIED", "after": size * 9 // 10},
        "subject": lambda: {"subject": f"req-{rng.randrange(filled):09d}"},
    }
    out: dict[str, list[float]] = {}
    for name, make in cases.items():
        times = []
        for _ in range(PAGE_RUNS):
            kw = make()
            after = kw.pop("after", -1)
            t0 = time.perf_counter()
            page = query(L.ctx, make_filters(**kw), after=after, limit=100, layer="developer")
            times.append((time.perf_counter() - t0) * 1000)
            assert page.rows, (name, kw)
        out[name] = times
    return out


def append_rates(L: Ledger, size: int) -> tuple[float, float, float]:
    """(batched rows/s, single appends/s, single append median ms) at ``size``."""
    subs = realistic(APPENDS + SINGLES, seed=size % 9973, start=size)
    t0 = time.perf_counter()
    for i in range(0, APPENDS, APPEND_BATCH):
        res = L.append_many(subs[i:i + APPEND_BATCH], producer="bench-append")
        assert all(r.ok for r in res)
    batched = APPENDS / (time.perf_counter() - t0)
    singles = [timed(lambda s=s: L.append(s, producer="bench-append"))
               for s in subs[APPENDS:]]
    return batched, 1000 / statistics.mean(singles), statistics.median(singles)


def audit_rate(L: Ledger, start: int, end: int) -> float:
    t0 = time.perf_counter()
    rep = run_audit(L.ctx, AuditOptions(start=start, end=end))
    dt = time.perf_counter() - t0
    assert rep.outcome == "passed", rep.summary
    return float(rep.summary.rows / dt)


# -- one engine ------------------------------------------------------------------------------
@contextmanager
def database(kind: str, tmp: Path) -> Iterator[str]:
    ctx = sqlite_url(tmp) if kind == "sqlite" else pg_url()
    with ctx as url:
        yield url


def measure(kind: str, L: Ledger, ring: Keyring, size: int, fill_s: float,
            full_audit: int, filled: int) -> dict[str, Any]:
    row: dict[str, Any] = {"backend": kind, "size": size, "fill_s": fill_s}
    t0 = time.perf_counter()
    if kind == "postgresql":  # as autovacuum would after a load: the planner's statistics
        with L.engine.connect() as conn:
            conn.exec_driver_sql("ANALYZE")
            conn.commit()
    row["analyze_s"] = time.perf_counter() - t0
    row["sync_s"] = timed(lambda: sync_tree(L.engine)) / 1000
    row["checkpoint_ms"] = timed(lambda: L.checkpoint(ring))
    cp = L.latest_checkpoint()
    assert cp is not None and cp.size == size
    log(f"{kind} {size:,}: tree sync {row['sync_s']:.1f} s, checkpoint "
        f"{row['checkpoint_ms']:.0f} ms")
    st = storage(L)
    row.update(bytes=st["total"] / size, index_bytes=st["indexes"] / size,
               nodes_mib=st["nodes"] / 2**20, total_gib=st["total"] / 2**30)
    row["tile_hash_mib"], row["bundle_mib"] = (b / 2**20 for b in tile_storage(L, size))
    rng = random.Random(size)
    seqs = [rng.randrange(size) for _ in range(PROOFS)]
    db = db_proofs(L, size, seqs)
    root = tree_root(L.ctx, size)
    tiles = tile_proofs(L, size, root, seqs)
    row.update(proof_db=(pct(db, 0.5), pct(db, 0.99)), proof_tiles=(pct(tiles, 0.5),
                                                                    pct(tiles, 0.99)))
    pages = page_latencies(L, size, filled)
    every = [t for ts in pages.values() for t in ts]
    row.update(page={k: pct(v, 0.5) for k, v in pages.items()},
               page_all=(pct(every, 0.5), pct(every, 0.99)))
    log(f"{kind} {size:,}: storage, proofs and pages measured")
    sample = min(size, AUDIT_SAMPLE)
    row["audit_sample"] = audit_rate(L, size - sample, size)
    row["audit_full"] = audit_rate(L, 0, size) if size <= full_audit and size > sample \
        else (row["audit_sample"] if size == sample else None)
    log(f"{kind} {size:,}: audit measured")
    row["append_batch"], row["append_single"], row["append_single_ms"] = append_rates(L, size)
    return row


def run_engine(kind: str, sizes: list[int], tmp: Path, full_audit: int) -> list[dict[str, Any]]:
    rows = []
    t_engine = time.perf_counter()
    with database(kind, tmp) as url, Ledger.init(url, origin=ORIGIN) as L:
        ring = Keyring.load(tmp / f"keys-{kind}-{os.getpid()}")
        ring.generate(ORIGIN, L.clock.now_us())
        pool = make_pool(L, min(POOL, sizes[-1]))
        for size in sizes:
            have = ledger_size(L)
            if have > size:
                raise SystemExit(f"sizes must grow by more than {APPENDS + SINGLES} each")
            log(f"{kind}: filling {have:,} -> {size:,}")
            fill_s = bulk_fill(L, pool, size)
            log(f"{kind}: filled to {size:,} in {fill_s:.0f} s")
            t0 = time.perf_counter()
            row = measure(kind, L, ring, size, fill_s, full_audit, sizes[0])
            row["measure_s"] = time.perf_counter() - t0
            rows.append(row)
            print_rows(rows)
        rows[-1]["engine_s"] = time.perf_counter() - t_engine
    log(f"{kind}: done in {rows[-1]['engine_s']:.0f} s")
    return rows


# -- report ----------------------------------------------------------------------------------
def _pair(p: tuple[float, float]) -> str:
    return f"{p[0]:.2f} / {p[1]:.2f}"


def print_rows(rows: list[dict[str, Any]]) -> None:
    table = []
    for r in rows:
        full = "-" if r["audit_full"] is None else f"{r['audit_full']:,.0f}"
        table.append([r["backend"], f"{r['size']:,}", f"{r['fill_s']:.0f}",
                      f"{r['bytes']:,.0f}", f"{r['index_bytes']:,.0f}",
                      f"{r['nodes_mib']:,.1f}", f"{r['append_batch']:,.0f}",
                      f"{r['append_single']:,.0f} ({r['append_single_ms']:.1f} ms)",
                      _pair(r["proof_db"]), _pair(r["proof_tiles"]), _pair(r["page_all"]),
                      f"{r['audit_sample']:,.0f}", full])
    print_table("growth curve (fill s: the step's bulk fill; bytes and index bytes per entry; "
                "proofs and pages: p50 / p99 ms; audit rows/s of the last "
                f"{AUDIT_SAMPLE:,} entries, and of the whole ledger where run)",
                ["backend", "entries", "fill s", "B/entry", "idx B/entry", "nodes MiB",
                 "append rows/s (500s)", "single appends/s", "proof db ms",
                 "proof tiles ms", "page ms", "audit rows/s", "full audit rows/s"], table)
    detail = [[r["backend"], f"{r['size']:,}", f"{r['total_gib']:.2f}",
               f"{r['tile_hash_mib']:,.1f}", f"{r['bundle_mib']:,.0f}",
               *(f"{v:.2f}" for v in r["page"].values()), f"{r['sync_s']:.1f}",
               f"{r['checkpoint_ms']:.0f}", f"{r['analyze_s']:.1f}", f"{r['measure_s']:.0f}"]
              for r in rows if "measure_s" in r]
    if detail:
        print_table("detail (db GiB; tile storage MiB: hash tiles, entry bundles; page p50 ms "
                    "by query; tree sync s; checkpoint ms; ANALYZE s; measuring s)",
                    ["backend", "entries", "db GiB", "hash tiles MiB", "bundles MiB",
                     *(f"page {k}" for k in rows[0]["page"]), "sync s", "checkpoint ms",
                     "analyze s", "measure s"], detail)
    sys.stdout.flush()  # the tables of a long run show up in its log as they are made


def ratios(rows: list[dict[str, Any]]) -> None:
    out = []
    for kind in dict.fromkeys(r["backend"] for r in rows):
        mine = [r for r in rows if r["backend"] == kind]
        if len(mine) < 2:
            continue
        a, b = mine[0], mine[-1]
        label = f"{b['size']:,} vs {a['size']:,}"
        out += [
            [kind, label, "append rows/s (smallest / largest)",
             a["append_batch"] / b["append_batch"], "<= 1.5"],
            [kind, label, "single append ms (largest / smallest)",
             b["append_single_ms"] / a["append_single_ms"], "<= 1.5"],
            [kind, label, "proof db p50 (largest / smallest)", b["proof_db"][0] / a["proof_db"][0],
             "<= 1.5"],
            [kind, label, "proof tiles p50 (largest / smallest)",
             b["proof_tiles"][0] / a["proof_tiles"][0], "<= 1.5"],
            [kind, label, "page p50 (largest / smallest)", b["page_all"][0] / a["page_all"][0],
             "<= 1.5"],
            [kind, label, "audit rows/s (largest / smallest)",
             b["audit_sample"] / a["audit_sample"], "~ 1.0 (flat)"],
        ]
    if out:
        print_table("against the targets", ["backend", "sizes", "measure", "ratio", "target"],
                    [[k, s, m, f"{v:.2f}", t] for k, s, m, v, t in out])


def run(backends: list[str], sizes: list[int] | None = None, full_audit: int = 1_000_000,
        tmp_dir: str | None = None) -> list[dict[str, Any]]:
    sizes = sorted(sizes or DEFAULT_SIZES)
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(dir=tmp_dir) as tmp:
        for kind in available(backends):
            rows += run_engine(kind, sizes, Path(tmp), full_audit)
    print_rows(rows)
    ratios(rows)
    for r in rows:
        if "engine_s" in r:
            print(f"{r['backend']}: the whole run (fills and measures) took {r['engine_s']:.0f} s")
    return rows
