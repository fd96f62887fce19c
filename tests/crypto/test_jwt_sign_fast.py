"""The ledger's EdDSA JWT signer writes the compact JWS itself; pinned to PyJWT's bytes.

Ed25519 signatures are deterministic, so the direct encoding must equal
``jwt.encode(claims, key, algorithm="EdDSA", headers={"kid": ..., "typ": ...})`` exactly,
for receipts, access tokens and any text; claims it does not cover go to PyJWT itself.
"""

from __future__ import annotations

import datetime as dt

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.crypto.tokens import JwtSigner

KEY = Ed25519PrivateKey.from_private_bytes(bytes(range(32)))
SIGNER = JwtSigner("kid-Ä-1", KEY, {"keys": []})


def _pyjwt(claims, typ, kid=SIGNER.kid):
    return jwt.encode(claims, KEY, algorithm="EdDSA", headers={"kid": kid, "typ": typ})


scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.text())


@settings(max_examples=200, deadline=None)
@given(claims=st.dictionaries(st.text(), scalars, max_size=8),
       typ=st.sampled_from(["ledger-receipt+jwt", "at+jwt", "ledger-erasure-report+jwt"]))
def test_direct_jws_equals_pyjwt(claims, typ):
    assert SIGNER.sign_jwt(claims, typ) == _pyjwt(claims, typ)


def test_receipt_shaped_claims_verify_with_pyjwt():
    claims = {"iss": "ledger.example/log", "origin": "ledger.example/log",
              "ledger_id": "5b0cbb2e-6d6a-4a51-8d3c-3c1c1f7f6b10", "seq": 7,
              "entry_hash": "sha256:" + "ab" * 32, "recorded_at": "2026-12-01T13:00:00.000001Z",
              "iat": 1_764_590_000, "producer": "prödücer"}
    token = SIGNER.sign_jwt(claims, "ledger-receipt+jwt")
    assert token == _pyjwt(claims, "ledger-receipt+jwt")
    assert jwt.decode(token, KEY.public_key(), algorithms=["EdDSA"],
                      options={"verify_aud": False}) == claims
    assert jwt.get_unverified_header(token) == {"alg": "EdDSA", "kid": SIGNER.kid,
                                                "typ": "ledger-receipt+jwt"}
    tampered = token[:-3] + ("A" if token[-3] != "A" else "B") + token[-2:]
    with pytest.raises(jwt.InvalidSignatureError):
        jwt.decode(tampered, KEY.public_key(), algorithms=["EdDSA"])


@pytest.mark.parametrize("claims", [
    {"exp": dt.datetime(2030, 1, 1, tzinfo=dt.UTC)},  # PyJWT turns it into a number
    {"nested": {"a": [1, 2]}},
    {"f": 1.5},
])
def test_other_claims_take_pyjwts_path(claims):
    assert SIGNER.sign_jwt(claims, "at+jwt") == _pyjwt(claims, "at+jwt")


def test_header_is_per_kid_and_typ():
    other = JwtSigner("kid-2", KEY, {"keys": []})
    assert other.sign_jwt({"a": 1}, "at+jwt") == _pyjwt({"a": 1}, "at+jwt", kid="kid-2")
    assert SIGNER.sign_jwt({"a": 1}, "at+jwt") == _pyjwt({"a": 1}, "at+jwt")
