"""Entry envelopes, entry hashes and the chain link (format version 1).

Hashed structures (all SHA-256; see docs/format.md for worked vectors)::

    payload digest = SHA-256(payload bytes)                      -- content address;
                     the evidence-preimage digest therefore equals the proof_ref
    envelope       = RFC 8785 JSON of {"v":1, "ledger":..., "kind":..., <fields>,
                                        "payloads": {<name>: "sha256:<hex>"|null}}
    body_hash      = SHA-256(ENVELOPE_TAG || envelope)
    entry_hash     = SHA-256(ENTRY_TAG || prev_hash || u64be(seq) ||
                             u64be(recorded_at_us) || body_hash)
    genesis        = SHA-256(GENESIS_TAG || utf8(ledger_id))   -- prev_hash of seq 0

``seq`` is 0-based and gapless; ``recorded_at_us`` is microseconds since the
Unix epoch (UTC) and never decreases with ``seq``.  Both are bound by the link
rather than the envelope, so the link can be computed in one SQL statement
(PostgreSQL: ``sha256(tag || prev || int8send(seq) || int8send(t) || body)``).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

from ledger.core.canonical import canonical_json
from ledger.core.digest import digest_text as digest_text  # re-exported
from ledger.core.digest import hash_hex as hash_hex  # re-exported
from ledger.core.digest import parse_hash_hex as parse_hash_hex  # re-exported
from ledger.core.digest import sha256

FORMAT_VERSION = 1
HASH_SIZE = 32

ENVELOPE_TAG = b"ledger.envelope.v1\x00"
ENTRY_TAG = b"ledger.entry.v1\x00"
GENESIS_TAG = b"ledger.genesis.v1\x00"

KINDS = ("result", "key_event", "audit_run", "redaction", "import")

# Envelope field -> queryable entries column, per kind.  Every listed field is
# always present in the envelope (null where absent); the audit checks that each
# column still equals its envelope field.
RESULT_FIELDS = ("engine", "status", "constraint_id", "proof_ref", "subject", "producer",
                 "idempotency_key", "admission", "att_verdict", "att_kid", "att_iss")
COLUMN_MAP: dict[str, dict[str, str]] = {
    "result": {f: f for f in RESULT_FIELDS},
    "key_event": {"action": "status", "issuer": "att_iss", "kid": "att_kid",
                  "thumbprint": "constraint_id", "producer": "producer"},
    "audit_run": {"outcome": "status", "producer": "producer"},
    "redaction": {"target_seq": "subject", "producer": "producer"},
    "import": {"source": "subject", "outcome": "status", "producer": "producer"},
}
# Envelope payload name -> entries column holding its digest, per kind.
PAYLOAD_MAP: dict[str, dict[str, str]] = {
    "result": {"result": "doc_digest", "preimage": "preimage_digest",
               "attestation": "attestation_digest", "query": "query_digest",
               "meta": "meta_digest"},
    "key_event": {"event": "doc_digest"},
    "audit_run": {"report": "doc_digest"},
    "redaction": {"request": "doc_digest"},
    "import": {"report": "doc_digest"},
}

_U64 = struct.Struct(">Q")
MAX_U63 = 2**63 - 1  # seq and recorded_at_us must fit a signed 64-bit column


def genesis_hash(ledger_id: str) -> bytes:
    """``prev_hash`` of the entry at seq 0, bound to the ledger id."""
    return sha256(GENESIS_TAG + ledger_id.encode("utf-8"))


def build_envelope(ledger_id: str, kind: str, fields: dict[str, Any],
                   payloads: dict[str, str | None]) -> bytes:
    """Canonical envelope bytes.  ``fields`` must not use the reserved keys."""
    if kind not in KINDS:
        raise ValueError(f"unknown entry kind {kind!r}")
    reserved = {"v", "ledger", "kind", "payloads"} & fields.keys()
    if reserved:
        raise ValueError(f"reserved envelope keys in fields: {sorted(reserved)}")
    doc: dict[str, Any] = {"v": FORMAT_VERSION, "ledger": ledger_id, "kind": kind,
                           **fields, "payloads": payloads}
    return canonical_json(doc)


def body_hash(envelope: bytes) -> bytes:
    return sha256(ENVELOPE_TAG + envelope)


def entry_hash(prev_hash: bytes, seq: int, recorded_at_us: int, body: bytes) -> bytes:
    """The chain link; ``body`` is the 32-byte body hash."""
    if len(prev_hash) != HASH_SIZE or len(body) != HASH_SIZE:
        raise ValueError("prev_hash and body_hash must be 32 bytes")
    if not (0 <= seq <= MAX_U63 and 0 <= recorded_at_us <= MAX_U63):
        raise ValueError("seq and recorded_at_us must be in [0, 2**63-1]")
    return sha256(ENTRY_TAG + prev_hash + _U64.pack(seq) + _U64.pack(recorded_at_us) + body)


@dataclass(frozen=True)
class LinkedEntry:
    """An entry's hashed parts as stored."""

    seq: int
    recorded_at_us: int
    envelope: bytes
    body_hash: bytes
    prev_hash: bytes
    entry_hash: bytes


def link(prev_hash: bytes, seq: int, recorded_at_us: int, envelope: bytes) -> LinkedEntry:
    b = body_hash(envelope)
    return LinkedEntry(seq, recorded_at_us, envelope, b, prev_hash,
                       entry_hash(prev_hash, seq, recorded_at_us, b))
