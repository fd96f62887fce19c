"""Entry -> JSON views, one per audience; the only place a stored entry is shaped for
output.

* :func:`layer_view`: a checked entry cut down to a disclosure layer (allow-lists,
  :data:`LAYER_FIELDS`) with its ``integrity`` verdict — ``ledger query``,
  ``GET /v1/entries[/{seq}]``, ``GET /v1/export?format=rows``, the console.
* :func:`entry_detail`: one checked entry with its payload texts and hashes —
  ``Ledger.get``, ``ledger show``.

The two read views are built from a ``ledger.core.readcheck.CheckedEntry`` (the
envelope's values and the payloads that matched their commitments; docs/reads.md), never
from the indexed columns.
* :func:`export_record` / :func:`export_line`: the ``entries.jsonl`` record of an export
  bundle (``ledger export``, ``GET /v1/export?format=records``).
* :func:`proof_entry`: the ``entry`` object of an inclusion-proof bundle.

``row`` is a stored entry (``ledger.store.entries.EntryRow`` or any object with its
attributes); ``blobs`` maps payload slots to their stored ``(salt, data)``
(``ledger.store.entries.Payload``); the digests/commitments are the envelope's.
"""

from __future__ import annotations

import base64
import json
from typing import Any

from ledger.clock import format_us
from ledger.core.bundle import entry_line, entry_record
from ledger.core.entry import FORMAT_V2, hash_hex, payload_map
from ledger.core.erasure import RedactionMap
from ledger.core.fastjson import loads as fast_loads
from ledger.core.readcheck import CheckedEntry, as_bytes
from ledger.core.tenant import DEFAULT_TENANT, tseq_of
from ledger.errors import UsageError

LAYERS = ("agent", "developer", "auditor")
# Allow-lists, never deny-lists: a field not named here is never shown to that layer.
# ``integrity`` (every layer) is the read verdict, cut to the layer (docs/reads.md);
# ``findings`` (developers: codes, auditors: the findings) what the audit found on the entry.
AGENT_FIELDS = ("seq", "recorded_at", "kind", "status", "agent_message", "integrity")
DEVELOPER_FIELDS = AGENT_FIELDS + ("engine", "constraint_id", "subject", "admission",
                                   "developer_fields", "findings", "tenant")
AUDITOR_FIELDS = DEVELOPER_FIELDS + (
    "producer", "idempotency_key", "proof_ref", "att_verdict", "att_kid", "att_iss",
    "preimage", "attestation", "query", "meta", "document", "payloads", "envelope",
    "body_hash", "prev_hash", "entry_hash")
LAYER_FIELDS = {"agent": AGENT_FIELDS, "developer": DEVELOPER_FIELDS, "auditor": AUDITOR_FIELDS}


# -- disclosure layers ----------------------------------------------------------------
def _json(data: bytes | None) -> Any:
    if data is None:
        return None
    try:
        return json.loads(data)
    except ValueError:
        return None


def _envelope(row: Any) -> dict[str, Any]:
    try:
        env = fast_loads(bytes(row.envelope))
    except ValueError:
        return {}
    return env if isinstance(env, dict) else {}


def named_payloads(row: Any, blobs: Any, env: dict[str, Any] | None = None,
                   ) -> tuple[dict[str, str], dict[str, Any]]:
    """(name -> digest or commitment the envelope holds, name -> stored (salt, data)) of
    ``row``'s committed payloads."""
    env = _envelope(row) if env is None else env
    v = env.get("v", 1)
    committed = env["payloads"] if isinstance(env.get("payloads"), dict) else {}
    try:
        slots = payload_map(row.kind, FORMAT_V2 if v == FORMAT_V2 else 1)
    except KeyError:
        slots = {}
    digests = {n: d for n, d in committed.items() if d is not None and n in slots}
    return digests, {n: blobs[slots[n]] for n in digests if slots[n] in blobs}


def _utf8_text(data: bytes | None) -> str | None:
    return None if data is None else data.decode("utf-8", "replace")


