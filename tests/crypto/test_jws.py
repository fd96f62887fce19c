"""ledger.crypto.jws: the manifest JWT signed and checked in one place."""

from __future__ import annotations

import jwt
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from ledger.crypto.jws import JWT_TYP, check_manifest_jwt, parse_jwt, sign_manifest
from ledger.crypto.keys import PublicKeyRef, jwk_thumbprint, raw_public

KEY = Ed25519PrivateKey.from_private_bytes(bytes(range(1, 33)))
REF = PublicKeyRef(None, raw_public(KEY))
CLAIMS = {"iss": "o", "sub": "l", "iat": 1, "manifest_sha256": "sha256:" + "0" * 64}


def test_signed_tokens_check_as_verified_with_trusted_keys_and_abstain_without():
    token = sign_manifest(CLAIMS, KEY, jwk_thumbprint(REF.public_raw)).encode("ascii")
    header, claims, _, _ = parse_jwt(token)
    assert header["typ"] == JWT_TYP and header["alg"] == "EdDSA" and claims == CLAIMS
    assert check_manifest_jwt(token, [REF], True)[:2] == ("verified", "manifest_signature_valid")
    assert check_manifest_jwt(token, [REF], False)[:2] == ("abstained", "untrusted_key")
    other = PublicKeyRef(None, raw_public(Ed25519PrivateKey.generate()))
    check = check_manifest_jwt(token, [other], True)
    assert (check.disposition, check.code, check.parsed) == (
        "failed", "manifest_signature_invalid", CLAIMS)


def test_the_header_is_checked():
    token = jwt.encode(CLAIMS, KEY, algorithm="EdDSA", headers={"typ": "JWT"}).encode()
    assert check_manifest_jwt(token, [REF], True).code == "manifest_jwt_header"
    assert check_manifest_jwt(b"a.b", [REF], True).code == "manifest_jwt_malformed"
