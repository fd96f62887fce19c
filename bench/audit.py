"""Audit throughput against raw baselines measured in the same run, and memory.

* rows without attestations vs a raw scan that streams the same rows (the same
  joined query, same page size) and SHA-256s the same bytes (envelope and payloads);
* rows without attestations vs the *physical* baseline: the same bytes the audit hashes
  (each entry's envelope and payloads) stored in one table in seq order, scanned with
  the same driver (sqlite3 / psycopg, no ORM; psycopg in the binary format, as the audit
  reads, and for comparison with earlier runs also in the text format) and one SHA-256
  per part, in the same run;
* attested rows vs the raw ES256 verify rate per core (pyjwt, same tokens);
* ``--workers 2`` vs one worker;
* peak RSS of an audit process at two ledger sizes (the ratio shows whether
  memory grows with the ledger).
"""

from __future__ import annotations

import hashlib
import json
import multiprocessing as mp
import resource
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import jwt
from cryptography.hazmat.primitives.asymmetric import ec

from bench.common import available, pg_url, print_table, sqlite_url, submissions
from ledger import DiagnosticResult, Ledger
from ledger.clock import FixedClock
from ledger.ops.audit import AuditOptions, run_audit
from ledger.store import codec
from ledger.store.entries import iter_entry_pages

ISSUER = "did:qwed:node:bench"
ROUNDS = 3


def fill(url: str, n: int, batch: int = 2000) -> None:
    with Ledger.init(url) as L:
        for i in range(0, n, batch):
            subs = submissions(min(batch, n - i), seed=i, start=i)
            L.append_many(subs)


def raw_scan(url: str, n: int) -> float:
    """Stream the same rows with the same reader as the audit and SHA-256 the same bytes."""
    with Ledger.open(url) as L, L.engine.connect() as conn:
        t0 = time.perf_counter()
        count = 0
        for page in iter_entry_pages(conn, 0, n):  # as the audit reads
            for row, blobs in page:
                hashlib.sha256(row.envelope).digest()
                for b in blobs.values():
                    hashlib.sha256(b[1] if isinstance(b, tuple) else b).digest()
                count += 1
        return count / (time.perf_counter() - t0)


PHYSICAL = "bench_physical"
_PARTS = 6  # at most six payloads per entry


def _entry_parts(conn: Any, stored: bool = False) -> Any:
    """(seq, envelope, payload bytes...) of every entry, in seq order, from either storage
    layout (payloads by digest column before revision 0008, by pid after).  ``stored``
    (revision 0009 on): (seq, envelope, codec, stored bytes, codec, stored bytes, ...) --
    the payloads as the ledger stores them, compressed where codec 1."""
    cols = {r[1] for r in conn.exec_driver_sql("PRAGMA table_info(payloads)")} \
        if conn.dialect.name == "sqlite" else {r[0] for r in conn.exec_driver_sql(
            "SELECT column_name FROM information_schema.columns WHERE table_name = 'payloads'"
            " AND table_schema = current_schema()")}
    if "pid" in cols:
        joins = " ".join(f"LEFT JOIN payloads p{i} ON p{i}.pid = e.seq * 8 + {i}"
                         for i in range(_PARTS))
    else:
        names = ["doc_digest", "preimage_digest", "attestation_digest", "query_digest",
                 "meta_digest"]
        joins = " ".join(f"LEFT JOIN payloads p{i} ON p{i}.digest = e.{c}"
                         for i, c in enumerate(names))
        joins += " LEFT JOIN (SELECT NULL AS data) p5 ON 1 = 0"
    if "codec" not in cols:  # before revision 0009: every row holds the bytes themselves
        return conn.exec_driver_sql(
            "SELECT e.seq, e.envelope, " + ", ".join(f"p{i}.data" for i in range(_PARTS))
            + f" FROM entries e {joins} ORDER BY e.seq")
    # revision 0009: the bytes the audit hashes are the decoded ones (docs/storage.md)
    rows = conn.exec_driver_sql(
        "SELECT e.seq, e.envelope, " + ", ".join(f"p{i}.codec, p{i}.data" for i in range(_PARTS))
        + f" FROM entries e {joins} ORDER BY e.seq")
    if stored:
        return rows
    return [(r[0], r[1], *(None if r[3 + 2 * i] is None else
                           codec.decode(r[2 + 2 * i], bytes(r[3 + 2 * i]))
                           for i in range(_PARTS))) for r in rows]


