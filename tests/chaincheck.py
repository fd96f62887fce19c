"""Independent re-computation of a stored chain, for tests (uses only core hashing)."""

from __future__ import annotations

import hashlib
import json

from sqlalchemy import create_engine, text

from ledger.core.entry import body_hash, entry_hash, genesis_hash
from ledger.store import codec
from ledger.store.db import normalize_url


def recompute_chain(url: str) -> int:
    """Assert every stored hash recomputes, seq is gapless from 0 and time never
    decreases; return the size."""
    eng = create_engine(normalize_url(url))
    with eng.connect() as conn:
        ledger_id = conn.execute(text("SELECT ledger_id FROM ledger_meta")).scalar_one()
        size, head = conn.execute(text("SELECT size, head_hash FROM head")).one()
        rows = conn.execute(text(
            "SELECT seq, kind, recorded_at, envelope, body_hash, prev_hash, entry_hash, "
            "proof_ref FROM entries ORDER BY seq")).all()
        blobs = {pid: (salt, codec.decode(how, bytes(data)))
                 for pid, salt, how, data in conn.execute(text(
                     "SELECT pid, salt, codec, data FROM payloads")).all()}
    eng.dispose()
    prev = genesis_hash(ledger_id)
    last_t = 0
    for i, r in enumerate(rows):
        assert r.seq == i, f"gap or reorder at {i}: seq {r.seq}"
        assert bytes(r.prev_hash) == prev, f"broken link at seq {r.seq}"
        assert bytes(r.body_hash) == body_hash(bytes(r.envelope))
        assert bytes(r.entry_hash) == entry_hash(prev, r.seq, r.recorded_at, bytes(r.body_hash))
        assert r.recorded_at >= last_t
        env = json.loads(bytes(r.envelope))
        committed = env.get("payloads") or {}
        for slot, name in ((0, "result" if r.kind == "result" else None), (1, "preimage")):
            d = committed.get(name) if name else next(iter(committed.values()), None)
            if d and r.kind == "result" and env["v"] == 2:
                salt, data = blobs[r.seq * 8 + slot]
                tag = b"ledger.payload.v2\x00"
                assert "sha256:" + hashlib.sha256(tag + bytes(salt) + data).hexdigest() == d
            elif d and (slot == 0 or r.kind == "result"):
                data = blobs[r.seq * 8 + slot][1]
                assert "sha256:" + hashlib.sha256(data).hexdigest() == d
        pre = blobs.get(r.seq * 8 + 1) if r.kind == "result" else None
        if pre is not None:
            assert "sha256:" + hashlib.sha256(pre[1]).hexdigest() == r.proof_ref
        prev, last_t = bytes(r.entry_hash), r.recorded_at
    assert size == len(rows)
    assert bytes(head) == prev
    return len(rows)