def row_view(row: Any, c: CheckedEntry) -> dict[str, Any]:
    """Every field of a checked entry, JSON-ready (what the auditor layer may see): the
    envelope's values and the payloads that matched their commitments, never the indexed
    columns (``ledger.core.readcheck``); a payload that did not check is null."""
    doc = c.document
    result = doc if c.kind == "result" else None
    v, t = c.values, c.texts
    return {
        "seq": c.seq, "recorded_at": format_us(c.recorded_at), "kind": c.kind,
        "status": v["status"], "tenant": c.tenant,
        "agent_message": result.get("agent_message") if result else None,
        "engine": v["engine"], "constraint_id": v["constraint_id"],
        "subject": v["subject"], "admission": v["admission"],
        "developer_fields": result.get("developer_fields") if result else None,
        "producer": v["producer"], "idempotency_key": v["idempotency_key"],
        "proof_ref": v["proof_ref"], "att_verdict": v["att_verdict"], "att_kid": v["att_kid"],
        "att_iss": v["att_iss"], "preimage": _utf8_text(t.get("preimage")),
        "attestation": _utf8_text(t.get("attestation")),
        "query": _utf8_text(t.get("query")),
        "meta": _json(t.get("meta")), "document": doc if result is None else None,
        "payloads": c.commitments,
        "envelope": as_bytes(row.envelope).decode("utf-8", "replace"),
        "body_hash": _hex(row.body_hash), "prev_hash": _hex(row.prev_hash),
        "entry_hash": _hex(row.entry_hash),
    }


def _hex(value: Any) -> str:
    return hash_hex(as_bytes(value))


def project(view: dict[str, Any], layer: str) -> dict[str, Any]:
    """The fields of ``view`` that ``layer`` may see (allow-list), in a fixed order.
    Raises UsageError for an unknown layer."""
    try:
        allowed = LAYER_FIELDS[layer]
    except KeyError:
        raise UsageError(f"layer must be one of {', '.join(LAYERS)}", field="layer") from None
    return {k: view.get(k) for k in allowed}