def build_physical(url: str) -> None:
    """The physical table: one row per entry, in seq order, with exactly the bytes the
    audit hashes (envelope and payloads)."""
    eng = Ledger.open(url).engine
    parts = ", ".join(f"p{i} BYTEA" if eng.dialect.name == "postgresql" else f"p{i} BLOB"
                      for i in range(_PARTS))
    blob = "BYTEA" if eng.dialect.name == "postgresql" else "BLOB"
    with eng.begin() as conn:
        conn.exec_driver_sql(f"CREATE TABLE {PHYSICAL} (seq BIGINT PRIMARY KEY, env {blob} "
                             f"NOT NULL, {parts})")
        rows = [tuple(r) for r in _entry_parts(conn)]
        ph = "%s" if eng.dialect.name == "postgresql" else "?"
        conn.exec_driver_sql(f"INSERT INTO {PHYSICAL} VALUES ({', '.join([ph] * 8)})", rows)
    eng.dispose()


STORED = "bench_physical_stored"


def build_physical_stored(url: str) -> None:
    """The physical table of the stored form: one row per entry, in seq order, with the
    envelope and each payload as the ledger stores it (codec, bytes) -- the floor of any
    layout that keeps the payloads compressed (revision 0009) and must decode them before
    it hashes (docs/performance.md)."""
    eng = Ledger.open(url).engine
    blob = "BYTEA" if eng.dialect.name == "postgresql" else "BLOB"
    parts = ", ".join(f"c{i} SMALLINT, d{i} {blob}" for i in range(_PARTS))
    with eng.begin() as conn:
        conn.exec_driver_sql(f"CREATE TABLE {STORED} (seq BIGINT PRIMARY KEY, env {blob} "
                             f"NOT NULL, {parts})")
        rows = [tuple(bytes(v) if isinstance(v, memoryview) else v for v in r)
                for r in _entry_parts(conn, stored=True)]
        ph = "%s" if eng.dialect.name == "postgresql" else "?"
        conn.exec_driver_sql(f"INSERT INTO {STORED} VALUES ({', '.join([ph] * (2 + 2 * _PARTS))})",
                             rows)
    eng.dispose()


def _bare_scan(url: str, sql: str, per_batch: Any, binary: bool = True) -> float:
    """Entries per second: run ``sql`` with the bare driver (no ORM; on PostgreSQL the
    binary format unless ``binary`` is False, as the audit's page reader reads) and hand
    every batch of 2,000 rows to ``per_batch``."""
    eng = Ledger.open(url).engine
    raw = eng.raw_connection()
    try:
        pg = eng.dialect.name == "postgresql"
        cur = raw.cursor(binary=binary) if pg else raw.cursor()
        t0 = time.perf_counter()
        cur.execute(sql)
        count = 0
        while batch := cur.fetchmany(2000):
            per_batch(batch)
            count += len(batch)
        dt = time.perf_counter() - t0
        cur.close()
    finally:
        raw.close()
        eng.dispose()
    return count / dt


def physical_stored_scan(url: str) -> float:
    """Entries per second: scan the stored-form table with the bare driver, decode every
    payload (``codec.decode``, as every reader of the ledger must) and SHA-256 every part."""
    sha, decode = hashlib.sha256, codec.decode

    def per_batch(batch: list[Any]) -> None:
        for r in batch:
            sha(r[0]).digest()
            for i in range(1, 1 + 2 * _PARTS, 2):
                if r[i + 1] is not None:
                    sha(decode(r[i], r[i + 1]) if r[i] else r[i + 1]).digest()

    cols = ", ".join(f"c{i}, d{i}" for i in range(_PARTS))
    return _bare_scan(url, f"SELECT env, {cols} FROM {STORED} ORDER BY seq", per_batch)


