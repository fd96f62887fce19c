"""The PostgreSQL one-statement append: its SQL link equals the format's entry vectors,
and a link that disagrees with the core's is never committed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ledger.core.entry import COLUMN_MAP, PAYLOAD_MAP, body_hash, entry_hash
from ledger.core.tenant import link_parts, tenant_entry_hash
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
            got = postgres.append_one(engine, row, blobs, int(v["recorded_at_us"]),
                                      link_parts("default", row["body_hash"]),
                                      lambda p, s, _, t, b=row["body_hash"]: entry_hash(p, s, t, b))
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
            postgres.append_one(engine, row, blobs, int(v["recorded_at_us"]),
                                link_parts("default", row["body_hash"]),
                                lambda *_: b"\x00" * 32)
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
        assert postgres.append_one(engine, row, blobs, t, link_parts("default", row["body_hash"]),
                                   lambda *a: b"", guard=(t, postgres.MAX_BIGINT)) is None
        with db.connect(engine) as conn:
            assert repo.read_head(conn).size == 0  # type: ignore[union-attr]
            assert repo.get_payloads(conn, 0) == {}
    finally:
        engine.dispose()


TENANT_VECTORS = json.loads(
    (Path(__file__).parent.parent / "vectors" / "tenants.json").read_text())


def test_the_sql_link_reproduces_every_tenant_vector(pg_url):
    """Entries of three tenants, interleaved, through the one-statement append: each link
    (v1 for the default tenant, the tenant link for the others, tseq bound), prev (the
    tenant's genesis for its first entry), tseq and the tenant heads are the vectors'."""
    vectors = TENANT_VECTORS["entries"]
    genesis = {t: bytes.fromhex(g["hash"]) for t, g in TENANT_VECTORS["genesis"].items()}
    engine = _init(pg_url, TENANT_VECTORS["ledger_id"], int(vectors[0]["recorded_at_us"]) - 1)
    # _init stored entries.json's genesis: the tenant vectors have their own ledger id
    with engine.begin() as conn:
        conn.exec_driver_sql("UPDATE head SET head_hash = %s", (genesis["default"],))
        conn.exec_driver_sql("UPDATE tenant_heads SET head_hash = %s WHERE tenant = 'default'",
                             (genesis["default"],))
    row, _ = _row(VECTORS["entries"][0])
    try:
        for v in vectors:
            tenant, body = v["tenant"], bytes.fromhex(v["body_hash"])
            got = postgres.append_one(
                engine, dict(row, body_hash=body), [], int(v["recorded_at_us"]),
                link_parts(tenant, body),
                lambda p, s, ts, t, te=tenant, b=body: tenant_entry_hash(te, p, s, ts, t, b),
                tenant=tenant, genesis=None if tenant == "default" else genesis[tenant])
            assert got is not None
            assert (got.seq, got.tseq, got.recorded_at) == (
                v["seq"], v["tseq"], int(v["recorded_at_us"]))
            assert got.prev_hash.hex() == v["prev_hash"], v
            assert got.entry_hash.hex() == v["entry_hash"], v
        with engine.connect() as conn:
            heads = dict(conn.exec_driver_sql(
                "SELECT tenant, size FROM tenant_heads").fetchall())
            stored = conn.exec_driver_sql(
                "SELECT seq, tenant, tseq FROM entries ORDER BY seq").fetchall()
        assert heads == {"default": 2, "acme": 3, "globex": 2}
        assert [tuple(r) for r in stored] == [(v["seq"], v["tenant"], v["tseq"]) for v in vectors]
    finally:
        engine.dispose()


def test_the_appenders_lock_key_is_derived_from_its_name():
    import hashlib
    import struct

    want = struct.unpack(">q", hashlib.sha256(b"ledger.append").digest()[:8])[0]
    assert postgres.APPEND_LOCK_KEY == want
    assert str(want) in postgres.APPEND_LOCK_SQL
