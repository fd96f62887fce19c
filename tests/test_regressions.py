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
            T.set_payload(conn, digest, b'{"action":"trust"}')
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


def _blocked(i: int) -> bytes:
    return json.dumps({"result": {"status": "BLOCKED", "agent_message": f"b{i}"},
                       "engine": "math"}).encode()


def test_a_deeply_nested_token_header_is_rejected_not_a_crash(sqlite_url):
    import base64
    import hashlib

    pre = "x"
    pr = "sha256:" + hashlib.sha256(pre.encode()).hexdigest()
    tok = base64.urlsafe_b64encode(b"[" * 200_000).rstrip(b"=").decode() + ".e30.AA"
    sub = {"result": {"status": "VERIFIED", "agent_message": "ok", "proof_ref": pr},
           "engine": "math", "proof_preimage": pre, "attestation": tok}
    with Ledger.init(sqlite_url) as L:
        res = L.append(json.dumps(sub))
        assert not res.ok and res.error["code"] == "attestation_malformed"
        assert L.head()["size"] == 0


def test_more_workers_than_rows_runs_in_one_process(db_url):
    with Ledger.init(db_url) as L:
        L.append_many([_blocked(i) for i in range(2)])
        report = run_audit(L, AuditOptions(workers=4))
    assert report["summary"] == {"rows": 2, "verified": 2, "failed": 0, "unverified": 0}


def test_two_interruptions_then_resume_count_every_row(sqlite_url, monkeypatch):
    import ledger.ops.audit as audit_mod

    monkeypatch.setattr(audit_mod, "PAGE", 5)
    monkeypatch.setattr(audit_mod, "PROGRESS_EVERY", 5)

    class Stop(Exception):
        pass

    def stop_after(limit: int):
        seen = [0]

        def progress(n: int) -> None:
            seen[0] += n
            if seen[0] >= limit:
                raise Stop
        return progress

    with Ledger.init(sqlite_url) as L:
        L.append_many([_blocked(i) for i in range(30)])
        for limit, resume in ((15, False), (10, True)):
            try:
                run_audit(L, AuditOptions(resume=resume), progress=stop_after(limit))
            except Stop:
                pass
        report = run_audit(L, AuditOptions(resume=True))
    assert report["summary"] == {"rows": 30, "verified": 30, "failed": 0, "unverified": 0}


def test_since_last_needs_a_baseline_from_seq_zero(sqlite_url):
    with Ledger.init(sqlite_url) as L:
        L.append_many([_blocked(i) for i in range(10)])
        partial = run_audit(L, AuditOptions(start=5, record=True))
        assert partial["outcome"] == "passed"
        after_partial = run_audit(L, AuditOptions(since_last=True))
        assert after_partial["range"]["start"] == 0  # rows 0..4 were never verified
        run_audit(L, AuditOptions(record=True))
        after_full = run_audit(L, AuditOptions(since_last=True))
    assert after_full["range"]["start"] == 11 and after_full["summary"]["rows"] == 1


def test_postgresql_attested_append_sees_a_revocation_committed_while_it_waited(pg_url):
    import hashlib
    import threading
    import time

    import jwt
    from cryptography.hazmat.primitives.asymmetric import ec
    from jwt.algorithms import ECAlgorithm

    from ledger.ops.append import BatchWriter
    from ledger.ops.trust import end_event
    from ledger.store import append as repo

    key = ec.generate_private_key(ec.SECP256R1())
    jwk = json.loads(ECAlgorithm.to_jwk(key.public_key()))
    jwk["kid"] = "iss#k1"
    pre = "evidence"
    pr = "sha256:" + hashlib.sha256(pre.encode()).hexdigest()
    now = int(time.time())
    tok = jwt.encode({"iss": "did:x", "sub": "s", "iat": now, "exp": now + 3600, "jti": "j",
                      "qwed": {"result": {"status": "VERIFIED"}, "proof_hash": pr}},
                     key, algorithm="ES256", headers={"kid": "iss#k1",
                                                      "typ": "qwed-attestation+jwt"})
    sub = json.dumps({"result": {"status": "VERIFIED", "agent_message": "ok", "proof_ref": pr},
                      "engine": "math", "proof_preimage": pre, "attestation": tok})
    out: dict = {}
    with Ledger.init(pg_url) as L:
        L.trust_issuer("did:x", {"keys": [jwk]})
        L.trust_store()  # the appender's cache predates the revocation
        ev = end_event(L.trust_store(), "revoke", "iss#k1", "stolen", None)
        with repo.append_transaction(L.engine) as txn:
            w = BatchWriter(txn, L.meta.ledger_id, L.clock)
            w.add([ev])
            w.finish()
            t = threading.Thread(target=lambda: out.setdefault("r", L.append(sub)))
            t.start()
            time.sleep(0.5)  # the append now waits for the head lock
        t.join(30)
    assert not out["r"].ok and out["r"].error["code"] == "attestation_unknown_kid"