def physical_scan(url: str, binary: bool = True) -> float:
    """Entries per second: scan the physical table with the bare driver (no ORM) and
    SHA-256 every part.  ``binary=False``: PostgreSQL's text format, the baseline as it was
    measured before the audit's reader moved to the binary format."""
    sha = hashlib.sha256

    def per_batch(batch: list[Any]) -> None:
        for r in batch:
            for part in r:
                if part is not None:
                    sha(part).digest()

    return _bare_scan(url, f"SELECT env, p0, p1, p2, p3, p4, p5 FROM {PHYSICAL} ORDER BY seq",
                      per_batch, binary)


def audit_rate(url: str, workers: int = 1, attestations: bool = True) -> float:
    with Ledger.open(url) as L:
        t0 = time.perf_counter()
        rep = run_audit(L, AuditOptions(workers=workers, check_attestations=attestations))
        dt = time.perf_counter() - t0
    assert rep.outcome == "passed", rep.summary
    return rep.summary.rows / dt


def _key_and_jwks() -> tuple[Any, dict[str, Any]]:
    key = ec.generate_private_key(ec.SECP256R1())
    jwk = json.loads(jwt.algorithms.ECAlgorithm.to_jwk(key.public_key()))
    jwk["kid"] = f"{ISSUER}#bench"
    return key, {"keys": [jwk]}


def attested_ledger(url: str, n: int) -> list[str]:
    key, jwks = _key_and_jwks()
    t0 = 1_800_000_000
    tokens, subs = [], []
    for i in range(n):
        ev = {"i": i, "claimed": i * 2, "calculated": i * 2}
        r = DiagnosticResult.verified("Claim verified", {"constraint_id": "math.eq"}, ev)
        claims = {"iss": ISSUER, "sub": "sha256:" + "0" * 64, "iat": t0, "exp": t0 + 86400,
                  "jti": f"att_{i}", "qwed": {"version": "1.0", "result": {
                      "status": "VERIFIED", "verified": True, "engine": "math",
                      "confidence": 1.0}, "query_hash": "sha256:" + "0" * 64,
                      "proof_hash": r.proof_ref}}
        tok = jwt.encode(claims, key, algorithm="ES256",
                         headers={"kid": f"{ISSUER}#bench", "typ": "qwed-attestation+jwt"})
        tokens.append(tok)
        subs.append({"result": r.to_dict(), "engine": "math", "evidence": ev,
                     "attestation": tok})
    with Ledger.init(url, clock=FixedClock(t0 * 1_000_000 + 60_000_000, 1)) as L:
        L.trust_issuer(ISSUER, jwks)
        for i in range(0, n, 1000):
            res = L.append_many(subs[i:i + 1000])
            assert all(r.ok for r in res), [r.error for r in res if not r.ok][:1]
    return tokens


def raw_es256(tokens: list[str], jwks: dict[str, Any]) -> float:
    pub = jwt.algorithms.ECAlgorithm.from_jwk(json.dumps(jwks["keys"][0]))
    t0 = time.perf_counter()
    for tok in tokens:
        jwt.decode(tok, pub, algorithms=["ES256"],
                   options={"verify_exp": False, "verify_iat": False})
    return len(tokens) / (time.perf_counter() - t0)


def _rss_child(url: str, out: Any) -> None:
    with Ledger.open(url) as L:
        run_audit(L, AuditOptions())
    out.put(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)


def peak_rss_mib(url: str) -> float:
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    p = ctx.Process(target=_rss_child, args=(url, q))
    p.start()
    v = q.get(timeout=3600)
    p.join()
    return v / 1024


