"""Entry envelopes, payload commitments, entry hashes and the chain link.

Hashed structures (all SHA-256; see docs/format.md for worked vectors)::

    v1 payload digest = SHA-256(payload bytes)                   -- content address;
                     the evidence-preimage digest therefore equals the proof_ref
    v2 commitment  = SHA-256(PAYLOAD_TAG || salt || payload bytes)  -- hiding: a random
                     32-byte salt per payload, stored beside the bytes and erased with them
                     (v2 ``result`` payloads only; other v2 documents keep plain digests)
    envelope       = RFC 8785 JSON of {"v":1|2, "ledger":..., "kind":..., <fields>,
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

import hashlib
import struct
from dataclasses import dataclass
from json.encoder import encode_basestring
from typing import Any

from ledger.core.canonical import canonical_json
from ledger.core.digest import digest_text as digest_text  # re-exported
from ledger.core.digest import hash_hex as hash_hex  # re-exported
from ledger.core.digest import parse_hash_hex as parse_hash_hex  # re-exported
from ledger.core.digest import sha256

FORMAT_VERSION = 1  # the version of key_event, audit_run, import and reverify_run envelopes
FORMAT_V2 = 2  # result, redaction and hold envelopes written today
VERSIONS = (FORMAT_VERSION, FORMAT_V2)
HASH_SIZE = 32
SALT_SIZE = 32

ENVELOPE_TAG = b"ledger.envelope.v1\x00"
ENTRY_TAG = b"ledger.entry.v1\x00"
GENESIS_TAG = b"ledger.genesis.v1\x00"
PAYLOAD_TAG = b"ledger.payload.v2\x00"  # 18 bytes

KINDS = ("result", "key_event", "audit_run", "redaction", "hold", "import", "reverify_run")
# The kinds written as v2 envelopes (key_event, audit_run, import and reverify_run keep v1).
V2_KINDS = ("result", "redaction", "hold")

# Payload name -> storage slot (the payload table's key is built from the entry's seq and
# the slot: ledger.store.layout, which also says how many slots an entry has).  The single
# document of the other kinds uses slot 0.
SLOTS: dict[str, int] = {"result": 0, "preimage": 1, "attestation": 2, "query": 3, "meta": 4,
                         "subject": 5}
SUBJECT_SLOT = SLOTS["subject"]

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
    "redaction": {"producer": "producer"},
    "hold": {"action": "status", "producer": "producer"},
    "import": {"source": "subject", "outcome": "status", "producer": "producer"},
    "reverify_run": {"outcome": "status", "producer": "producer"},
}
# v2 result envelopes have no subject (it is the committed ``subject`` payload).
V2_RESULT_FIELDS = tuple(f for f in RESULT_FIELDS if f != "subject")
COLUMN_MAP_V2: dict[str, dict[str, str]] = {**COLUMN_MAP,
                                            "result": {f: f for f in V2_RESULT_FIELDS}}
# Envelope payload name -> storage slot, per kind (v1 results have no subject payload).
PAYLOAD_MAP: dict[str, dict[str, int]] = {
    "result": {n: s for n, s in SLOTS.items() if n != "subject"},
    "key_event": {"event": 0},
    "audit_run": {"report": 0},
    "redaction": {"request": 0},
    "hold": {"order": 0},
    "import": {"report": 0},
    "reverify_run": {"report": 0},
}
PAYLOAD_MAP_V2: dict[str, dict[str, int]] = {**PAYLOAD_MAP, "result": dict(SLOTS)}
# The payload that holds a kind's main document.
DOC_PAYLOAD = {"result": "result", "key_event": "event", "audit_run": "report",
               "redaction": "request", "hold": "order", "import": "report",
               "reverify_run": "report"}
# Non-result documents: {envelope field: document key} that must agree (the audit and every
# read check them).
DOC_FIELDS: dict[str, dict[str, str]] = {
    "key_event": {"action": "action", "issuer": "issuer", "kid": "kid",
                  "thumbprint": "thumbprint"},
    "audit_run": {"outcome": "outcome"},
    "import": {"outcome": "outcome", "source": "source"},
    "reverify_run": {"outcome": "outcome"},
}
# Envelope keys (besides v, ledger, kind, payloads) of the v2 kinds, exactly.
V2_FIELDS: dict[str, tuple[str, ...]] = {
    "result": V2_RESULT_FIELDS,
    "redaction": ("producer", "role"),
    "hold": ("action", "producer", "role"),
}

_V2_FIELD_SETS = {kind: frozenset(names) for kind, names in V2_FIELDS.items()}
_U64 = struct.Struct(">Q")
MAX_U63 = 2**63 - 1  # seq and recorded_at_us must fit a signed 64-bit column


def genesis_hash(ledger_id: str) -> bytes:
    """``prev_hash`` of the entry at seq 0, bound to the ledger id."""
    return sha256(GENESIS_TAG + ledger_id.encode("utf-8"))


def version_of(kind: str) -> int:
    """The envelope version new entries of ``kind`` are written with."""
    return FORMAT_V2 if kind in V2_KINDS else FORMAT_VERSION


def column_map(kind: str, v: int) -> dict[str, str]:
    """Envelope field -> entries column of ``kind`` in envelope version ``v``."""
    return (COLUMN_MAP_V2 if v == FORMAT_V2 else COLUMN_MAP)[kind]


def payload_map(kind: str, v: int) -> dict[str, int]:
    """Payload name -> slot of ``kind`` in envelope version ``v``."""
    return (PAYLOAD_MAP_V2 if v == FORMAT_V2 else PAYLOAD_MAP)[kind]


def slot_names(kind: str) -> dict[int, str]:
    """Slot -> payload name of ``kind`` (any version)."""
    return {s: n for n, s in PAYLOAD_MAP_V2[kind].items()}


def commitment(salt: bytes, data: bytes) -> str:
    """The hiding commitment of a v2 result payload:
    ``"sha256:" + hex(SHA-256(PAYLOAD_TAG || salt || data))``; ``salt`` is 32 bytes."""
    if len(salt) != SALT_SIZE:
        raise ValueError("a payload salt is 32 bytes")
    return "sha256:" + hashlib.sha256(PAYLOAD_TAG + salt + data).hexdigest()


def payload_commitment(kind: str, v: int, salt: bytes | None, data: bytes) -> str:
    """What the envelope of a (kind, version) entry says about ``data``: the salted
    commitment for v2 results, the plain digest otherwise."""
    if v == FORMAT_V2 and kind == "result":
        if salt is None:
            raise ValueError("a v2 result payload needs its salt")
        return commitment(salt, data)
    return digest_text(data)


def build_envelope(ledger_id: str, kind: str, fields: dict[str, Any],
                   payloads: dict[str, str | None], v: int = FORMAT_VERSION) -> bytes:
    """Canonical envelope bytes of version ``v``.  ``fields`` must not use the reserved
    keys; a v2 envelope must have exactly the keys of its kind (``V2_FIELDS``) and the
    payload names of ``PAYLOAD_MAP_V2``.  Raises ValueError."""
    if kind not in KINDS:
        raise ValueError(f"unknown entry kind {kind!r}")
    if v not in VERSIONS:
        raise ValueError(f"unknown envelope version {v!r}")
    reserved = {"v", "ledger", "kind", "payloads"} & fields.keys()
    if reserved:
        raise ValueError(f"reserved envelope keys in fields: {sorted(reserved)}")
    if v == FORMAT_V2:
        if kind not in V2_FIELDS:
            raise ValueError(f"{kind} entries are not written as v2")
        if fields.keys() != _V2_FIELD_SETS[kind]:
            raise ValueError(f"v2 {kind} fields must be exactly {sorted(V2_FIELDS[kind])}")
        if payloads.keys() != PAYLOAD_MAP_V2[kind].keys():
            raise ValueError(f"v2 {kind} payloads must be exactly "
                             f"{sorted(PAYLOAD_MAP_V2[kind])}")
    if v == FORMAT_V2 and kind == "result":
        fast = _result_envelope_v2(ledger_id, fields, payloads)
        if fast is not None:
            return fast
    doc: dict[str, Any] = {"v": v, "ledger": ledger_id, "kind": kind,
                           **fields, "payloads": payloads}
    return canonical_json(doc)


# The v2 result envelope in RFC 8785 order (its keys are ASCII, so code-point order): a
# template with one slot per field value, the ledger id and each payload digest.
_V2_RESULT_ORDER = tuple(sorted((*V2_RESULT_FIELDS, "v", "ledger", "kind", "payloads")))
_V2_PAYLOAD_ORDER = tuple(sorted(SLOTS))
# the fields before the ledger id in that order, and those after the payloads
_V2_FIELDS_BEFORE = tuple(k for k in _V2_RESULT_ORDER if k in V2_RESULT_FIELDS and k < "ledger")
_V2_FIELDS_AFTER = tuple(k for k in _V2_RESULT_ORDER if k in V2_RESULT_FIELDS and k > "payloads")


def _v2_template() -> str:
    parts = []
    for key in _V2_RESULT_ORDER:
        if key == "v":
            parts.append('"v":2')
        elif key == "kind":
            parts.append('"kind":"result"')
        elif key == "ledger":
            parts.append('"ledger":%s')
        elif key == "payloads":
            parts.append('"payloads":{' + ",".join(f'"{n}":%s' for n in _V2_PAYLOAD_ORDER)
                         + "}")
        else:
            parts.append(f'"{key}":%s')
    return "{" + ",".join(parts) + "}"


_V2_TEMPLATE = _v2_template()
_NULL_OR_STR = frozenset({str, type(None)})


def _result_envelope_v2(ledger_id: str, fields: dict[str, Any],
                        payloads: dict[str, str | None]) -> bytes | None:
    """The v2 result envelope written directly into a template (no intermediate dict, no
    generic walk): the same bytes as ``canonical_json`` of the document, which a property
    test pins.  Only for the common shape (every value a string or null, valid Unicode);
    None otherwise, and the caller takes the generic path (which also names the fault)."""
    values = [*[fields[k] for k in _V2_FIELDS_BEFORE], ledger_id,
              *[payloads[n] for n in _V2_PAYLOAD_ORDER], *[fields[k] for k in _V2_FIELDS_AFTER]]
    if not set(map(type, values)) <= _NULL_OR_STR:
        return None
    text = _V2_TEMPLATE % tuple(["null" if x is None else encode_basestring(x)
                                 for x in values])
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate: the generic path names it
        return None


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
