"""The attestation trust store as the fold of the ``key_event`` entries in the chain.

Reads only: the key-event use cases that append are in ``ledger.ops.trust``.
"""

from __future__ import annotations

import json

from sqlalchemy import Engine

from ledger.crypto.trust import ACTIONS, TrustStore
from ledger.ops.redaction_map import documents
from ledger.store import entries as repo
from ledger.store.db import connect


def load_trust_store(engine: Engine, since: TrustStore | None = None) -> TrustStore:
    """Fold every key_event entry (or only those after ``since.last_event_seq``)."""
    store = since or TrustStore()
    with connect(engine) as conn:
        # only documents that match their digest are folded in; a missing, modified
        # or unreadable key event is the audit's finding, never trust
        rows = documents(conn, "key_event", after=store.last_event_seq)
    for seq, data in rows:
        try:
            event = json.loads(data)
        except ValueError:
            continue
        if isinstance(event, dict) and event.get("action") in ACTIONS:
            try:
                store.apply(seq, event)
            except (KeyError, TypeError):
                continue
    return store


def last_key_event_seq(engine: Engine) -> int:
    """The seq of the newest key_event entry, or -1."""
    with connect(engine) as conn:
        v = repo.max_seq(conn, "key_event")
    return -1 if v is None else v
