"""JWTs with PyJWT, in one place: the ledger's EdDSA signer (access tokens, receipts),
key sets built from JWKS, decoding with an explicit algorithm and key list, and the
ES256 helpers the samples and the demo use to play an upstream producer.

Nothing here decides policy (roles, subjects, lifetimes): that is ``ledger.ops.tokens``.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from typing import Any

import jwt
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.ec import SECP256R1, EllipticCurvePublicKey
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from ledger.core.strict import StrictError
from ledger.crypto.jws import parse_jwt
from ledger.crypto.keys import Keyring
from ledger.errors import IntegrityError, UsageError

# the public keys a token may be checked with: the ledger's own (EdDSA) and producers' (ES256)
VerificationKey = Ed25519PublicKey | EllipticCurvePublicKey


_HEADERS: dict[tuple[str, str], str] = {}  # (kid, typ) -> base64url header segment
_CLAIMS_JSON = json.JSONEncoder(separators=(",", ":"))  # PyJWT's payload spelling
_PLAIN = frozenset({str, int, bool, type(None)})


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _plain_claims(claims: Any) -> bool:
    """A dict of scalar claims (the ledger's receipts and tokens): what the direct
    encoding covers; anything else (nested or datetime values) takes PyJWT's path."""
    return type(claims) is dict and set(map(type, claims.values())) <= _PLAIN and \
        all(type(k) is str for k in claims)


@dataclass(frozen=True)
class JwtSigner:
    """One private key and its kid; signs EdDSA JWTs.  Build it with :func:`ledger_signer`."""

    kid: str
    key: Ed25519PrivateKey
    public_jwks: dict[str, Any]

    def sign_jwt(self, claims: dict[str, Any], typ: str) -> str:
        """The compact JWS of ``claims``: byte for byte what ``jwt.encode(claims, key,
        algorithm="EdDSA", headers={"kid": kid, "typ": typ})`` returns (Ed25519 is
        deterministic; a test pins the two), without PyJWT's per-call work: the header
        segment is encoded once per ``typ``, the claims with PyJWT's own JSON spelling.
        Claims must be JSON values (PyJWT would also turn datetimes into numbers: none
        of the ledger's claims is one, and anything else takes PyJWT's path)."""
        if not _plain_claims(claims):
            return jwt.encode(claims, self.key, algorithm="EdDSA",
                              headers={"kid": self.kid, "typ": typ})
        head = _HEADERS.get((self.kid, typ))
        if head is None:
            head = _b64(json.dumps({"alg": "EdDSA", "kid": self.kid, "typ": typ},
                                   separators=(",", ":"), sort_keys=True).encode())
            if len(_HEADERS) < 64:
                _HEADERS[(self.kid, typ)] = head
        signing_input = head + "." + _b64(_CLAIMS_JSON.encode(claims).encode())
        return signing_input + "." + _b64(self.key.sign(signing_input.encode("ascii")))

    def jwks(self) -> dict[str, Any]:
        return self.public_jwks


def ledger_signer(keyring: Keyring, origin: str) -> JwtSigner:
    """The signer for ``origin``: its newest active key; its JWKS is every key (active or
    retired) named ``origin`` — keys of other ledgers in the same keyring are not trusted.

    Raises KeyringError (a UsageError) when the keyring has no usable active
    key named ``origin`` (run ``ledger keys generate``).
    """
    signers = keyring.signers(origin)  # validates files, modes and public keys
    jwks = keyring.active(origin)
    _, key = signers[-1]
    mine = [dict(k) for k in keyring.jwks if k.get("key_name") == origin]
    return JwtSigner(jwks[-1]["kid"], key, {"keys": mine})


# -- verification keys --------------------------------------------------------------
def key_from_jwk(jwk: object) -> tuple[str, str | None, VerificationKey] | None:
    """(alg, kid, public key) for an Ed25519 or P-256 JWK; None for any other key."""
    if not isinstance(jwk, dict):
        return None
    try:
        key = jwt.PyJWK(jwk).key
    except (jwt.PyJWKError, jwt.InvalidKeyError, ValueError, TypeError, KeyError):
        return None
    kid = jwk.get("kid") if isinstance(jwk.get("kid"), str) else None
    if isinstance(key, Ed25519PublicKey) and jwk.get("alg", "EdDSA") == "EdDSA":
        return "EdDSA", kid, key
    if isinstance(key, EllipticCurvePublicKey) and isinstance(key.curve, SECP256R1) and \
            jwk.get("alg", "ES256") == "ES256":
        return "ES256", kid, key
    return None


class KeySet:
    """Public keys by kid (keys without a kid are tried for any token of their alg)."""

    def __init__(self, jwks: object) -> None:
        items = jwks.get("keys") if isinstance(jwks, dict) else None
        if not isinstance(items, list):
            raise UsageError("a JWKS must be an object with a \"keys\" list", code="bad_jwks",
                             field="jwks")
        self.keys = [k for k in map(key_from_jwk, items) if k is not None]

    def candidates(self, kid: object, alg: str) -> list[VerificationKey]:
        """The keys to try for a token of ``alg`` whose (unverified) header names ``kid``."""
        same_alg = [(k, key) for a, k, key in self.keys if a == alg]
        if isinstance(kid, str):
            named = [key for k, key in same_alg if k == kid]
            if named:
                return named
        return [key for k, key in same_alg if k is None]

    def knows(self, kid: object) -> bool:
        """Does any key carry ``kid``?"""
        return any(k == kid for _, k, _ in self.keys)


# -- decoding -------------------------------------------------------------------------
@dataclass(frozen=True)
class Rejection:
    """Why a token was refused: ``code`` is ``token_expired``, ``bad_signature`` or
    ``invalid_token``."""

    code: str
    message: str


def unverified_header(token: str) -> dict[str, Any] | None:
    """The JOSE header of ``token`` before any check, or None when it does not decode."""
    try:
        header = jwt.get_unverified_header(token)
    except jwt.InvalidTokenError:
        return None
    return header if isinstance(header, dict) else None


def decode_with_keys(token: str, keys: list[VerificationKey], alg: str, *, audience: str | None,
                     issuer: str | None, leeway_s: int, require: list[str],
                     ) -> dict[str, Any] | Rejection:
    """The claims of ``token`` signed with ``alg`` by one of ``keys`` (tried in order),
    with exp/nbf/iat, audience and issuer checked; or the Rejection."""
    for key in keys:
        try:
            return jwt.decode(token, key, algorithms=[alg], audience=audience,
                              issuer=issuer, leeway=leeway_s, options={"require": require})
        except jwt.InvalidSignatureError:
            continue
        except jwt.ExpiredSignatureError:
            return Rejection("token_expired", "token expired")
        except jwt.InvalidTokenError as exc:
            return Rejection("invalid_token", f"token rejected: {exc}")
    return Rejection("bad_signature", "token signature does not verify")


def verify_ledger_jwt(token: str, jwks: dict[str, Any], *, typ: str, issuer: str,
                      require: list[str], code: str) -> dict[str, Any]:
    """The claims of an EdDSA JWT of type ``typ`` signed by the key of ``jwks`` its kid
    names, issued by ``issuer``.  Read strictly first (docs/format-receipt.md): every part
    canonical unpadded base64url, header and claims JSON objects without duplicate keys, no
    ``crit``.  Raises IntegrityError with ``code`` for anything else."""
    try:
        if not isinstance(token, str):
            raise ValueError("the token is not text")
        header, _, _, _ = parse_jwt(token.encode("ascii"))
    except (ValueError, UnicodeError, RecursionError) as exc:
        why = exc.message if isinstance(exc, StrictError) else exc
        raise IntegrityError(f"not a compact JWS read strictly: {why}", code=code) from None
    if "crit" in header:
        raise IntegrityError("the JWS header has crit", code=code)
    try:
        if header.get("typ") != typ or header.get("alg") != "EdDSA":
            raise IntegrityError(f"not a {typ} token", code=code)
        keys = [k for k in jwks.get("keys", []) if k.get("kid") == header.get("kid")]
        if not keys:
            raise IntegrityError("signed by an unknown key", code=code)
        key = jwt.PyJWK(keys[0], algorithm="EdDSA").key
        return jwt.decode(token, key, algorithms=["EdDSA"], issuer=issuer,
                          options={"require": require, "verify_aud": False})
    except (jwt.InvalidTokenError, jwt.PyJWKError) as exc:
        raise IntegrityError(f"does not verify: {exc}", code=code) from exc


# -- playing an upstream producer (samples, demo, tests) ---------------------------------
def new_es256_key() -> tuple[ec.EllipticCurvePrivateKey, dict[str, Any]]:
    """A fresh P-256 private key and its public JWK (no kid)."""
    key = ec.generate_private_key(ec.SECP256R1())
    return key, json.loads(jwt.algorithms.ECAlgorithm.to_jwk(key.public_key()))


def sign_es256(claims: dict[str, Any], key: ec.EllipticCurvePrivateKey, *, kid: str,
               typ: str) -> str:
    """An ES256 JWS of ``claims`` (the upstream attestation's algorithm)."""
    return jwt.encode(claims, key, algorithm="ES256", headers={"kid": kid, "typ": typ})