def layer_view(row: Any, c: CheckedEntry, layer: str,
               findings: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """``row`` as ``layer`` (agent, developer, auditor) sees it, with its ``integrity``
    object (docs/reads.md) and, above the agent layer, the audit findings about it
    (developers: their codes; auditors: the findings).  Raises UsageError."""
    view = row_view(row, c)
    view["integrity"] = c.integrity.to_dict(layer)
    view["findings"] = list(findings or ()) if layer == "auditor" else \
        list(dict.fromkeys(f.get("code") for f in findings or ()))
    return project(view, layer)


# -- one entry in full ----------------------------------------------------------------
def entry_detail(row: Any, c: CheckedEntry,
                 findings: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """One stored entry with its payloads (``Ledger.get``, ``ledger show``): the
    envelope's values, each committed payload's digest, its stored text and whether it
    ``checked`` against the digest (``missing`` when its bytes are not stored,
    ``redacted`` when a redaction erased them), the parsed main document (only when it
    checked), the hashes, the ``integrity`` verdict and the audit findings about it."""
    payloads: dict[str, Any] = {}
    for name, digest in c.commitments.items():
        data = c.stored.get(name)
        payloads[name] = {"digest": digest, "text": _utf8_text(data),
                          "missing": data is None, "checked": name in c.texts,
                          "redacted": name in c.integrity.redacted}
    v = c.values
    return {
        "seq": c.seq, "kind": c.kind, "recorded_at": format_us(c.recorded_at),
        "tenant": c.tenant, "tseq": c.tseq,
        "engine": v["engine"], "status": v["status"], "constraint_id": v["constraint_id"],
        "proof_ref": v["proof_ref"], "subject": v["subject"], "producer": v["producer"],
        "idempotency_key": v["idempotency_key"], "admission": v["admission"],
        "attestation_verdict": v["att_verdict"], "attestation_kid": v["att_kid"],
        "attestation_iss": v["att_iss"],
        "document": c.document, "payloads": payloads,
        "envelope": as_bytes(row.envelope).decode("utf-8", "replace"),
        "body_hash": _hex(row.body_hash), "prev_hash": _hex(row.prev_hash),
        "entry_hash": _hex(row.entry_hash),
        "integrity": c.integrity.to_dict("auditor"), "findings": list(findings or ()),
    }


# -- export and proof bundles ---------------------------------------------------------
def _export_args(row: Any, blobs: Any, redactions: RedactionMap | None) -> tuple[Any, ...]:
    env = _envelope(row)  # parsed once per record
    digests, stored = named_payloads(row, blobs, env)
    salted = row.kind == "result" and env.get("v") == FORMAT_V2
    out: dict[str, tuple[str, bytes | None, dict[str, Any]]] = {}
    for name, d in digests.items():
        p = stored.get(name)
        extra: dict[str, Any] = {}
        if salted:
            extra["salt_b64"] = None if p is None or p[0] is None else \
                base64.b64encode(p[0]).decode("ascii")
        by = (redactions or {}).get((row.seq, name))
        if p is None and by is not None:
            extra["redacted_by"] = by
        out[name] = (d, None if p is None else p[1], extra)
    return (row.seq, row.kind, row.recorded_at, bytes(row.envelope),
            hash_hex(bytes(row.body_hash)), hash_hex(bytes(row.prev_hash)),
            hash_hex(bytes(row.entry_hash)), out)


def export_record(row: Any, blobs: Any, redactions: RedactionMap | None = None,
                  ) -> dict[str, Any]:
    """The ``entries.jsonl`` record of ``row`` (docs/export.md); a v2 result's payloads
    carry ``salt_b64``, an erased one ``data_b64: null`` and ``redacted_by``."""
    return entry_record(*_export_args(row, blobs, redactions))


def export_line(row: Any, blobs: Any, redactions: RedactionMap | None = None,
                v2: bool = False) -> bytes:
    """``dump_line(export_record(row, blobs))``, byte for byte (the export's hot path);
    ``v2``: the ``ledger-export/2`` line, with the entry's tenant and tseq."""
    if not v2:
        return entry_line(*_export_args(row, blobs, redactions))
    tenant = getattr(row, "tenant", None) or DEFAULT_TENANT
    seq, kind, t, env, body, prev, entry, payloads = _export_args(row, blobs, redactions)
    return entry_line(seq, kind, t, env, body, prev, entry, payloads,
                      tenant=(tenant, tseq_of(tenant, row.seq, getattr(row, "tseq", None))))


def proof_entry(row: Any, blobs: Any) -> dict[str, Any]:
    """The ``entry`` object of an inclusion-proof bundle (docs/format-checkpoint.md): the
    envelope, the committed payloads' bytes (null when not stored) and the hashes; a v2
    result's payloads also carry ``salt_b64``; an entry of a tenant other than the default
    one also its ``tenant`` and ``tseq`` (its tenant link binds them; a default-tenant
    entry's object is the one it always was)."""
    digests, stored = named_payloads(row, blobs)
    payloads: dict[str, Any] = {}
    for name, d in sorted(digests.items()):
        p = stored.get(name)
        payloads[name] = {"digest": d, "data_b64": None if p is None
                          else base64.b64encode(p[1]).decode("ascii")}
        if p is not None and p[0] is not None:
            payloads[name]["salt_b64"] = base64.b64encode(p[0]).decode("ascii")
    out = {
        "envelope": bytes(row.envelope).decode("utf-8"), "recorded_at_us": row.recorded_at,
        "prev_hash": hash_hex(bytes(row.prev_hash)), "body_hash": hash_hex(bytes(row.body_hash)),
        "entry_hash": hash_hex(bytes(row.entry_hash)), "payloads": payloads}
    tenant = getattr(row, "tenant", DEFAULT_TENANT)
    if tenant != DEFAULT_TENANT:
        out["tenant"], out["tseq"] = tenant, row.tseq
    return out
