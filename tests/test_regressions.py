"""Regression tests for defects found in review (each would fail on the old code)."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner
from sqlalchemy import create_engine, text

from ledger import Ledger
from ledger.cli.main import cli
from ledger.ops.append import QUARANTINE_MAX_RAW
from ledger.ops.audit import AuditOptions, run_audit
from ledger.ops.samples import realistic
from ledger.store.db import normalize_url


def _one(url: str, sql: str):
    eng = create_engine(normalize_url(url))
    try:
        with eng.connect() as conn:
            return conn.execute(text(sql)).all()
    finally:
        eng.dispose()


def test_json_array_items_keep_duplicate_key_detection(sqlite_url, tmp_path):
    Ledger.init(sqlite_url).close()
    good = json.dumps(realistic(1)[0])
    dup = ('{"engine":"math","result":{"status":"BLOCKED","agent_message":"a",'
           '"agent_message":"b"}}')
    path = tmp_path / "batch.json"
    path.write_text(f"[ {good} ,\n {dup} ]")
    res = CliRunner().invoke(cli, ["--db", sqlite_url, "append", str(path)])
    lines = [json.loads(x) for x in res.stdout.splitlines()]
    assert res.exit_code == 2
    assert lines[0]["ok"] is True
    assert lines[1]["error"]["code"] == "duplicate_key"


def test_python_api_objects_get_the_depth_and_size_limits(db_url):
    deep: dict = {}
    node = deep
    for _ in range(200):
        node["x"] = {}
        node = node["x"]
    sub = {"engine": "math", "meta": deep,
           "result": {"status": "BLOCKED", "agent_message": "blocked"}}
    big = {"engine": "math", "meta": {"blob": "x" * (1024 * 1024 + 10)},
           "result": {"status": "BLOCKED", "agent_message": "blocked"}}
    with Ledger.init(db_url) as L:
        res = L.append_many([sub, big])
        assert [r.error["code"] for r in res] == ["too_deep", "too_large"]
        assert L.head()["size"] == 0
    rows = _one(db_url, "SELECT code, raw, message FROM quarantine ORDER BY id")
    assert [r.code for r in rows] == ["too_deep", "too_large"]
    assert len(bytes(rows[1].raw)) == QUARANTINE_MAX_RAW
    assert "kept truncated" in rows[1].message


def test_a_modified_key_event_document_is_found_and_never_trusted(db_url):
    from tests import tamper as T

    with Ledger.init(db_url) as L:
        L.append_many(realistic(3))
        jwks = json.loads((Path(__file__).parent / "data/qwed_issuer_jwks.json").read_text())
        L.trust_issuer("did:qwed:node:test", jwks)
        seq = L.head()["size"] - 1
        digest = L.get(seq)["payloads"]["event"]["digest"]
        with T.unlocked(db_url) as conn:
            conn.execute(text("UPDATE payloads SET data = :d WHERE digest = :g"),
                         {"d": b'{"action":"trust"}', "g": digest})
        report = run_audit(L, AuditOptions())
        fresh = Ledger.open(db_url)
        try:
            assert fresh.trust_store().keys == []  # the modified event grants nothing
        finally:
            fresh.close()
    codes = {(f["code"], f["seq"]) for f in report["findings"]}
    assert ("payload_digest_mismatch", seq) in codes


def test_resume_keeps_the_interrupted_runs_range(sqlite_url, monkeypatch):
    import ledger.ops.audit as audit_mod

    with Ledger.init(sqlite_url) as L:
        L.append_many(realistic(40))
        monkeypatch.setattr(audit_mod, "PAGE", 5)
        monkeypatch.setattr(audit_mod, "PROGRESS_EVERY", 5)

        class Stop(Exception):
            pass

        def progress(n: int) -> None:
            raise Stop

        try:
            run_audit(L, AuditOptions(end=20), progress=progress)
        except Stop:
            pass
        resumed = run_audit(L, AuditOptions(resume=True))
    assert resumed["range"]["end"] == 20
    assert resumed["summary"]["rows"] == 20
