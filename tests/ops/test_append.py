"""The append use case (``ledger.ops.append``): submission limits apply to Python objects
too, and an attested append on PostgreSQL judges its token under the head lock."""

from __future__ import annotations

import json

from sqlalchemy import create_engine, text

from ledger import Ledger
from ledger.clock import FixedClock
from ledger.crypto.attestation import VERDICT_VALID
from ledger.ops.append import QUARANTINE_MAX_RAW, BatchWriter
from ledger.ops.trust import trust_events
from ledger.store.append import append_transaction
from ledger.store.db import normalize_url


def _one(url: str, sql: str):
    eng = create_engine(normalize_url(url))
    try:
        with eng.connect() as conn:
            return conn.execute(text(sql)).all()
    finally:
        eng.dispose()


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


def test_an_attested_append_is_judged_again_when_its_issuer_is_trusted_while_it_waited(db_url):
    """Judged ``unchecked`` (issuer unknown), then the issuer's key is trusted while the append
    waits for the head lock: it is stored with the verdict of the trust store it commits
    under, not the one it was first judged with."""
    import threading
    import time

    from tests import tamper as T

    key = T.new_key()
    sub = T.signed_sub(0, T.FIXTURE_TIME_US, key=key, kid="did:late#k1", iss="did:late")
    out: dict = {}
    with Ledger.init(db_url, clock=FixedClock(T.FIXTURE_TIME_US)) as L:
        L.trust_issuer(T.ISSUER, T.JWKS)  # some key event exists: the judgement has a seq
        events = trust_events(L.trust_store(), "did:late", T.jwks_of(key, "did:late#k1"),
                              None, None)
        with append_transaction(L.engine) as txn:
            w = BatchWriter(txn, L.meta.ledger_id, L.clock)
            w.add(events)
            w.finish()
            t = threading.Thread(target=lambda: out.setdefault("r", L.append(sub)))
            t.start()
            time.sleep(0.5)  # the append was judged and now waits for the head lock
        t.join(30)
        res = out["r"]
        assert res.ok, res.error
        entry = L.get(res.seq)
    assert (entry["attestation_verdict"], entry["attestation_kid"],
            entry["attestation_iss"]) == (
        VERDICT_VALID, "did:late#k1", "did:late")


def test_a_python_object_that_is_not_json_is_quarantined_as_its_repr(sqlite_url):
    sub = {"engine": "math", "meta": {1, 2},
           "result": {"status": "BLOCKED", "agent_message": "blocked"}}
    with Ledger.init(sqlite_url) as L:
        res = L.append(sub)
        assert not res.ok and res.error["field"] == "meta"
    rows = _one(sqlite_url, "SELECT code, raw FROM quarantine")
    assert [(r.code, bytes(r.raw)) for r in rows] == [("invalid_type", repr(sub).encode())]
