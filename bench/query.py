"""Queries and exports against baselines measured in the same run (docs/performance.md).

* export rate vs a raw scan of the same rows (the audit's joined page query, writing the
  envelope and payload bytes to a file): target >= 0.5;
* offline verify-export rate vs the audit rate on the same rows: target >= 0.4;
* the proof choice: one inclusion proof per run of consecutive seqs vs one per entry;
* append rate with the five query indexes of migration 0004 vs without them;
* first-page latency of filtered queries on a 1M-row table, and the database's plan of
  the engine + status + time-window query.

The 1M-row table is synthetic: a scratch database created with the migrations
(``Ledger.init``), then rows inserted directly with ``executemany`` in chunks of 10,000
(not through the append path: envelopes and hashes are placeholders, only the queryable
columns are realistic).  PostgreSQL is ANALYZEd after the load (autovacuum would do it);
SQLite is queried as loaded (no ANALYZE).
"""

from __future__ import annotations

import hashlib
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sqlalchemy import text

from bench.common import available, pg_url, print_table, sqlite_url, submissions
from ledger import Ledger
from ledger.clock import format_us
from ledger.crypto.keys import Keyring
from ledger.ops.audit import AuditOptions, run_audit
from ledger.ops.checkpoint import make_checkpoint
from ledger.ops.export import export_bundle, signer_from_keyring
from ledger.ops.query import explain, make_filters, query
from ledger.store.entries import ENTRY_COLUMNS, iter_entry_pages
from ledger.verify.export import verify_export

ORIGIN = "bench.ledger/query"
QUERY_INDEXES = ("ix_entries_engine_status_seq", "ix_entries_subject_seq",
                 "ix_entries_proof_ref_seq", "ix_entries_constraint_id_seq",
                 "ix_entries_att_kid_seq")
ENGINES = ("math", "logic", "code", "sql", "schema", "fact", "stats", "image")
T0 = 1_767_225_600_000_000


def best(repeat: int, fn: Callable[[], float]) -> float:
    return max(fn() for _ in range(repeat))


def _fill(url: str, n: int, batch: int = 2000) -> None:
    with Ledger.init(url, origin=ORIGIN) as led:
        for i in range(0, n, batch):
            led.append_many(submissions(min(batch, n - i), seed=i, start=i))


# -- append cost of the indexes ---------------------------------------------------------
def append_rates(ctx: Callable[[], Any], n: int, singles: int) -> list[list[Any]]:
    subs, one = submissions(n, seed=5), submissions(singles, seed=6, start=n)
    out: dict[bool, list[float]] = {True: [0.0, 0.0], False: [0.0, 0.0]}
    for _ in range(2):
        for with_indexes in (False, True):
            with ctx() as url, Ledger.init(url, origin=ORIGIN) as led:
                if not with_indexes:
                    with led.engine.begin() as conn:
                        for name in QUERY_INDEXES:
                            conn.execute(text(f"DROP INDEX {name}"))
                t0 = time.perf_counter()
                for i in range(0, n, 1000):
                    led.append_many(subs[i:i + 1000])
                batch = n / (time.perf_counter() - t0)
                t0 = time.perf_counter()
                for s in one:
                    led.append(s)
                single = singles / (time.perf_counter() - t0)
            r = out[with_indexes]
            r[0], r[1] = max(r[0], batch), max(r[1], single)
    return [[f"append, batches of 1000 ({n} rows)", out[True][0], out[False][0],
             out[True][0] / out[False][0], ">= 0.9"],
            [f"append, single ({singles} rows)", out[True][1], out[False][1],
             out[True][1] / out[False][1], ">= 0.9"]]


# -- export and verify-export -------------------------------------------------------------
def raw_scan(url: str, n: int, out: Path) -> float:
    with Ledger.open(url) as led, led.engine.connect() as conn, open(out, "wb") as fh:
        t0 = time.perf_counter()
        for page in iter_entry_pages(conn, 0, n):
            for row, blobs in page:
                fh.write(row.envelope)
                for _salt, b in blobs.values():
                    fh.write(b)
        return n / (time.perf_counter() - t0)


def export_rows(url: str, n: int, tmp: Path, signer: Any, proofs: str = "interval") -> float:
    out = tmp / f"b-{time.perf_counter_ns()}"
    with Ledger.open(url) as led:
        t0 = time.perf_counter()
        export_bundle(led, out, signer, make_filters(), proofs=proofs)
        return n / (time.perf_counter() - t0)


def bundle_size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.iterdir())


