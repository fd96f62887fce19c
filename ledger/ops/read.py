"""Reading entries: the head, one entry with its payloads, a range of entries."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from ledger.clock import format_us
from ledger.core.entry import PAYLOAD_MAP, hash_hex
from ledger.errors import NotFound
from ledger.ops.context import LedgerContext
from ledger.store import repository as repo


def head(ctx: LedgerContext) -> dict[str, Any]:
    """Identity and size of the ledger, its head hash and the last recorded time."""
    with ctx.engine.connect() as conn:
        h = repo.read_head(conn)
    assert h is not None
    return {"ledger_id": ctx.meta.ledger_id, "origin": ctx.meta.origin,
            "size": h.size, "head_hash": hash_hex(h.head_hash),
            "last_recorded_at": format_us(h.last_recorded_at) if h.size else None}


def get_entry(ctx: LedgerContext, seq: int) -> dict[str, Any]:
    """One entry with its payloads (auditor view).  Raises NotFound."""
    with ctx.engine.connect() as conn:
        row = repo.get_entry(conn, seq)
        if row is None:
            raise NotFound(f"no entry with seq {seq}", field="seq")
        cols = PAYLOAD_MAP[row.kind]
        blobs = repo.get_payloads(conn, [getattr(row, c) for c in cols.values()])
    return entry_view(row, blobs)


def iter_entries(ctx: LedgerContext, start: int = 0, end: int | None = None) -> Iterator[Any]:
    """Stored entry rows with ``start <= seq < end``, in seq order."""
    with ctx.engine.connect() as conn:
        yield from repo.iter_entries(conn, start, end)


def entry_view(row: Any, blobs: dict[str, bytes]) -> dict[str, Any]:
    """A JSON-ready view of a stored entry (auditor layer: everything)."""
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
