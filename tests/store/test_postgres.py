"""The PostgreSQL one-statement append: its SQL link equals the format's entry vectors,
and a link that disagrees with the core's is never committed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ledger.core.entry import COLUMN_MAP, ENTRY_TAG, PAYLOAD_MAP, body_hash, entry_hash
from ledger.errors import LedgerError
from ledger.store import db, postgres
from ledger.store import entries as repo

VECTORS = json.loads((Path(__file__).parent.parent / "vectors" / "entries.json").read_text())


def _row(v: dict) -> tuple[dict, list[tuple[int, None, int, bytes]]]:
    envelope = bytes.fromhex(v["envelope_hex"])
    doc = json.loads(envelope)
    kind = v["kind"]
    row = {column: doc.get(name) for name, column in COLUMN_MAP[kind].items()}
    row.update(kind=kind, envelope=envelope, body_hash=body_hash(envelope))
    slots = PAYLOAD_MAP[kind]  # (revision 0005: payloads by (seq, slot); v1: no salt)
    blobs = [(slots[n], None, 0, bytes.fromhex(p["hex"])) for n, p in v["payloads"].items()
             if p]  # codec 0: stored as they are
    return row, blobs


def _stored(conn, seq: int) -> list[tuple[int, None, int, bytes]]:
    return sorted((slot, p.salt, 0, p.data) for slot, p in repo.get_payloads(conn, seq).items())


def _init(url: str, ledger_id: str, created_at: int):
    engine = db.make_engine(url)
    db.upgrade(engine)
    with db.transaction(engine) as conn:
        repo.create_meta(conn, repo.LedgerMeta(ledger_id, "vectors", 1, created_at),
                         bytes.fromhex(VECTORS["genesis_hash"]))
    return engine


def test_the_sql_link_reproduces_every_entry_vector(pg_url):
    entries = VECTORS["entries"]
    engine = _init(pg_url, VECTORS["ledger_id"], int(entries[0]["recorded_at_us"]) - 1)
    try:
        for v in entries:
            row, blobs = _row(v)
            got = postgres.append_one(engine, row, blobs, int(v["recorded_at_us"]), ENTRY_TAG,
                                      lambda p, s, t, b=row["body_hash"]: entry_hash(p, s, t, b))
            assert got is not None
            assert (got.seq, got.recorded_at) == (int(v["seq"]), int(v["recorded_at_us"]))
            assert got.prev_hash.hex() == v["prev_hash"]
            assert got.entry_hash.hex() == v["entry_hash"], v["name"]
        with db.connect(engine) as conn:
            head = repo.read_head(conn)
            assert head is not None and head.head_hash.hex() == VECTORS["head"]["head_hash"]
            for v in entries:
                assert _stored(conn, int(v["seq"])) == sorted(_row(v)[1])
    finally:
        engine.dispose()


def test_a_wrong_link_is_rolled_back_and_nothing_is_stored(pg_url):
    v = VECTORS["entries"][0]
    engine = _init(pg_url, VECTORS["ledger_id"], int(v["recorded_at_us"]) - 1)
    try:
        row, blobs = _row(v)
        with pytest.raises(LedgerError) as caught:
            postgres.append_one(engine, row, blobs, int(v["recorded_at_us"]), ENTRY_TAG,
                                lambda p, s, t: b"\x00" * 32)
        assert caught.value.code == "link_mismatch"
        with db.connect(engine) as conn:
            head = repo.read_head(conn)
            assert head is not None and head.size == 0
            assert head.head_hash.hex() == VECTORS["genesis_hash"]
            assert repo.max_seq(conn) is None
            assert repo.get_payloads(conn, 0) == {}
    finally:
        engine.dispose()


def test_a_guard_that_does_not_hold_writes_nothing(pg_url):
    v = VECTORS["entries"][0]
    engine = _init(pg_url, VECTORS["ledger_id"], int(v["recorded_at_us"]) - 1)
    try:
        row, blobs = _row(v)
        t = int(v["recorded_at_us"])
        assert postgres.append_one(engine, row, blobs, t, ENTRY_TAG,
                                   lambda *a: b"", guard=(t, postgres.MAX_BIGINT)) is None
        with db.connect(engine) as conn:
            assert repo.read_head(conn).size == 0  # type: ignore[union-attr]
            assert repo.get_payloads(conn, 0) == {}
    finally:
        engine.dispose()