def export_part(kind: str, url: str, n: int, tmp: Path) -> list[list[Any]]:
    _fill(url, n)
    ring = Keyring.load(tmp / f"keys-{kind}")
    ring.generate(ORIGIN, T0)
    signer = signer_from_keyring(ring, ORIGIN)
    with Ledger.open(url) as led:
        make_checkpoint(led, ring)
    raw = best(3, lambda: raw_scan(url, n, tmp / "raw.bin"))
    exp = best(3, lambda: export_rows(url, n, tmp, signer))
    every = best(2, lambda: export_rows(url, n, tmp, signer, "every"))
    bundle = tmp / f"verify-{kind}"
    with Ledger.open(url) as led:
        export_bundle(led, bundle, signer, make_filters())
        export_bundle(led, tmp / f"every-{kind}", signer, make_filters(), proofs="every")

    def audit() -> float:
        with Ledger.open(url) as led:
            t0 = time.perf_counter()
            run_audit(led, AuditOptions())
            return n / (time.perf_counter() - t0)

    def verify() -> float:
        t0 = time.perf_counter()
        report = verify_export(bundle, ring.path / "jwks.json")
        assert report["outcome"] == "passed", report["findings"][:3]
        return n / (time.perf_counter() - t0)

    aud, ver = best(2, audit), best(2, verify)
    size1, size2 = bundle_size(bundle), bundle_size(tmp / f"every-{kind}")
    return [
        [kind, f"export ({n} rows) vs raw scan", exp, raw, exp / raw, ">= 0.5"],
        [kind, "verify-export vs audit (same rows)", ver, aud, ver / aud, ">= 0.4"],
        [kind, "export --proofs every vs interval", every, exp, every / exp, "-"],
        [kind, "bundle bytes, every vs interval", size2, size1, size2 / size1, "-"],
    ]


