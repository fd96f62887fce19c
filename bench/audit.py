"""Audit throughput against raw baselines measured in the same run, and memory.

* rows without attestations vs a raw scan that streams the same rows (the same
  joined query, same page size) and SHA-256s the same bytes (envelope and payloads);
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
from ledger.store.entries import iter_entry_pages

ISSUER = "did:qwed:node:bench"


def fill(url: str, n: int, batch: int = 2000) -> None:
    with Ledger.init(url) as L:
        for i in range(0, n, batch):
            subs = submissions(min(batch, n - i), seed=i, start=i)
            L.append_many(subs)


def raw_scan(url: str, n: int) -> float:
    """Stream the same rows with the same query and SHA-256 the same bytes."""
    with Ledger.open(url) as L, L.engine.connect() as conn:
        t0 = time.perf_counter()
        count = 0
        for page in iter_entry_pages(conn, 0, n):
            for row, blobs in page:
                hashlib.sha256(row.envelope).digest()
                for b in blobs.values():
                    hashlib.sha256(b).digest()
                count += 1
        return count / (time.perf_counter() - t0)


def audit_rate(url: str, workers: int = 1, attestations: bool = True) -> float:
    with Ledger.open(url) as L:
        t0 = time.perf_counter()
        rep = run_audit(L, AuditOptions(workers=workers, check_attestations=attestations))
        dt = time.perf_counter() - t0
    assert rep["outcome"] == "passed", rep["summary"]
    return rep["summary"]["rows"] / dt


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
                raw = raw_scan(url, n)
                one = audit_rate(url)
                two = audit_rate(url, workers=2)
                rows.append([kind, f"audit, no attestations ({n} rows)", one, raw, one / raw,
                             ">= 0.4"])
                rows.append([kind, "audit --workers 2 vs 1", two, one, two / one, ">= 1.6"])
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
    print_table("audit throughput (rows/s; ratio = ledger / raw baseline)",
                ["backend", "mode", "ledger", "baseline", "ratio", "target"], rows)
    return rows
