"""The attestation trust store as the fold of the ``key_event`` entries in the chain.

Reads only: the key-event use cases that append are in ``ledger.ops.trust``.
"""

from __future__ import annotations

import json

from sqlalchemy import Engine, select

from ledger.core.entry import digest_text
from ledger.crypto.trust import ACTIONS, TrustStore
from ledger.store import repository as repo
from ledger.store.schema import entries


def load_trust_store(engine: Engine, since: TrustStore | None = None) -> TrustStore:
    """Fold every key_event entry (or only those after ``since.last_event_seq``)."""
    store = since or TrustStore()
    with engine.connect() as conn:
        rows = conn.execute(select(entries.c.seq, entries.c.doc_digest).where(
            entries.c.kind == "key_event", entries.c.seq > store.last_event_seq,
        ).order_by(entries.c.seq)).all()
        blobs = repo.get_payloads(conn, [r.doc_digest for r in rows])
    for r in rows:
        data = blobs.get(r.doc_digest)
        # only documents that match their digest are folded in; a missing, modified
        # or unreadable key event is the audit's finding, never trust
        if data is None or digest_text(data) != r.doc_digest:
            continue
        try:
            event = json.loads(data)
        except ValueError:
            continue
        if isinstance(event, dict) and event.get("action") in ACTIONS:
            try:
                store.apply(r.seq, event)
            except (KeyError, TypeError):
                continue
    return store


def last_key_event_seq(engine: Engine) -> int:
    from sqlalchemy import func

    with engine.connect() as conn:
        v = conn.execute(select(func.max(entries.c.seq)).where(
            entries.c.kind == "key_event")).scalar()
    return -1 if v is None else int(v)
