"""Entry -> JSON views, one per audience; the only place a stored entry is shaped for
output.

* :func:`agent_view`, :func:`developer_view`, :func:`auditor_view` (:func:`layer_view`):
  a query row cut down to a disclosure layer (allow-lists, :data:`LAYER_FIELDS`) —
  ``ledger query``, ``GET /v1/entries``, ``GET /v1/export?format=rows``.
* :func:`entry_detail`: one entry with its payload texts and hashes — ``Ledger.get``,
  ``ledger show``, ``GET /v1/entries/{seq}``.
* :func:`export_record` / :func:`export_line`: the ``entries.jsonl`` record of an export
  bundle (``ledger export``, ``GET /v1/export?format=records``).
* :func:`proof_entry`: the ``entry`` object of an inclusion-proof bundle.

``row`` is a stored entry (``ledger.store.entries.EntryRow`` or any object with its
attributes); ``blobs`` maps payload digests to their stored bytes.
"""

from __future__ import annotations

import base64
import json
from typing import Any

from ledger.clock import format_us
from ledger.core.bundle import entry_line, entry_record
from ledger.core.entry import PAYLOAD_MAP, hash_hex
from ledger.errors import UsageError

LAYERS = ("agent", "developer", "auditor")
# Allow-lists, never deny-lists: a field not named here is never shown to that layer.
AGENT_FIELDS = ("seq", "recorded_at", "kind", "status", "agent_message")
DEVELOPER_FIELDS = AGENT_FIELDS + ("engine", "constraint_id", "subject", "admission",
                                   "developer_fields")
AUDITOR_FIELDS = DEVELOPER_FIELDS + (
    "producer", "idempotency_key", "proof_ref", "att_verdict", "att_kid", "att_iss",
    "preimage", "attestation", "query", "meta", "document", "payloads", "envelope",
    "body_hash", "prev_hash", "entry_hash")
LAYER_FIELDS = {"agent": AGENT_FIELDS, "developer": DEVELOPER_FIELDS, "auditor": AUDITOR_FIELDS}


# -- disclosure layers ----------------------------------------------------------------
def _text(data: bytes | None) -> str | None:
    return None if data is None else data.decode("utf-8", "replace")


def _json(data: bytes | None) -> Any:
    if data is None:
        return None
    try:
        return json.loads(data)
    except ValueError:
        return None


def row_view(row: Any, blobs: dict[str, bytes]) -> dict[str, Any]:
    """Every field of a stored entry, JSON-ready (what the auditor layer may see)."""
    cols = PAYLOAD_MAP.get(row.kind, {})
    digests = {name: getattr(row, c) for name, c in cols.items() if getattr(row, c)}
    data = {name: blobs.get(d) for name, d in digests.items()}
    doc = _json(blobs.get(row.doc_digest)) if row.doc_digest else None
    result = doc if row.kind == "result" and isinstance(doc, dict) else None
    return {
        "seq": row.seq, "recorded_at": format_us(row.recorded_at), "kind": row.kind,
        "status": row.status,
        "agent_message": result.get("agent_message") if result else None,
        "engine": row.engine, "constraint_id": row.constraint_id, "subject": row.subject,
        "admission": row.admission,
        "developer_fields": result.get("developer_fields") if result else None,
        "producer": row.producer, "idempotency_key": row.idempotency_key,
        "proof_ref": row.proof_ref, "att_verdict": row.att_verdict, "att_kid": row.att_kid,
        "att_iss": row.att_iss, "preimage": _text(data.get("preimage")),
        "attestation": _text(data.get("attestation")), "query": _text(data.get("query")),
        "meta": _json(data.get("meta")), "document": doc if result is None else None,
        "payloads": digests, "envelope": bytes(row.envelope).decode("utf-8", "replace"),
        "body_hash": hash_hex(bytes(row.body_hash)), "prev_hash": hash_hex(bytes(row.prev_hash)),
        "entry_hash": hash_hex(bytes(row.entry_hash)),
    }


def project(view: dict[str, Any], layer: str) -> dict[str, Any]:
    """The fields of ``view`` that ``layer`` may see (allow-list), in a fixed order.
    Raises UsageError for an unknown layer."""
    try:
        allowed = LAYER_FIELDS[layer]
    except KeyError:
        raise UsageError(f"layer must be one of {', '.join(LAYERS)}", field="layer") from None
    return {k: view.get(k) for k in allowed}


