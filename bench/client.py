"""Producer client: LedgerClient appends vs plain httpx posts of the same submissions to the
same server in one run; spool write (fsync'd) and drain rates; import of a QWED log vs a raw
read of it.

* **append**: a real ``ledger serve`` (one worker); ``n`` submissions posted one after another
  with a bare ``httpx.Client`` (the baseline: the same bodies the client sends, each with an
  idempotency key; no receipt check), then the same submissions (another subject, so nothing
  is a replay) through ``LedgerClient.append`` (key added, receipt verified against the JWKS).
  Target: client >= 0.9x httpx.  For information, posts without a key (on PostgreSQL a
  keyless single append takes a one-statement path).
* **spool**: ``Spool.put`` of ``n`` bodies, one fsync each; then ``LedgerClient.drain`` of
  them into the running server (batches of 100).
* **import**: a ``verificationlog`` table of ``rows`` rows (100k at scale 1) chained and
  HMAC-signed with QWED's recipe (ledger/core/qwed_log.py), in SQLite; ``import_qwed`` of it
  vs a raw ``SELECT *`` of the same table.
"""

from __future__ import annotations

import json
import sqlite3
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from bench.common import available, pg_url, print_table, sqlite_url, submissions
from bench.service import serving
from ledger import Ledger
from ledger.client import LedgerClient, Spool
from ledger.clock import SystemClock
from ledger.core.qwed_log import VERIFICATIONLOG_DDL, entry_hash, entry_hmac
from ledger.crypto.keys import Keyring
from ledger.crypto.tokens import ledger_signer
from ledger.ops.qwed_import import import_qwed, read_source
from ledger.ops.tokens import mint_access_token

SECRET = b"bench-secret"


def _token(keys: Path, origin: str) -> str:
    signer = ledger_signer(Keyring.load(keys), origin)
    return mint_access_token(signer, role="producer", subject="bench", ttl_s=3600,
                             issuer=origin, audience=origin, now_s=int(time.time()))


def _retag(bodies: list[bytes], tag: str) -> list[dict[str, Any]]:
    out = []
    for b in bodies:
        obj = json.loads(b)
        obj["subject"] = f"{tag}-{obj.get('subject')}"
        obj.pop("idempotency_key", None)
        out.append(obj)
    return out


