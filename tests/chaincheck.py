"""Independent re-computation of a stored chain, for tests (uses only core hashing)."""

from __future__ import annotations

import hashlib

from sqlalchemy import create_engine, text

from ledger.core.entry import body_hash, entry_hash, genesis_hash
from ledger.store.db import normalize_url


def recompute_chain(url: str) -> int:
    """Assert every stored hash recomputes, seq is gapless from 0 and time never
    decreases; return the size."""
    eng = create_engine(normalize_url(url))
    with eng.connect() as conn:
        ledger_id = conn.execute(text("SELECT ledger_id FROM ledger_meta")).scalar_one()
        size, head = conn.execute(text("SELECT size, head_hash FROM head")).one()
        rows = conn.execute(text(
            "SELECT seq, recorded_at, envelope, body_hash, prev_hash, entry_hash, doc_digest, "
            "preimage_digest, proof_ref FROM entries ORDER BY seq")).all()
        blobs = dict(conn.execute(text("SELECT digest, data FROM payloads")).all())
    eng.dispose()
    prev = genesis_hash(ledger_id)
    last_t = 0
    for i, r in enumerate(rows):
        assert r.seq == i, f"gap or reorder at {i}: seq {r.seq}"
        assert bytes(r.prev_hash) == prev, f"broken link at seq {r.seq}"
        assert bytes(r.body_hash) == body_hash(bytes(r.envelope))
        assert bytes(r.entry_hash) == entry_hash(prev, r.seq, r.recorded_at, bytes(r.body_hash))
        assert r.recorded_at >= last_t
        for d in (r.doc_digest, r.preimage_digest):
            if d:
                assert "sha256:" + hashlib.sha256(bytes(blobs[d])).hexdigest() == d
        if r.preimage_digest:
            assert r.preimage_digest == r.proof_ref
        prev, last_t = bytes(r.entry_hash), r.recorded_at
    assert size == len(rows)
    assert bytes(head) == prev
    return len(rows)