def layer_view(row: Any, blobs: dict[str, bytes], layer: str) -> dict[str, Any]:
    """``row`` as ``layer`` (agent, developer, auditor) sees it.  Raises UsageError."""
    return project(row_view(row, blobs), layer)


def agent_view(row: Any, blobs: dict[str, bytes]) -> dict[str, Any]:
    """Layer 1: the verdict and the agent message."""
    return layer_view(row, blobs, "agent")


def developer_view(row: Any, blobs: dict[str, bytes]) -> dict[str, Any]:
    """Layer 2: adds the engine, constraint, subject, admission and developer fields."""
    return layer_view(row, blobs, "developer")


def auditor_view(row: Any, blobs: dict[str, bytes]) -> dict[str, Any]:
    """Layer 3: everything, payload texts and hashes included."""
    return layer_view(row, blobs, "auditor")


# -- one entry in full ----------------------------------------------------------------
def entry_detail(row: Any, blobs: dict[str, bytes]) -> dict[str, Any]:
    """One stored entry with its payloads (``Ledger.get``): every column, each payload's
    digest and text (``missing`` when its bytes are not stored), the parsed document
    and the hashes."""
    cols = PAYLOAD_MAP[row.kind]
    payloads: dict[str, Any] = {}
    for name, column in cols.items():
        digest = getattr(row, column)
        if digest is None:
            continue
        data = blobs.get(digest)
        payloads[name] = {"digest": digest,
                          "text": data.decode("utf-8") if data is not None else None,
                          "missing": data is None}
    doc = payloads.get("result") or payloads.get("event") or payloads.get("report")
    parsed = json.loads(doc["text"]) if doc and doc["text"] else None
    return {
        "seq": row.seq, "kind": row.kind, "recorded_at": format_us(row.recorded_at),
        "engine": row.engine, "status": row.status, "constraint_id": row.constraint_id,
        "proof_ref": row.proof_ref, "subject": row.subject, "producer": row.producer,
        "idempotency_key": row.idempotency_key, "admission": row.admission,
        "attestation_verdict": row.att_verdict, "attestation_kid": row.att_kid,
        "attestation_iss": row.att_iss,
        "document": parsed, "payloads": payloads,
        "envelope": bytes(row.envelope).decode("utf-8"),
        "body_hash": hash_hex(bytes(row.body_hash)),
        "prev_hash": hash_hex(bytes(row.prev_hash)),
        "entry_hash": hash_hex(bytes(row.entry_hash)),
    }


# -- export and proof bundles ---------------------------------------------------------
def _export_args(row: Any, blobs: dict[str, bytes]) -> tuple[Any, ...]:
    digests = {name: getattr(row, col) for name, col in PAYLOAD_MAP[row.kind].items()}
    return (row.seq, row.kind, row.recorded_at, bytes(row.envelope),
            hash_hex(bytes(row.body_hash)), hash_hex(bytes(row.prev_hash)),
            hash_hex(bytes(row.entry_hash)),
            {name: (d, blobs.get(d)) for name, d in digests.items() if d is not None})


def export_record(row: Any, blobs: dict[str, bytes]) -> dict[str, Any]:
    """The ``entries.jsonl`` record of ``row`` (docs/export.md)."""
    return entry_record(*_export_args(row, blobs))


def export_line(row: Any, blobs: dict[str, bytes]) -> bytes:
    """``dump_line(export_record(row, blobs))``, byte for byte (the export's hot path)."""
    return entry_line(*_export_args(row, blobs))


def committed_digests(row: Any) -> dict[str, str | None]:
    """The payload digests ``row``'s envelope commits to (by payload name)."""
    return json.loads(bytes(row.envelope)).get("payloads") or {}


def proof_entry(row: Any, blobs: dict[str, bytes]) -> dict[str, Any]:
    """The ``entry`` object of an inclusion-proof bundle (docs/format-checkpoint.md): the
    envelope, the committed payloads' bytes (null when not stored) and the hashes."""
    payloads = {name: {"digest": d, "data_b64": (base64.b64encode(blobs[d]).decode("ascii")
                                                 if d in blobs else None)}
                for name, d in sorted(committed_digests(row).items()) if d is not None}
    return {
        "envelope": bytes(row.envelope).decode("utf-8"), "recorded_at_us": row.recorded_at,
        "prev_hash": hash_hex(bytes(row.prev_hash)), "body_hash": hash_hex(bytes(row.body_hash)),
        "entry_hash": hash_hex(bytes(row.entry_hash)), "payloads": payloads}