def _spread(got: dict[str, list[float]], a: str, b: str) -> str:
    """The range of the per-round ratios ``a / b``."""
    r = [x / y for x, y in zip(got[a], got[b], strict=True)]
    return f"{min(r):.2f}-{max(r):.2f}"


def run(backends: list[str], scale: float = 1.0, memory_sizes: tuple[int, int] | None = None,
        ) -> list[list[Any]]:
    n = int(40_000 * scale)
    n_att = int(3_000 * scale)
    rows: list[list[Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        for kind in available(backends):
            ctx = sqlite_url(Path(tmp)) if kind == "sqlite" else pg_url()
            with ctx as url:
                fill(url, n)
                build_physical(url)
                build_physical_stored(url)
                # ROUNDS interleaved rounds (the machine is shared and drifts); the ratios
                # are of the medians, the range is over the rounds
                got: dict[str, list[float]] = {"raw": [], "phys": [], "stored": [], "text": [],
                                               "one": [], "two": []}
                for _ in range(ROUNDS):
                    got["raw"].append(raw_scan(url, n))
                    got["phys"].append(physical_scan(url))
                    got["stored"].append(physical_stored_scan(url))
                    if kind == "postgresql":
                        got["text"].append(physical_scan(url, binary=False))
                    got["one"].append(audit_rate(url, attestations=False))
                    got["two"].append(audit_rate(url, workers=2, attestations=False))
                raw, phys, one, two = (statistics.median(got[k])
                                       for k in ("raw", "phys", "one", "two"))

                rows.append([kind, f"audit, no attestations ({n} rows) vs joined scan", one,
                             raw, f"{one / raw:.2f} ({_spread(got, 'one', 'raw')})", ">= 0.4"])
                rows.append([kind, "audit, no attestations vs physical baseline", one, phys,
                             f"{one / phys:.2f} ({_spread(got, 'one', 'phys')})",
                             ">= 0.4" if kind == "sqlite" else ">= 0.25"])
                stored = statistics.median(got["stored"])
                floor = f"{stored / phys:.2f} ({_spread(got, 'stored', 'phys')})"
                rows.append([kind, "stored-form physical scan (decode + SHA-256) vs physical",
                             stored, phys, floor, "(floor)"])
                rows.append([kind, "audit vs stored-form physical scan", one, stored,
                             f"{one / stored:.2f} ({_spread(got, 'one', 'stored')})", "-"])
                if got["text"]:
                    text = statistics.median(got["text"])
                    rows.append([kind, "audit vs physical baseline in text format (as before)",
                                 one, text, f"{one / text:.2f} ({_spread(got, 'one', 'text')})",
                                 "-"])
                rows.append([kind, "audit --workers 2 vs 1", two, one,
                             f"{two / one:.2f} ({_spread(got, 'two', 'one')})", ">= 1.8"])
            ctx = sqlite_url(Path(tmp)) if kind == "sqlite" else pg_url()
            with ctx as url:
                tokens = attested_ledger(url, n_att)
                with Ledger.open(url) as L:
                    jwks = {"keys": [L.trust_store().keys[0].jwk]}
                raw_v = raw_es256(tokens, jwks)
                att = audit_rate(url)
                rows.append([kind, f"audit of attested rows ({n_att})", att, raw_v, att / raw_v,
                             ">= 0.7"])
        if memory_sizes:
            mem = []
            for size in memory_sizes:
                with sqlite_url(Path(tmp)) as url:
                    fill(url, size, batch=5000)
                    mem.append(peak_rss_mib(url))
            rows.append(["sqlite", f"peak RSS MiB, audit of {memory_sizes[1]:,} vs "
                         f"{memory_sizes[0]:,} rows", mem[1], mem[0], mem[1] / mem[0], "<= 1.2"])
    print_table(f"audit throughput (rows/s, medians of {ROUNDS} interleaved rounds; ratio = "
                "ledger / raw baseline, with its range over the rounds)",
                ["backend", "mode", "ledger", "baseline", "ratio", "target"], rows)
    return rows
