"""QWED 8.0's audit chain, re-verified exactly as QWED's ``AuditLogger`` verifies it.

Read from QWED 8.0.0 ``qwed_new/core/audit_logger.py`` (``_compute_hash``,
``_compute_hmac``, ``_expected_hashes``, the ``_reconstruct_*_log_data`` shapes,
``_canonical_ts``/``_naive_ts``, ``_verify_chain_link``, ``_check_entry``,
``verify_audit_trail``):

* entry hash = hex SHA-256 of ``json.dumps(log_data, sort_keys=True, default=str)``,
  ``log_data`` = ``organization_id, user_id, query, result`` (the stored JSON text,
  decoded), ``is_verified, domain, timestamp`` (``isoformat()`` of the UTC time),
  ``previous_hash, raw_llm_output, api_key_id, verifier_version, admission``;
* a row is accepted against four payload shapes (current; before ``admission``; before
  ``api_key_id``/``verifier_version``; before ``raw_llm_output``), each with the
  aware and the naive timestamp spelling — an older shape only while the fields it
  lacks are null;
* HMAC = hex HMAC-SHA256 of the entry hash (UTF-8) under the audit secret (UTF-8);
* rows of one organisation link by ``previous_hash`` in id order; unchained rows
  before the first chained one are *legacy* (never verified, never failed).
"""

from __future__ import annotations

import hashlib
import hmac
import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

# QWED's ``verificationlog`` table with its 8.0 columns, as QWED creates it on SQLite (what the
# demo's and the benchmark's QWED logs are written into)
VERIFICATIONLOG_DDL = (
    "CREATE TABLE verificationlog (id INTEGER PRIMARY KEY, organization_id INTEGER "
    "NOT NULL, user_id INTEGER, query VARCHAR NOT NULL, result VARCHAR NOT NULL, "
    "is_verified BOOLEAN NOT NULL, domain VARCHAR NOT NULL, timestamp DATETIME NOT "
    "NULL, entry_hash VARCHAR, hmac_signature VARCHAR, previous_hash VARCHAR, "
    "raw_llm_output VARCHAR, api_key_id INTEGER, verifier_version VARCHAR, "
    "admission VARCHAR)")
PRE_CALLER = ("organization_id", "user_id", "query", "result", "is_verified", "domain",
              "timestamp", "previous_hash", "raw_llm_output")
LEGACY = PRE_CALLER[:-1]


def as_datetime(value: Any) -> datetime:
    """A stored timestamp (datetime, or SQLite/ISO text) as a datetime."""
    if isinstance(value, datetime):
        return value
    if isinstance(value, str):
        return datetime.fromisoformat(value)
    raise ValueError(f"timestamp {value!r} is not a time")


def canonical_ts(value: datetime) -> str:
    """QWED ``_canonical_ts(...).isoformat()``: UTC-aware."""
    aware = value.replace(tzinfo=UTC) if value.tzinfo is None \
        else value.astimezone(UTC)
    return aware.isoformat()


def naive_ts(value: datetime) -> str:
    """QWED ``_naive_ts(...).isoformat()``: naive UTC (rows hashed before tz-aware times)."""
    naive = value if value.tzinfo is None else value.astimezone(UTC).replace(tzinfo=None)
    return naive.isoformat()


def entry_hash(log_data: dict[str, Any]) -> str:
    """QWED ``_compute_hash``."""
    text = json.dumps(log_data, sort_keys=True, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def entry_hmac(secret: bytes, entry_hash_hex: str) -> str:
    """QWED ``_compute_hmac``."""
    return hmac.new(secret, entry_hash_hex.encode("utf-8"), hashlib.sha256).hexdigest()


def _payloads(row: dict[str, Any], result: Any, ts: str) -> list[dict[str, Any]]:
    base = {k: row.get(k) for k in PRE_CALLER}
    base.update(result=result, timestamp=ts)
    current = {**base, "api_key_id": row.get("api_key_id"),
               "verifier_version": row.get("verifier_version"),
               "admission": row.get("admission")}
    out = [current]
    if row.get("admission") is None:
        out.append({k: v for k, v in current.items() if k != "admission"})
        if row.get("api_key_id") is None and row.get("verifier_version") is None:
            out += [base, {k: base[k] for k in LEGACY}]
    return out


def expected_hashes(row: dict[str, Any]) -> list[str]:
    """Every entry hash QWED accepts for ``row``.  Raises ValueError if the stored
    result is not JSON or the timestamp not a time (QWED fails closed there too)."""
    result = json.loads(row["result"])
    t = as_datetime(row["timestamp"])
    hashes = []
    for spelling in (canonical_ts(t), naive_ts(t)):
        hashes += [entry_hash(p) for p in _payloads(row, result, spelling)]
    return hashes


def is_unchained(row: dict[str, Any]) -> bool:
    return not row.get("entry_hash") and not row.get("hmac_signature") \
        and row.get("previous_hash") is None


@dataclass
class RowVerdict:
    """One row's verdict: ``ok``, ``legacy`` or ``failed`` (with QWED's reasons)."""

    row: dict[str, Any]
    state: str
    hmac: str = "unchecked"  # valid | invalid | unchecked (no secret given)
    reasons: list[str] = field(default_factory=list)


def _hash_ok(row: dict[str, Any], reasons: list[str]) -> bool:
    if not row.get("entry_hash"):
        reasons.append("hash_missing")
        return False
    try:
        ok = row["entry_hash"] in expected_hashes(row)
    except (ValueError, TypeError):
        reasons.append("result_unreadable")
        return False
    if not ok:
        reasons.append("hash_mismatch")
    return ok


def _link_ok(row: dict[str, Any], prev: dict[str, Any] | None, chained_before: bool,
             reasons: list[str]) -> bool:
    if row.get("previous_hash") is None and not chained_before:
        return True
    if prev is None:
        reasons.append("link_broken")  # a genesis row must not name a previous hash
        return False
    if not prev.get("entry_hash") or prev["entry_hash"] != row.get("previous_hash"):
        reasons.append("link_broken")
        return False
    return True


class ChainChecker:
    """Walks rows as ``verify_audit_trail`` does, one organisation's rows in id order
    (organisations may interleave); keeps the previous row of each organisation."""

    def __init__(self, secret: bytes | None) -> None:
        self.secret = secret
        self._prev: dict[Any, dict[str, Any]] = {}
        self._chained: set[Any] = set()

    def check(self, row: dict[str, Any]) -> RowVerdict:
        org = row.get("organization_id")
        prev, chained_before = self._prev.get(org), org in self._chained
        self._prev[org] = row
        if row.get("entry_hash"):
            self._chained.add(org)
        if is_unchained(row) and not chained_before:
            return RowVerdict(row, "legacy", reasons=["legacy_unchained"])
        reasons: list[str] = []
        ok = _hash_ok(row, reasons)
        mac = "unchecked"
        if self.secret is not None:
            good = bool(row.get("entry_hash")) and hmac.compare_digest(
                entry_hmac(self.secret, row.get("entry_hash") or ""),
                str(row.get("hmac_signature") or ""))
            mac = "valid" if good else "invalid"
            if not good:
                reasons.append("hmac_invalid")
                ok = False
        ok = _link_ok(row, prev, chained_before, reasons) and ok
        return RowVerdict(row, "ok" if ok else "failed", mac, reasons)


def check_organization(rows: list[dict[str, Any]], secret: bytes | None) -> list[RowVerdict]:
    """Verdicts for one organisation's rows, in id order (as ``verify_audit_trail``)."""
    checker = ChainChecker(secret)
    return [checker.check(row) for row in rows]
