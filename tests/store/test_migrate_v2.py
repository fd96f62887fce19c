"""A ledger made by the schema and append code of revision 0004 (format v1, content-
addressed payloads, digest columns) migrates to the v2 layout (0005) and audits
unchanged: the same entry hashes, the same checkpoints, the same payload bytes.

The ledger is ``tests/data/ledger_rev0004.json``, written with the code of that revision
by ``tests/data/gen_v1_ledger.py``, and loaded row by row into a database migrated to
0004 -- on SQLite and PostgreSQL.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

from sqlalchemy import text

from ledger import Ledger
from ledger.clock import FixedClock
from ledger.core.merkle import leaf_hash, node_hash
from ledger.demo.samples import realistic
from ledger.ops.audit import AuditOptions
from ledger.ops.lifecycle import upgrade_schema
from ledger.store import db

FIXTURE = json.loads((Path(__file__).parent.parent / "data" / "ledger_rev0004.json")
                     .read_text(encoding="utf-8"))
ORDER = ("ledger_meta", "head", "entries", "payloads", "merkle_nodes", "checkpoints",
         "audit_runs", "audit_findings", "quarantine")


def _value(v: Any) -> Any:
    return base64.b64decode(v["b64"]) if isinstance(v, dict) else v


def load_v1_ledger(url: str) -> None:
    """The fixture ledger in a database at revision 0004 (raw INSERTs: the tables are
    insert-only, and this is exactly what the old append path stored)."""
    engine = db.make_engine(url, create=True)
    try:
        db.upgrade(engine, "0004")
        with engine.begin() as conn:
            for name in ORDER:
                t = FIXTURE["tables"][name]
                if not t["rows"]:
                    continue
                cols = t["columns"]
                sql = text(f"INSERT INTO {name} ({', '.join(cols)}) VALUES "
                           f"({', '.join(':' + c for c in cols)})")
                conn.execute(sql, [{c: _value(v) for c, v in zip(cols, r)} for r in t["rows"]])
            if conn.dialect.name == "postgresql":  # ids were given: move their sequences
                for name in ("checkpoints", "audit_runs", "audit_findings", "quarantine"):
                    conn.execute(text(f"SELECT setval(pg_get_serial_sequence('{name}', 'id'), "
                                      f"(SELECT COALESCE(max(id), 0) + 1 FROM {name}), false)"))
            (size,) = FIXTURE["tables"]["tree_state"]["rows"][0][1:]
            conn.execute(text("UPDATE tree_state SET size = :s WHERE id = 1"), {"s": size})
    finally:
        engine.dispose()


def mth(entry_hashes: list[bytes]) -> bytes:
    """RFC 6962 Merkle tree hash, the naive recursion (independent of the stored nodes)."""
    if len(entry_hashes) == 1:
        return leaf_hash(entry_hashes[0])
    k = 1
    while k * 2 < len(entry_hashes):
        k *= 2
    return node_hash(mth(entry_hashes[:k]), mth(entry_hashes[k:]))


def _column(table: str, name: str) -> list[Any]:
    t = FIXTURE["tables"][table]
    i = t["columns"].index(name)
    return [_value(r[i]) for r in t["rows"]]


def test_the_fixture_is_a_revision_0004_ledger():
    assert FIXTURE["revision"] == "0004"
    assert "doc_digest" in FIXTURE["tables"]["entries"]["columns"]
    assert FIXTURE["tables"]["payloads"]["columns"] == ["digest", "data"]


def test_a_v1_ledger_migrates_and_audits_unchanged(db_url):
    load_v1_ledger(db_url)
    assert upgrade_schema(db_url) == "0013"  # what `ledger db upgrade` runs
    with Ledger.open(db_url, clock=FixedClock(FIXTURE["clock_us"], 1000)) as L:
        assert db.current_revision(L.engine) == "0013"
        report = L.audit(AuditOptions())
        assert report.outcome == "passed", report.findings[:3]
        n = len(FIXTURE["tables"]["entries"]["rows"])
        assert report.summary.to_json() == {"rows": n, "verified": n, "failed": 0, "unverified": 0}
        with L.engine.connect() as conn:
            hashes = [bytes(h) for (h,) in conn.execute(text(
                "SELECT entry_hash FROM entries ORDER BY seq"))]
            envelopes = [bytes(e) for (e,) in conn.execute(text(
                "SELECT envelope FROM entries ORDER BY seq"))]
            cps = conn.execute(text("SELECT size, root_hash, note FROM checkpoints "
                                    "ORDER BY id")).all()
        assert hashes == _column("entries", "entry_hash")
        assert envelopes == _column("entries", "envelope")
        assert [(s, bytes(r), note) for s, r, note in cps] == list(zip(
            _column("checkpoints", "size"), _column("checkpoints", "root_hash"),
            _column("checkpoints", "note")))
        for size, root in zip(_column("checkpoints", "size"), _column("checkpoints", "root_hash")):
            assert mth(hashes[:size]) == root
        # every payload the v1 rows named is still there, byte for byte, by entry
        blobs = dict(zip(_column("payloads", "digest"), _column("payloads", "data")))
        digests = dict(zip(_column("entries", "seq"), _column("entries", "preimage_digest")))
        for seq, d in digests.items():
            if d is not None:
                assert L.get(seq)["payloads"]["preimage"]["text"].encode() == blobs[d]
        # and the migrated ledger goes on with v2 entries
        res = L.append_many(realistic(5, start=900))
        assert all(r.ok for r in res)
        assert json.loads(L.get(res[0].seq)["envelope"])["v"] == 2
        assert L.audit(AuditOptions()).outcome == "passed"


def test_a_subject_is_found_in_v1_rows_and_v2_rows(db_url):
    load_v1_ledger(db_url)
    upgrade_schema(db_url)
    with Ledger.open(db_url, clock=FixedClock(FIXTURE["clock_us"], 1000)) as L:
        subjects = _column("entries", "subject")
        old = next(s for s in subjects if s)
        sub = dict(realistic(1, start=950)[0], subject=old)
        new = L.append(sub)
        page = L.query(subject=[old], layer="developer")
        seqs = [r["seq"] for r in page.rows]
        v1 = [s for s, x in zip(_column("entries", "seq"), subjects) if x == old]
        assert seqs == v1 + [new.seq]
        assert all(r["subject"] == old for r in page.rows)


def test_an_old_single_chain_ledger_is_tenant_default_and_exports_complete(db_url, tmp_path):
    """Revision 0004's ledger upgraded to 0013: its chain is tenant default's (tseq NULL, read
    as its seq), it audits clean, takes appends of default and of another tenant, and both
    tenants' exports verify complete (docs/tenants.md, "Migration")."""
    from ledger.crypto.keys import Keyring
    from ledger.ops.export import ExportOptions
    from ledger.verify.export import verify_export

    load_v1_ledger(db_url)
    upgrade_schema(db_url)
    ring = Keyring.load(tmp_path / "keys")
    with Ledger.open(db_url, clock=FixedClock(FIXTURE["clock_us"], 1000)) as L:
        with L.engine.connect() as conn:
            assert {t for (t,) in conn.execute(text("SELECT DISTINCT tenant FROM entries"))} \
                == {"default"}
        ring.generate(L.meta.origin, L.clock.now_us())
        subs = realistic(4)
        assert all(r.ok for r in L.append_many(subs[:2]))
        assert all(r.ok for r in L.append_many(subs[2:], tenant="acme"))
        report = L.audit(AuditOptions())
        assert report.findings == (), report.findings[:3]
        n = len(FIXTURE["tables"]["entries"]["rows"])
        for tenant, count in (("default", n + 2), ("acme", 2)):
            L.export(tmp_path / tenant, ExportOptions(keys=ring.path, tenant=tenant))
            v = verify_export(tmp_path / tenant, ring.path / "jwks.json")
            assert v["findings"] == [] and v["complete"] is True, v["findings"][:3]
            assert v["summary"]["rows"] == count