def _append_rates(port: int, token: str, n: int, tmp: Path) -> list[float]:
    url = f"http://127.0.0.1:{port}"
    subs = submissions(n, seed=5)
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}

    keyed = [json.dumps({**o, "idempotency_key": f"plain-{i}"}).encode()
             for i, o in enumerate(_retag(subs, "plain"))]
    bare = [json.dumps(o).encode() for o in _retag(subs, "nokey")]
    objs = _retag(subs, "client")
    spent = {"keyed": 0.0, "bare": 0.0, "client": 0.0}
    step = max(1, n // 10)  # interleaved rounds: the machine's drift hits all three alike
    with httpx.Client(base_url=url, headers=headers, timeout=30) as http, \
            LedgerClient(url, token, spool_dir=str(tmp / "spool-a")) as client:
        client.append(_retag(subs[:1], "warm")[0])  # JWKS and health fetched once
        for start in range(0, n, step):
            for name, bodies in (("keyed", keyed), ("bare", bare)):
                t0 = time.perf_counter()
                for body in bodies[start:start + step]:
                    assert http.post("/v1/entries", content=body).status_code == 201
                spent[name] += time.perf_counter() - t0
            t0 = time.perf_counter()
            for obj in objs[start:start + step]:
                assert client.append(obj).status == "appended"
            spent["client"] += time.perf_counter() - t0
    raw, no_key, ours = (n / spent[k] for k in ("keyed", "bare", "client"))
    spool_dir = tmp / "spool-b"
    bodies = [json.dumps({**o, "idempotency_key": f"sp-{i}"}).encode()
              for i, o in enumerate(_retag(subs, "spool"))]
    with Spool(spool_dir) as sp:
        t0 = time.perf_counter()
        for i, body in enumerate(bodies):
            sp.put(body, f"sp-{i}")
        put = n / (time.perf_counter() - t0)
    with LedgerClient(url, token, spool_dir=str(spool_dir)) as client:
        t0 = time.perf_counter()
        report = client.drain()
        drain = n / (time.perf_counter() - t0)
        assert report.appended == n and report.remaining == 0
    return [no_key, raw, ours, ours / raw, put, drain]


def _qwed_log(path: Path, rows: int) -> None:
    """A QWED-shaped verificationlog of ``rows`` rows over 4 organisations."""
    conn = sqlite3.connect(path)
    conn.execute(VERIFICATIONLOG_DDL)
    heads: dict[int, str | None] = {}
    batch = []
    for i in range(1, rows + 1):
        org = i % 4 + 1
        ts = f"2026-11-{1 + i % 28:02d} 10:{i % 60:02d}:{(i // 60) % 60:02d}.{i % 999999:06d}"
        result = {"status": "BLOCKED", "agent_message": "Verification blocked",
                  "developer_fields": {"constraint_id": "sql_verifier.malicious", "i": i},
                  "proof_ref": None, "is_authoritative": False}
        data = {"organization_id": org, "user_id": None, "query": f"DROP TABLE t{i}",
                "result": result, "is_verified": False, "domain": "SQL",
                "timestamp": ts.replace(" ", "T") + "+00:00", "previous_hash": heads.get(org),
                "raw_llm_output": None, "api_key_id": None, "verifier_version": "8.0.0",
                "admission": "BLOCKED"}
        h = entry_hash(data)
        batch.append((i, org, None, data["query"], json.dumps(result), False, "SQL", ts, h,
                      entry_hmac(SECRET, h), heads.get(org), None, None, "8.0.0", "BLOCKED"))
        heads[org] = h
    conn.executemany("INSERT INTO verificationlog VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)", batch)
    conn.commit()
    conn.close()


def _import_rates(db_url: str, tmp: Path, rows: int) -> list[float]:
    path = tmp / "qwed.db"
    _qwed_log(path, rows)
    t0 = time.perf_counter()
    with sqlite3.connect(path) as conn:
        got = len(conn.execute("SELECT * FROM verificationlog ORDER BY organization_id, id"
                               ).fetchall())
    raw = got / (time.perf_counter() - t0)
    with Ledger.open(db_url) as ledger:
        label, source = read_source(f"sqlite:///{path}")
        t0 = time.perf_counter()
        report = import_qwed(ledger, source, source=label, secret=SECRET)
        imp = rows / (time.perf_counter() - t0)
    assert report.imported == rows and not report.quarantined, report.quarantined[:3]
    return [raw, imp, imp / raw]


def _backend(kind: str, tmp: Path, scale: float) -> tuple[list[Any], list[Any]]:
    n, rows = max(50, int(1000 * scale)), max(100, int(100_000 * scale))
    ctx = sqlite_url(tmp) if kind == "sqlite" else pg_url()
    with ctx as url:
        origin = f"bench.example/client-{kind}"
        Ledger.init(url, origin=origin).close()
        keys = tmp / f"keys-{kind}"
        Keyring.load(keys).generate(origin, SystemClock().now_us())
        with serving(url, keys, tmp / f"serve-{kind}.log") as port:
            appends = _append_rates(port, _token(keys, origin), n, tmp / kind)
        imports = _import_rates(url, tmp / kind, rows)
    return [kind, n, *appends], [kind, rows, *imports]


def run(backends: list[str], scale: float = 1.0) -> None:
    """Print the client and import tables for each available backend."""
    a_rows, i_rows = [], []
    with tempfile.TemporaryDirectory(prefix="bench-client-") as d:
        for kind in available(backends):
            (Path(d) / kind).mkdir()
            a, i = _backend(kind, Path(d), scale)
            a_rows.append(a)
            i_rows.append(i)
    print_table("Producer client: sequential single appends to one ledger serve",
                ["backend", "n", "httpx, no key/s", "httpx posts/s", "client appends/s",
                 "client/httpx",
                 "spool puts/s (fsync)", "drain items/s"], a_rows)
    print_table("Import of a QWED verificationlog (chain + HMAC re-verified)",
                ["backend", "rows", "raw SELECT rows/s", "import rows/s", "import/raw"], i_rows)
