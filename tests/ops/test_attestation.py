"""Attestation checks (design §2.3, §7) at append and in the audit, on SQLite and PostgreSQL.

With the issuer trusted, every broken token is rejected at append with the code of
:mod:`ledger.crypto.trust` and quarantined; an unknown issuer's token is stored
*unchecked*.  The trust store is the fold of ``key_event`` entries, judged as of each
row's position and recorded time: the same kid may name several keys over time,
retired keys stay valid for older rows, a key revoked as compromised fails the rows
recorded after the compromise, and a token valid when recorded stays valid evidence
long after it expired.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import pytest
from sqlalchemy import text

from ledger import Ledger
from ledger.clock import FixedClock
from ledger.ops.audit import EXIT_CODES, AuditOptions, AuditReport, run_audit
from tests import tamper as T

T0 = T.FIXTURE_TIME_US  # a whole second inside the fixture tokens' validity
T0_S = T0 // 1_000_000
OTHER_ISSUER = "did:qwed:node:other"


def audit(L: Ledger, **kw: Any) -> AuditReport:
    return run_audit(L, AuditOptions(**kw))


def quarantined(url: str) -> list[Any]:
    with T.connect(url) as conn:
        return conn.execute(text("SELECT code, field, raw FROM quarantine ORDER BY id")).all()


def size(L: Ledger) -> int:
    return L.head()["size"]


# =============================================================================
# Rejected at append (issuer trusted)
# =============================================================================

def _good(sub: dict[str, Any]) -> dict[str, Any]:
    return T.claims_for(sub["result"]["proof_ref"], iat=T0_S)


def _without(claim: str) -> Callable[[dict[str, Any]], str]:
    def build(sub: dict[str, Any]) -> str:
        claims = _good(sub)
        del claims[claim]
        return T.sign(claims)
    return build


REJECTED: list[tuple[str, Callable[[dict[str, Any]], str], str]] = [
    ("alg_none", lambda s: T.handmade({"alg": "none", "kid": T.KID, "typ": T.TYP}, _good(s)),
     "attestation_alg_not_allowed"),
    # HMAC keyed with the issuer's public JWK: the classic algorithm-confusion forgery.
    ("hs256_public_key_as_secret",
     lambda s: T.handmade({"alg": "HS256", "kid": T.KID, "typ": T.TYP}, _good(s),
                          secret=json.dumps(T.JWKS["keys"][0]).encode()),
     "attestation_alg_not_allowed"),
    ("typ_jwt", lambda s: T.sign(_good(s), header={"typ": "JWT"}), "attestation_typ"),
    ("typ_missing", lambda s: T.sign(_good(s), header={"typ": None}), "attestation_typ"),
    ("crit_header", lambda s: T.sign(_good(s), header={"crit": ["exp"]}), "attestation_crit"),
    ("other_p256_key_same_kid", lambda s: T.sign(_good(s), key=T.new_key()),
     "attestation_signature_invalid"),
    ("kid_not_trusted", lambda s: T.sign(_good(s), kid=T.ISSUER + "#not-a-trusted-kid"),
     "attestation_unknown_kid"),
    ("status_blocked",
     lambda s: T.sign(T.claims_for(s["result"]["proof_ref"], iat=T0_S, status="BLOCKED")),
     "attestation_status_mismatch"),
    ("status_unverifiable",
     lambda s: T.sign(T.claims_for(s["result"]["proof_ref"], iat=T0_S, status="UNVERIFIABLE")),
     "attestation_status_mismatch"),
    ("proof_hash_of_other_proof",
     lambda s: T.sign(T.claims_for(T.sha("another proof"), iat=T0_S)),
     "attestation_proof_mismatch"),
    ("query_hash_of_other_query",
     lambda s: T.sign(T.claims_for(s["result"]["proof_ref"], iat=T0_S, query="another query")),
     "attestation_query_mismatch"),
    ("missing_jti", _without("jti"), "attestation_claims_missing"),
    ("missing_exp", _without("exp"), "attestation_claims_missing"),
    ("missing_sub", _without("sub"), "attestation_claims_missing"),
    ("missing_qwed", _without("qwed"), "attestation_claims_missing"),
    ("expired_before_recorded",
     lambda s: T.sign(T.claims_for(s["result"]["proof_ref"], iat=T0_S - 2 * 86400)),
     "attestation_expired_at_record"),
    ("expires_exactly_when_recorded",
     lambda s: T.sign(T.claims_for(s["result"]["proof_ref"], iat=T0_S - 86400)),
     "attestation_expired_at_record"),
    ("issued_an_hour_in_the_future",
     lambda s: T.sign(T.claims_for(s["result"]["proof_ref"], iat=T0_S + 3600)),
     "attestation_not_yet_valid"),
    ("issued_just_beyond_the_5_minute_skew",
     lambda s: T.sign(T.claims_for(s["result"]["proof_ref"], iat=T0_S + 301)),
     "attestation_not_yet_valid"),
]


@pytest.mark.parametrize("build,code", [pytest.param(b, c, id=n) for n, b, c in REJECTED])
def test_broken_token_of_a_trusted_issuer_is_rejected_and_quarantined(db_url, build, code):
    with Ledger.init(db_url, clock=FixedClock(T0)) as L:
        L.trust_issuer(T.ISSUER, T.JWKS)
        sub = T.verified_sub(1)
        token = build(sub)
        res = L.append(T.attested(sub, token))
        assert not res.ok
        assert (res.error["code"], res.error["field"]) == (code, "attestation")
        assert size(L) == 1  # only the key event
        # the same submission without the token is fine: the token alone was the problem
        assert L.append(sub).ok
    (q,) = quarantined(db_url)
    assert (q.code, q.field) == (code, "attestation")
    assert token.encode() in bytes(q.raw)


def test_admission_mismatch_is_rejected(db_url):
    with Ledger.init(db_url, clock=FixedClock(T0)) as L:
        L.trust_issuer(T.ISSUER, T.JWKS)
        sub = T.verified_sub(1, admission="ADMIT")
        pr = sub["result"]["proof_ref"]
        signed_blocked = T.sign(T.claims_for(pr, iat=T0_S, admission="BLOCKED"))
        unsigned = T.sign(T.claims_for(pr, iat=T0_S))  # admission not signed at all
        signed_admit = T.sign(T.claims_for(pr, iat=T0_S, admission="ADMIT"))
        r1 = L.append(T.attested(sub, signed_blocked))
        r2 = L.append(T.attested(sub, unsigned))
        r3 = L.append(T.attested(sub, signed_admit))
    assert (r1.ok, r1.error["code"]) == (False, "attestation_admission_mismatch")
    assert (r2.ok, r2.error["code"]) == (False, "attestation_admission_mismatch")
    assert r3.ok
    assert [q.code for q in quarantined(db_url)] == ["attestation_admission_mismatch"] * 2


def test_skew_and_expiry_boundaries_are_judged_at_the_recorded_time(db_url):
    """iat may be up to 5 minutes after the recorded time; exp must be after it."""
    with Ledger.init(db_url, clock=FixedClock(T0)) as L:
        L.trust_issuer(T.ISSUER, T.JWKS)
        ok_skew = T.sign(T.claims_for(T.verified_sub(1)["result"]["proof_ref"], iat=T0_S + 300))
        one_second_left = T.sign(T.claims_for(T.verified_sub(2)["result"]["proof_ref"],
                                              iat=T0_S - 86400 + 1))
        results = [L.append(T.attested(T.verified_sub(1), ok_skew)),
                   L.append(T.attested(T.verified_sub(2), one_second_left))]
        assert all(r.ok for r in results), [r.error for r in results]
        assert audit(L).outcome == "passed"


def test_untrusted_issuer_is_stored_unchecked_and_trusted_one_valid(db_url):
    other = T.new_key()
    other_kid = OTHER_ISSUER + "#k1"
    with Ledger.init(db_url, clock=FixedClock(T0)) as L:
        L.trust_issuer(T.ISSUER, T.JWKS)
        valid = L.append(T.signed_sub(1, T0))
        # even a broken token of an unknown issuer is stored: nothing to check it against
        unchecked = L.append(T.signed_sub(2, T0, key=other, kid=other_kid, iss=OTHER_ISSUER,
                                          status="BLOCKED"))
        plain = L.append(T.verified_sub(3))
        views = [L.get(r.seq) for r in (valid, unchecked, plain)]
    assert [(v["attestation_verdict"], v["attestation_kid"], v["attestation_iss"])
            for v in views] == [("valid", T.KID, T.ISSUER),
                                ("unchecked", other_kid, OTHER_ISSUER),
                                ("none", None, None)]
    assert views[0]["payloads"]["attestation"]["text"] is not None
    assert "attestation" not in views[2]["payloads"]


def test_fixture_tokens_are_valid_with_the_fixture_jwks(db_url):
    subs = T.fixtures()
    with Ledger.init(db_url, clock=FixedClock(T0, step_us=1000)) as L:
        L.trust_issuer(T.ISSUER, T.JWKS)
        res = L.append_many(subs)
        assert all(r.ok for r in res), [r.error for r in res if not r.ok]
        verdicts = {L.get(r.seq)["attestation_verdict"] for r, s in zip(res, subs, strict=True)
                    if T.token_of(s)}
    assert verdicts == {"valid"}


# =============================================================================
# Keys over time
# =============================================================================

EPH_ISSUER = "did:qwed:node:eph"
EPH_KID = EPH_ISSUER + "#signing-key-v1"  # upstream's ephemeral kid: one name, many keys


def test_same_kid_naming_two_keys_over_time(db_url):
    a, b = T.new_key(), T.new_key()
    clock = FixedClock(T0, step_us=1000)
    with Ledger.init(db_url, clock=clock) as L:
        L.trust_issuer(EPH_ISSUER, T.jwks_of(a, EPH_KID))
        by_a = L.append(T.signed_sub(1, clock.now_us(), key=a, kid=EPH_KID, iss=EPH_ISSUER))
        L.end_key("retire", EPH_KID, reason="process restarted")
        L.trust_issuer(EPH_ISSUER, T.jwks_of(b, EPH_KID))
        by_b = L.append(T.signed_sub(2, clock.now_us(), key=b, kid=EPH_KID, iss=EPH_ISSUER))
        late_a = L.append(T.signed_sub(3, clock.now_us(), key=a, kid=EPH_KID, iss=EPH_ISSUER))
        assert by_a.ok and by_b.ok
        assert (late_a.ok, late_a.error["code"]) == (False, "attestation_signature_invalid")
        assert [L.get(r.seq)["attestation_verdict"] for r in (by_a, by_b)] == ["valid"] * 2
        keys = L.trust_store().keys
        assert [(k.kid, k.since_seq, k.until_seq) for k in keys] == [
            (EPH_KID, 0, 2), (EPH_KID, 3, None)]
        assert keys[0].thumbprint != keys[1].thumbprint
        report = audit(L)
    assert report.outcome == "passed"
    assert report.summary.to_json() == {"rows": 5, "verified": 5, "failed": 0, "unverified": 0}


def test_retired_key_keeps_older_rows_valid_and_rejects_new_ones(db_url):
    clock = FixedClock(T0, step_us=1000)
    with Ledger.init(db_url, clock=clock) as L:
        L.trust_issuer(T.ISSUER, T.JWKS)
        before = L.append(T.signed_sub(1, clock.now_us()))
        L.end_key("retire", T.KID, reason="rotation")
        after = L.append(T.signed_sub(2, clock.now_us()))
        report = audit(L)
    assert before.ok
    assert (after.ok, after.error["code"]) == (False, "attestation_unknown_kid")
    assert report.outcome == "passed" and report.summary.verified == 3


def test_revocation_with_compromised_since_fails_only_later_rows(db_url):
    clock = FixedClock(T0)
    with Ledger.init(db_url, clock=clock) as L:
        L.trust_issuer(T.ISSUER, T.JWKS)
        early = L.append(T.signed_sub(1, clock.now_us()))
        clock.advance(3600 * 1_000_000)
        compromised_since = clock.now_us()
        clock.advance(3600 * 1_000_000)
        late = L.append(T.signed_sub(2, clock.now_us()))  # valid when appended ...
        assert early.ok and late.ok and L.get(late.seq)["attestation_verdict"] == "valid"
        L.end_key("revoke", T.KID, reason="key leaked", compromised_since_us=compromised_since)
        after = L.append(T.signed_sub(3, clock.now_us()))
        report = audit(L)
    assert (after.ok, after.error["code"]) == (False, "attestation_unknown_kid")
    # ... but the audit, knowing the compromise, fails it; the earlier row stays verified.
    assert [(f.code, f.seq, f.cls) for f in report.findings] == [
        ("attestation_key_compromised", late.seq, "signature_invalid")]
    assert report.summary.to_json() == {"rows": 4, "verified": 3, "failed": 1, "unverified": 0}
    assert report.outcome == "failed" and EXIT_CODES[report.outcome] == 1


def test_revocation_without_compromise_keeps_every_recorded_row_valid(db_url):
    clock = FixedClock(T0, step_us=1000)
    with Ledger.init(db_url, clock=clock) as L:
        L.trust_issuer(T.ISSUER, T.JWKS)
        L.append_many([T.signed_sub(i, clock.now_us()) for i in range(3)])
        L.end_key("revoke", T.KID, reason="decommissioned")
        report = audit(L)
    assert report.outcome == "passed" and report.summary.verified == 5


def test_tokens_valid_when_recorded_stay_verified_long_after_expiry(db_url):
    subs = T.fixtures()
    with Ledger.init(db_url, clock=FixedClock(T0, step_us=1000)) as L:
        L.trust_issuer(T.ISSUER, T.JWKS)
        assert all(r.ok for r in L.append_many(subs))
    assert time.time() > T.FIXTURE_IAT + 2 * 86400  # every fixture token has expired by now
    with Ledger.open(db_url) as L:  # the system clock: audited today
        report = audit(L)
    assert report.outcome == "passed"
    assert report.summary.verified == report.summary.rows == len(subs) + 1
    # and a year later still
    with Ledger.open(db_url, clock=FixedClock(T0 + 365 * 86400 * 1_000_000)) as L:
        assert audit(L).outcome == "passed"


def test_audit_judges_at_each_rows_position_not_at_the_current_trust_store(db_url):
    """A key trusted *after* a row confirms it; the same key retired before the audit
    does not undo the rows recorded while it was trusted."""
    clock = FixedClock(T0, step_us=1000)
    with Ledger.init(db_url, clock=clock) as L:
        early = L.append(T.signed_sub(1, clock.now_us()))  # issuer unknown: unchecked
        L.trust_issuer(T.ISSUER, T.JWKS)
        mid = L.append(T.signed_sub(2, clock.now_us()))
        L.end_key("retire", T.KID, reason="rotation")
        assert L.get(early.seq)["attestation_verdict"] == "unchecked"
        assert L.get(mid.seq)["attestation_verdict"] == "valid"
        report = audit(L)
    assert report.outcome == "passed"
    assert report.summary.to_json() == {"rows": 4, "verified": 4, "failed": 0, "unverified": 0}


def test_two_active_keys_under_one_kid_are_both_tried(db_url):
    """A kid is only a hint: every active key under it is tried."""
    a, b = T.new_key(), T.new_key()
    clock = FixedClock(T0, step_us=1000)
    with Ledger.init(db_url, clock=clock) as L:
        L.trust_issuer(EPH_ISSUER, T.jwks_of(a, EPH_KID))
        L.trust_issuer(EPH_ISSUER, T.jwks_of(b, EPH_KID))
        res = [L.append(T.signed_sub(i, clock.now_us(), key=k, kid=EPH_KID, iss=EPH_ISSUER))
               for i, k in enumerate((a, b))]
        assert all(r.ok for r in res), [r.error for r in res]
        report = audit(L)
    assert report.outcome == "passed" and report.summary.verified == 4


def test_a_row_accepted_as_valid_never_fails_its_attestation_in_the_audit(db_url):
    hour = 3600 * 1_000_000
    with Ledger.init(db_url, clock=FixedClock(T0 + 10 * hour)) as ahead:
        ahead.trust_issuer(T.ISSUER, T.JWKS)
        ahead.append(T.verified_sub(1))  # recorded 10 h after T0
    with Ledger.open(db_url, clock=FixedClock(T0)) as behind:
        token_expires_at_t0_plus_4h = T.signed_sub(2, T0 - 20 * hour)
        res = behind.append(token_expires_at_t0_plus_4h)
        if res.ok:  # recorded at T0 + 10 h: the audit must agree with the append check
            assert behind.get(res.seq)["recorded_at"] == "2026-01-01T11:00:00.000000Z"
            report = audit(behind)
            assert report.findings == (), report.findings
        else:
            assert res.error["code"] == "attestation_expired_at_record"


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
