"""Attestation rules beyond the signature (docs/format-attestation.md): the ``nbf`` claim,
the issuer binding of keys, and the claims the producer signs that the ledger can compare
(``sub``, ``qwed.version``, ``qwed.result.engine``).

Each rule is pinned on the append path (the rejection code, the token quarantined) and on
the audit path (a row inserted behind the append path fails with the same code).
"""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import text

from ledger import Ledger
from ledger.clock import FixedClock
from ledger.crypto.trust import TrustStore, check_attestation
from ledger.ops.audit import AuditOptions, run_audit
from tests import tamper as T

T0 = T.FIXTURE_TIME_US
T0_S = T0 // 1_000_000
OTHER = "did:qwed:node:other"
OTHER_KID = OTHER + "#signing-key-v1"


def quarantined_codes(url: str) -> list[str]:
    with T.connect(url) as conn:
        return [r.code for r in conn.execute(text("SELECT code FROM quarantine ORDER BY id"))]


def token_for(submission: dict[str, Any], *, key: Any = None, kid: str = T.KID,
              **claims: Any) -> str:
    """An ES256 token for ``submission``; ``claims`` override or add claims (None removes
    one; ``engine`` is the signed engine, ``qwed`` members are merged)."""
    c = T.claims_for(submission["result"]["proof_ref"], iat=T0_S,
                     iss=claims.pop("iss", T.ISSUER),
                     engine=claims.pop("engine", submission["engine"]))
    q = claims.pop("qwed", {})
    c["qwed"].update(q)
    for name, value in claims.items():
        if value is None:
            c.pop(name, None)
        else:
            c[name] = value
    return T.sign(c, key=key, kid=kid)


def append_one(url: str, build: Any, *, trust_other: Any = None) -> Any:
    """Trust the fixture issuer (and ``OTHER`` with key ``trust_other``), append one token."""
    with Ledger.init(url, clock=FixedClock(T0)) as L:
        L.trust_issuer(T.ISSUER, T.JWKS)
        if trust_other is not None:
            L.trust_issuer(OTHER, T.jwks_of(trust_other, OTHER_KID))
        sub = T.verified_sub(1)
        return L.append(T.attested(sub, build(sub)))


# =============================================================================
# nbf: a registered claim, judged at the recorded time like iat
# =============================================================================

@pytest.mark.parametrize("nbf,code", [
    pytest.param(T0_S + 3600, "attestation_nbf_after_record", id="an_hour_after_recorded"),
    pytest.param(T0_S + 301, "attestation_nbf_after_record", id="just_beyond_the_skew"),
    pytest.param("soon", "attestation_claims_missing", id="not_a_number"),
    pytest.param(True, "attestation_claims_missing", id="a_boolean"),
    pytest.param(float(T0_S), "attestation_claims_missing", id="a_float"),
])
def test_nbf_after_the_recorded_time_is_rejected(db_url, nbf, code):
    res = append_one(db_url, lambda s: token_for(s, nbf=nbf))
    assert (res.ok, res.error["code"], res.error["field"]) == (False, code, "attestation")
    assert quarantined_codes(db_url) == [code]


@pytest.mark.parametrize("nbf", [T0_S - 60, T0_S, T0_S + 300], ids=["before", "at", "skew"])
def test_nbf_reached_by_the_recorded_time_is_accepted(db_url, nbf):
    res = append_one(db_url, lambda s: token_for(s, nbf=nbf))
    assert res.ok, res.error


# =============================================================================
# A key is trusted for its own issuer only
# =============================================================================

def test_token_claiming_an_unknown_issuer_signed_by_a_trusted_key_is_a_forgery(db_url):
    """Before: stored unchecked, as if the issuer were simply unknown."""
    res = append_one(db_url, lambda s: token_for(s, iss=OTHER, kid=OTHER_KID))
    assert (res.ok, res.error["code"]) == (False, "attestation_issuer_mismatch")
    assert T.KID in res.error["message"] and OTHER in res.error["message"]
    assert quarantined_codes(db_url) == ["attestation_issuer_mismatch"]


