"""The README tour's inputs, written by ``ledger demo`` into ``ledger-demo/tour/``.

Everything the tour's lines read: a results file of realistic submissions that are
accepted (``results.jsonl``, a few of them attested by the issuer whose public keys are
``issuer-jwks.json``), a retention policy (``retention.json``), a producer's spool with
results to drain (``spool/``), and a QWED audit log (``qwed.db``, the ``verificationlog``
table chained and HMAC-signed with QWED 8.0's recipe, ledger/core/qwed_log.py) with the
secret that signs it (``audit-secret``).  The tour's own ledger, keys and token are made
by the tour's lines.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from ledger.client.spool import Spool
from ledger.core.diagnostics import DiagnosticResult
from ledger.core.qwed_log import VERIFICATIONLOG_DDL, entry_hash, entry_hmac
from ledger.crypto.tokens import new_es256_key
from ledger.demo.samples import attested, realistic

ISSUER = "did:qwed:node:prod"  # the tour's `ledger keys trust --issuer`
ERASED_SUBJECT = "user-4711"  # the tour's `ledger redact --subject`
HELD_SUBJECT = "user-0815"  # the tour's `ledger hold add --subject`
QWED_SECRET = "qwed-audit-secret-of-the-demo"
ATTESTATION_TTL_S = 366 * 86_400  # the tour may be walked days after the demo ran

RETENTION = {
    "format": "ledger-retention/1",
    "rules": [
        {"id": "prompts", "engine": "*", "payloads": ["query", "evidence"],
         "erase_after_days": 200, "minimum_days": 183},
        {"id": "finance", "engine": ["sql", "stats"], "payloads": ["all"],
         "minimum_days": 3650},
    ],
}


def write_tour_inputs(directory: Path, now_s: int) -> Iterator[str]:
    """Write the tour's inputs into ``directory`` (created); yields what was written."""
    directory.mkdir(parents=True, exist_ok=True)
    key, jwk = new_es256_key()
    kid = f"{ISSUER}#signing-key-v1"
    jwk["kid"] = kid
    (directory / "issuer-jwks.json").write_text(json.dumps({"keys": [jwk]}, indent=1) + "\n",
                                                encoding="utf-8")
    subs = results(key, kid, now_s - 60)
    with open(directory / "results.jsonl", "w", encoding="utf-8") as f:
        for s in subs:
            f.write(json.dumps(s, ensure_ascii=False, separators=(",", ":")) + "\n")
    (directory / "retention.json").write_text(json.dumps(RETENTION, indent=1) + "\n",
                                              encoding="utf-8")
    spooled = realistic(6, seed=31, start=5000)
    with Spool(directory / "spool") as spool:
        spool.put_many([(json.dumps(s).encode(), f"gateway-1-spool-{i}")
                        for i, s in enumerate(spooled)])
    (directory / "audit-secret").write_text(QWED_SECRET + "\n", encoding="utf-8")
    qwed_rows = write_qwed_log(directory / "qwed.db", datetime.fromtimestamp(now_s, UTC))
    yield (f"the README tour's inputs -> {directory}: results.jsonl ({len(subs)} results, "
           f"3 attested by {ISSUER}), issuer-jwks.json, retention.json, spool/ "
           f"({len(spooled)} results to drain), qwed.db ({qwed_rows} rows of a QWED audit "
           "log) and its audit-secret")


def results(key: Any, kid: str, iat: int) -> list[dict[str, Any]]:
    """24 realistic results and 3 attested ones, each with an idempotency key; a data
    subject to erase and one to hold among them."""
    subs = realistic(24, seed=29, start=1000)
    for i, s in enumerate(subs):
        s["idempotency_key"] = f"tour-{i}"
    with_query = [s for s in subs if "query" in s]
    for s in with_query[:2]:
        s["subject"] = ERASED_SUBJECT
    for s in with_query[2:3] + [s for s in subs if s["engine"] == "sql"][:1]:
        s["subject"] = HELD_SUBJECT
    for i in range(3):
        a = attested(i, key, ISSUER, kid, iat, ttl_s=ATTESTATION_TTL_S)
        a["idempotency_key"] = f"tour-att-{i}"
        subs.append(a)
    return subs


def _qwed_results() -> list[tuple[str, str | None, dict[str, Any]]]:
    """(domain, admission, result) as QWED's routes log them: trust-gate blocks, schema
    blocks and fact checks capped at UNVERIFIABLE."""
    return [
        ("SQL", "BLOCKED", DiagnosticResult.blocked(
            "Verification blocked — query is not read-only",
            {"constraint_id": "sql_verifier.not_read_only", "statement": "DELETE"}).to_dict()),
        ("SCHEMA", "BLOCKED", DiagnosticResult.blocked(
            "Missing required field: invoice_id",
            {"constraint_id": "schema_verifier.required_missing",
             "missing": ["invoice_id"]}).to_dict()),
        ("FACT", None, DiagnosticResult.unverifiable(
            "Claim could not be deterministically verified",
            {"constraint_id": "fact_verifier.heuristic_supported",
             "deterministic_verdict": "SUPPORTED"}).to_dict()),
    ]


def write_qwed_log(path: Path, start: datetime, rounds: int = 4) -> int:
    """A QWED ``verificationlog`` (its 8.0 columns) for two organisations, each chained and
    HMAC-signed under ``QWED_SECRET`` as QWED's ``AuditLogger`` does; returns the rows."""
    path.unlink(missing_ok=True)
    conn = sqlite3.connect(path)
    try:
        conn.execute(VERIFICATIONLOG_DDL)
        heads: dict[int, str | None] = {}
        secret = QWED_SECRET.encode()
        rows, n = [], 0
        for r in range(rounds):
            for domain, admission, result in _qwed_results():
                for org in (1, 2):
                    n += 1
                    at = (start - timedelta(hours=1) + timedelta(seconds=7 * n,
                                                                 microseconds=1009 * n)
                          ).replace(tzinfo=None)
                    query = f"{domain.lower()} request {r} of organisation {org}"
                    data = {"organization_id": org, "user_id": None, "query": query,
                            "result": result, "is_verified": False, "domain": domain,
                            "timestamp": at.isoformat() + "+00:00",
                            "previous_hash": heads.get(org), "raw_llm_output": None,
                            "api_key_id": None, "verifier_version": "8.0.0",
                            "admission": admission}
                    h = entry_hash(data)
                    rows.append((n, org, None, query, json.dumps(result), False, domain,
                                 at.isoformat(sep=" "), h, entry_hmac(secret, h),
                                 heads.get(org), None, None, "8.0.0", admission))
                    heads[org] = h
        conn.executemany(
            "INSERT INTO verificationlog VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)", rows)
        conn.commit()
    finally:
        conn.close()
    return n