# -- 1M rows ----------------------------------------------------------------------------------
def synthetic_rows(start: int, end: int, docs: list[bytes]) -> list[tuple[Any, ...]]:
    rows = []
    for seq in range(start, end):
        h = hashlib.blake2b(seq.to_bytes(8, "big"), digest_size=4).digest()
        r = h[0] % 100
        status = "VERIFIED" if r < 60 else "UNVERIFIABLE" if r < 85 else "BLOCKED"
        engine = ENGINES[h[1] % len(ENGINES)]
        valid = h[2] % 10 == 0
        values = {
            "seq": seq, "kind": "result", "recorded_at": T0 + (seq // 1000) * 100_000,
            "engine": engine, "status": status, "constraint_id": f"{engine}.rule_{h[3] % 37}",
            "proof_ref": f"sha256:{seq:064x}" if status == "VERIFIED" else None,
            "subject": f"req-{seq:08d}", "producer": "bench", "att_verdict":
            "valid" if valid else "none", "att_kid": f"did:bench#k{seq % 4}" if valid else None,
            "att_iss": "did:bench" if valid else None,
            "envelope": b"{}", "body_hash": seq.to_bytes(32, "big"),
            "prev_hash": seq.to_bytes(32, "big"), "entry_hash": seq.to_bytes(32, "big"),
        }
        rows.append(tuple(values.get(c) for c in ENTRY_COLUMNS))
    return rows


def _verified_seq(seq: int) -> int:
    """The first seq >= ``seq`` that synthetic_rows makes VERIFIED (it has a proof_ref)."""
    while hashlib.blake2b(seq.to_bytes(8, "big"), digest_size=4).digest()[0] % 100 >= 60:
        seq += 1
    return seq


def load_big(url: str, n: int) -> float:
    """Fill a scratch ledger's entries table with ``n`` synthetic rows; return seconds."""
    docs = []
    for i in range(16):
        docs.append(b'{"agent_message":"Synthetic result %d","developer_fields":{},'
                    b'"is_authoritative":false,"proof_ref":null,"status":"BLOCKED"}' % i)
    with Ledger.init(url, origin=ORIGIN) as led:
        pg = led.engine.dialect.name == "postgresql"
        ph = "%s" if pg else "?"
        sql = (f"INSERT INTO entries ({', '.join(ENTRY_COLUMNS)}) "
               f"VALUES ({', '.join([ph] * len(ENTRY_COLUMNS))})")
        t0 = time.perf_counter()
        raw = led.engine.raw_connection()
        try:
            cur = raw.cursor()
            if not pg:
                cur.execute("BEGIN")
            psql = f"INSERT INTO payloads (pid, salt, data) VALUES ({ph}, NULL, {ph})"
            for start in range(0, n, 10_000):
                end = min(n, start + 10_000)
                cur.executemany(sql, synthetic_rows(start, end, docs))
                # each entry's document at its slot 0 (payloads are laid out by entry)
                cur.executemany(psql, [(seq * 8, docs[seq % len(docs)])
                                       for seq in range(start, end)])
            raw.commit() if pg else cur.execute("COMMIT")
            if pg:
                cur.execute("ANALYZE entries")
                raw.commit()
        finally:
            raw.close()
        return time.perf_counter() - t0


def latency_ms(url: str, runs: int = 5, **kw: Any) -> float:
    after = kw.pop("after", -1)
    with Ledger.open(url) as led:
        times = []
        for _ in range(runs):
            t0 = time.perf_counter()
            page = query(led.engine, make_filters(**kw), after=after, limit=100,
                         layer="developer")
            times.append((time.perf_counter() - t0) * 1000)
        assert page.rows, kw
    return statistics.median(times)


def big_part(kind: str, url: str, n: int) -> tuple[list[list[Any]], list[str], float]:
    secs = load_big(url, n)
    window = {"since": format_us(T0 + n * 40), "until": format_us(T0 + n * 60)}
    cases = [
        ("engine + status + time window (first page)",
         dict(engine="math", status="BLOCKED", **window)),
        ("engine + status, deep page (after 90%)",
         dict(engine="math", status="BLOCKED", after=n * 9 // 10)),
        ("subject", dict(subject=f"req-{n // 2:08d}")),
        ("proof_ref", dict(proof_ref=f"sha256:{_verified_seq(n // 2):064x}")),
        ("constraint_id", dict(constraint_id="sql.rule_5")),
        ("att_kid", dict(att_kid="did:bench#k1")),
        ("status only (no index: seq order)", dict(status="BLOCKED")),
        ("time window only", dict(**window)),
    ]
    rows = []
    for label, kw in cases:
        try:
            ms = latency_ms(url, **dict(kw))
        except AssertionError:  # the synthetic value did not occur: skip, say so
            rows.append([kind, label, "no rows"])
            continue
        rows.append([kind, label, ms])
    with Ledger.open(url) as led:
        plan = explain(led.engine, make_filters(engine="math", status="BLOCKED", **window),
                       limit=100, layer="developer")
    return rows, plan, secs


def append_at_scale(url: str, n: int, k: int) -> list[Any]:
    """Append rate (batches of 1000) on the ``n``-row table with the query indexes, then
    after dropping them (same table, ``k`` more rows each time)."""
    with Ledger.open(url) as led, led.engine.begin() as conn:
        conn.execute(text("UPDATE head SET size = :n, head_hash = :h, last_recorded_at = :t"),
                     {"n": n, "h": (n - 1).to_bytes(32, "big"), "t": T0 + n * 100})
    rates = []
    for step in range(2):
        subs = submissions(k, seed=7 + step, start=n + step * k)
        with Ledger.open(url) as led:
            if step:
                with led.engine.begin() as conn:
                    for name in QUERY_INDEXES:
                        conn.execute(text(f"DROP INDEX {name}"))
            t0 = time.perf_counter()
            for i in range(0, k, 1000):
                led.append_many(subs[i:i + 1000])
            rates.append(k / (time.perf_counter() - t0))
    return [f"append on {n:,} rows, batches of 1000", rates[0], rates[1],
            rates[0] / rates[1], ">= 0.9"]


def run(backends: list[str], scale: float = 1.0) -> list[list[Any]]:
    n, n_big = int(20_000 * scale), int(1_000_000 * scale)
    n_append, singles = int(10_000 * scale), int(500 * scale)
    rates: list[list[Any]] = []
    latencies: list[list[Any]] = []
    plans: list[tuple[str, list[str], float]] = []
    with tempfile.TemporaryDirectory() as tmpdir:
        tmp = Path(tmpdir)
        for kind in available(backends):

            def ctx(kind: str = kind) -> Any:
                return sqlite_url(tmp) if kind == "sqlite" else pg_url()

            with ctx() as url:
                rates += export_part(kind, url, n, tmp)
            rates += [[kind, *r] for r in append_rates(ctx, n_append, singles)]
            with ctx() as url:
                rows, plan, secs = big_part(kind, url, n_big)
                latencies += rows
                plans.append((kind, plan, secs))
                rates.append([kind, *append_at_scale(url, n_big, n_append)])
    print_table("exports and verification (rows/s; ratio = ours / baseline)",
                ["backend", "measure", "ours", "baseline", "ratio", "target"], rates)
    print_table(f"first page (100 rows, developer layer) on {n_big:,} rows: median ms of 5",
                ["backend", "query", "ms"], latencies)
    for kind, plan, secs in plans:
        print(f"\n{kind}: {n_big:,} synthetic rows loaded in {secs:.0f} s; plan of "
              "engine + status + time window, first page:")
        for line in plan:
            print("   ", line)
    return rates + latencies