@pytest.mark.parametrize("kid", [OTHER_KID, OTHER + "#no-such-kid", T.KID],
                         ids=["other_issuers_kid", "unknown_kid", "signers_own_kid"])
def test_token_claiming_a_known_issuer_signed_by_another_issuers_key_is_a_forgery(db_url, kid):
    """Before: attestation_signature_invalid or attestation_unknown_kid."""
    res = append_one(db_url, lambda s: token_for(s, iss=OTHER, kid=kid),
                     trust_other=T.new_key())
    assert (res.ok, res.error["code"]) == (False, "attestation_issuer_mismatch")


def test_the_same_key_trusted_for_two_issuers_verifies_for_both(db_url):
    with Ledger.init(db_url, clock=FixedClock(T0)) as L:
        L.trust_issuer(T.ISSUER, T.JWKS)
        L.trust_issuer(OTHER, T.jwks_of(T.FIXTURE_KEY, OTHER_KID))
        subs = [T.verified_sub(1), T.verified_sub(2)]
        a = L.append(T.attested(subs[0], token_for(subs[0])))
        b = L.append(T.attested(subs[1], token_for(subs[1], iss=OTHER, kid=OTHER_KID)))
        assert a.ok and b.ok, (a.error, b.error)
        assert [L.get(r.seq)["attestation_verdict"] for r in (a, b)] == ["valid", "valid"]


def test_an_unrelated_key_claiming_an_unknown_issuer_is_still_unchecked(db_url):
    res = append_one(db_url, lambda s: token_for(s, iss=OTHER, kid=OTHER_KID, key=T.new_key()))
    assert res.ok, res.error


def test_a_retired_key_of_another_issuer_no_longer_binds(db_url):
    """Only keys active at the row count: a retired key is trusted for nothing."""
    with Ledger.init(db_url, clock=FixedClock(T0)) as L:
        L.trust_issuer(T.ISSUER, T.JWKS)
        L.end_key("retire", T.KID, reason="rotation")
        sub = T.verified_sub(1)
        res = L.append(T.attested(sub, token_for(sub, iss=OTHER, kid=OTHER_KID)))
        assert res.ok, res.error
        assert L.get(res.seq)["attestation_verdict"] == "unchecked"


def _store(*keys: tuple[str, Any, int]) -> TrustStore:
    store = TrustStore()
    for issuer, key, seq in keys:
        jwk = T.public_jwk(key, issuer + "#k")
        store.apply(seq, {"action": "trust", "issuer": issuer, "kid": issuer + "#k",
                          "thumbprint": "t" + str(seq), "jwk": jwk})
    return store


def _judge(store: TrustStore, token: str, seq: int, sub: dict[str, Any]) -> tuple[str, str]:
    r = check_attestation(token, store=store, seq=seq, recorded_at_us=T0,
                          proof_ref=sub["result"]["proof_ref"], query="q", engine="logic")
    return r.disposition, r.code


def test_a_foreign_key_trusted_after_the_row_never_refutes_it():
    """Keys trusted after a row confirm, never refute: the issuer binding uses the keys
    active at the row's position only."""
    sub = T.verified_sub(1)
    token = token_for(sub, iss=OTHER, kid=OTHER + "#k")
    store = _store((T.ISSUER, T.FIXTURE_KEY, 5))
    assert _judge(store, token, 3, sub) == ("abstained", "unknown_issuer_key")
    assert _judge(store, token, 6, sub) == ("failed", "attestation_issuer_mismatch")


# =============================================================================
# Claims the producer signs, compared with what the ledger knows
# =============================================================================

