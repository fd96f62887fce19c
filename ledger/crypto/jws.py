"""The manifest JWT of an export bundle (docs/export.md): signed and checked here only.

A compact JWS, EdDSA (Ed25519), header ``{"alg": "EdDSA", "kid", "typ":
"ledger-export+jwt"}``, read strictly (:mod:`ledger.core.strict`): every part canonical
unpadded base64url, header and claims JSON objects without duplicate keys.
"""

from __future__ import annotations

from typing import Any, Generic, NamedTuple, TypeVar

import jwt
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from ledger.core.finding import Disposition
from ledger.core.strict import StrictError, b64url_decode, loads
from ledger.crypto.keys import PublicKeyRef, jwk_thumbprint

JWT_TYP = "ledger-export+jwt"
UNTRUSTED = ("the %s verifies only with the bundle's own jwks.json; give the ledger's keys "
             "with --jwks")


_Parsed = TypeVar("_Parsed")


class SignatureCheck(NamedTuple, Generic[_Parsed]):
    """How a signature check ended, and what it read (claims, checkpoint) if anything."""

    disposition: Disposition
    code: str
    message: str
    parsed: _Parsed | None = None


def sign_manifest(claims: dict[str, Any], private_key: Ed25519PrivateKey, kid: str) -> str:
    """The compact JWS of ``claims`` signed by ``private_key`` (header kid ``kid``)."""
    return jwt.encode(claims, private_key, algorithm="EdDSA",
                      headers={"kid": kid, "typ": JWT_TYP})


def parse_jwt(token: bytes) -> tuple[dict[str, Any], dict[str, Any], bytes, bytes]:
    """(header, claims, signing input, signature) of a compact JWS, read strictly.
    Raises ValueError (StrictError, UnicodeDecodeError)."""
    parts = token.decode("ascii").split(".")
    if len(parts) != 3:
        raise ValueError("a compact JWS has three parts")
    names = ("header", "claims", "signature")
    header, claims = (loads(b64url_decode(p, n)) for p, n in zip(parts[:2], names[:2], strict=True))
    if not isinstance(header, dict) or not isinstance(claims, dict):
        raise ValueError("header and claims must be JSON objects")  # callers catch ValueError
    return header, claims, f"{parts[0]}.{parts[1]}".encode("ascii"), \
        b64url_decode(parts[2], names[2])


def verifies(public_raw: bytes, signature: bytes, message: bytes) -> bool:
    """Does the Ed25519 key ``public_raw`` verify ``signature`` over ``message``?"""
    try:
        Ed25519PublicKey.from_public_bytes(public_raw).verify(signature, message)
        return True
    except (InvalidSignature, ValueError):
        return False


def check_manifest_jwt(token: bytes, keys: list[PublicKeyRef], trusted: bool,
                       ) -> SignatureCheck[dict[str, Any]]:
    """The manifest JWT's check (``parsed``: its claims, when they could be read).  ``keys``
    are the verifier's trusted keys, or (``trusted`` False) the bundle's own jwks.json:
    then a valid signature only abstains, since anyone can put a key in a bundle.  Never
    raises for bad input."""
    try:
        header, claims, signing_input, signature = parse_jwt(token)
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        why = exc.message if isinstance(exc, StrictError) else exc
        return SignatureCheck(Disposition.FAILED, "manifest_jwt_malformed",
                              f"not a compact JWS: {why}")
    if header.get("alg") != "EdDSA" or header.get("typ") != JWT_TYP or "crit" in header:
        return SignatureCheck(Disposition.FAILED, "manifest_jwt_header",
                              f"header must be alg EdDSA, typ {JWT_TYP}, no crit", claims)
    kid = header.get("kid")
    ordered = sorted(keys, key=lambda k: jwk_thumbprint(k.public_raw) != kid)
    if any(verifies(k.public_raw, signature, signing_input) for k in ordered):
        if trusted:
            return SignatureCheck(Disposition.VERIFIED, "manifest_signature_valid",
                                  "signed by a trusted key", claims)
        return SignatureCheck(Disposition.ABSTAINED, "untrusted_key", UNTRUSTED % "signature",
                              claims)
    where = "any trusted key" if trusted else "any key of the bundle's jwks.json"
    return SignatureCheck(Disposition.FAILED, "manifest_signature_invalid",
                          f"signature does not verify with {where}", claims)