@pytest.mark.parametrize("build,code", [
    pytest.param(lambda s: token_for(s, sub=T.sha("another query")),
                 "attestation_subject_mismatch", id="sub_not_the_query_hash"),
    pytest.param(lambda s: token_for(s, engine="math"), "attestation_engine_mismatch",
                 id="engine_of_another_row"),
    pytest.param(lambda s: token_for(s, qwed={"version": "2.0"}),
                 "attestation_version_unsupported", id="claims_version_2"),
    pytest.param(lambda s: token_for(s, qwed={"version": None}),
                 "attestation_version_unsupported", id="claims_version_null"),
    pytest.param(lambda s: token_for(s, jti=7), "attestation_claims_missing",
                 id="jti_not_a_string"),
])
def test_signed_claims_that_contradict_the_row_are_rejected(db_url, build, code):
    res = append_one(db_url, build)
    assert (res.ok, res.error["code"]) == (False, code)


# =============================================================================
# The audit judges rows inserted behind the append path with the same rules
# =============================================================================

def test_the_audit_fails_inserted_rows_with_the_same_codes(db_url):
    with Ledger.init(db_url, clock=FixedClock(T0)) as L:
        L.trust_issuer(T.ISSUER, T.JWKS)
        good = T.verified_sub(0)
        assert L.append(T.attested(good, token_for(good))).ok
    forged = {
        "attestation_issuer_mismatch": lambda s: token_for(s, iss=OTHER, kid=OTHER_KID),
        "attestation_nbf_after_record": lambda s: token_for(s, nbf=T0_S + 3600),
        "attestation_engine_mismatch": lambda s: token_for(s, engine="math"),
        "attestation_subject_mismatch": lambda s: token_for(s, sub=T.sha("x")),
    }
    seqs = {}
    with T.connect(db_url) as conn:
        for i, (code, build) in enumerate(forged.items(), 1):
            sub = T.verified_sub(i)
            cols, blobs = T.forged_result(T.ledger_id(conn), T.attested(sub, build(sub)))
            seqs[code] = T.append_forged(conn, cols, blobs, move_head=True, recorded_at=T0 + i)
    with Ledger.open(db_url) as L:
        report = run_audit(L, AuditOptions())
    assert report.outcome == "failed"
    assert sorted((f.code, f.seq, f.cls) for f in report.findings) == sorted(
        (code, seq, "signature_invalid") for code, seq in seqs.items())
    assert report.summary.failed == len(forged)


def test_an_unloadable_stored_key_verifies_nothing_and_never_raises():
    """A key event forged behind the append path may hold a JWK that does not load: the
    issuer binding check, which tries every active key, must not crash on it."""
    store = _store((T.ISSUER, T.FIXTURE_KEY, 1))
    store.apply(2, {"action": "trust", "issuer": "did:qwed:node:broken", "kid": "b",
                    "thumbprint": "t", "jwk": {"kty": "EC", "crv": "P-256", "x": "AA",
                                               "y": "AA"}})
    sub = T.verified_sub(1)
    unknown = token_for(sub, iss=OTHER, kid=OTHER_KID, key=T.new_key())
    assert _judge(store, unknown, 5, sub) == ("abstained", "unknown_issuer_key")
    forged = token_for(sub, iss=OTHER, kid=OTHER_KID)
    assert _judge(store, forged, 5, sub) == ("failed", "attestation_issuer_mismatch")


def test_members_the_producer_always_signs_may_be_absent(db_url):
    """Only a contradiction is refused: a token without qwed.version, qwed.result.engine or
    (for a row without a query) qwed.query_hash is judged on the rest."""
    def minimal(s: dict[str, Any]) -> str:
        claims = T.claims_for(s["result"]["proof_ref"], iat=T0_S, query=None)
        del claims["qwed"]["version"], claims["qwed"]["result"]["engine"]
        del claims["qwed"]["query_hash"]
        claims["sub"] = "any subject"
        return T.sign(claims)

    with Ledger.init(db_url, clock=FixedClock(T0)) as L:
        L.trust_issuer(T.ISSUER, T.JWKS)
        sub = T.verified_sub(1, query=None)
        res = L.append(T.attested(sub, minimal(sub)))
        assert res.ok, res.error
        assert L.get(res.seq)["attestation_verdict"] == "valid"
