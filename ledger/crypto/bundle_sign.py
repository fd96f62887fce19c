"""Signature checks of an export bundle (docs/export.md): the manifest JWT and the
checkpoint note, both Ed25519.

``check_*`` return ``(disposition, code, message, parsed)`` and never raise for bad
input.  With the verifier's trusted keys a valid signature is *verified*; with only the
bundle's own ``jwks.json`` it *abstains*, since anyone can put a key in a bundle.
"""

from __future__ import annotations

import base64
import json
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from ledger.core.bundle import unique_keys
from ledger.core.note import Checkpoint, parse_checkpoint_body, parse_note
from ledger.crypto.keys import PublicKeyRef, jwk_thumbprint, known_keys
from ledger.errors import NoteError

JWT_TYP = "ledger-export+jwt"
_UNTRUSTED = ("the %s verifies only with the bundle's own jwks.json; give the ledger's keys "
              "with --jwks")
_B64URL = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")


def _b64url(text: str) -> bytes:
    # stricter than keys.py's decoder: no characters outside the alphabet, no bad length
    if not set(text) <= _B64URL or len(text) % 4 == 1:
        raise ValueError("not base64url")
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def parse_jwt(token: bytes) -> tuple[dict[str, Any], dict[str, Any], bytes, bytes]:
    """(header, claims, signing input, signature) of a compact JWS.  Raises ValueError."""
    parts = token.decode("ascii").split(".")
    if len(parts) != 3:
        raise ValueError("a compact JWS has three parts")
    header, claims = (json.loads(_b64url(p), object_pairs_hook=unique_keys) for p in parts[:2])
    if not isinstance(header, dict) or not isinstance(claims, dict):
        raise ValueError("header and claims must be JSON objects")  # noqa: TRY004
    return header, claims, f"{parts[0]}.{parts[1]}".encode("ascii"), _b64url(parts[2])


def _verifies(raw: bytes, signature: bytes, message: bytes) -> bool:
    try:
        Ed25519PublicKey.from_public_bytes(raw).verify(signature, message)
        return True
    except (InvalidSignature, ValueError):
        return False


def check_jwt(token: bytes, keys: list[PublicKeyRef], trusted: bool,
              ) -> tuple[str, str, str, dict[str, Any] | None]:
    """(disposition, code, message, claims) of the manifest JWT.  ``keys`` are the
    verifier's trusted keys, or (``trusted`` False) the bundle's own jwks.json: then a
    valid signature only abstains, since anyone can put a key in a bundle."""
    try:
        header, claims, signing_input, signature = parse_jwt(token)
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        return "failed", "manifest_jwt_malformed", f"not a compact JWS: {exc}", None
    if header.get("alg") != "EdDSA" or header.get("typ") != JWT_TYP or "crit" in header:
        return ("failed", "manifest_jwt_header",
                f"header must be alg EdDSA, typ {JWT_TYP}, no crit", claims)
    kid = header.get("kid")
    ordered = sorted(keys, key=lambda k: jwk_thumbprint(k.public_raw) != kid)
    if any(_verifies(k.public_raw, signature, signing_input) for k in ordered):
        if trusted:
            return "verified", "manifest_signature_valid", "signed by a trusted key", claims
        return "abstained", "untrusted_key", _UNTRUSTED % "signature", claims
    where = "any trusted key" if trusted else "any key of the bundle's jwks.json"
    return "failed", "manifest_signature_invalid", f"signature does not verify with {where}", \
        claims


def check_note(data: bytes, keys: list[PublicKeyRef], trusted: bool,
               ) -> tuple[str, str, str, Checkpoint | None]:
    """(disposition, code, message, checkpoint) of the signed checkpoint note."""
    try:
        note = parse_note(data)
        cp = parse_checkpoint_body(note.text)
    except NoteError as exc:
        return "failed", "checkpoint_malformed", exc.message, None
    known = known_keys(keys, cp.origin)
    good = 0
    for sig in note.signatures:
        key = known.get((sig.name, sig.key_id))
        if key is None:
            continue
        if not _verifies(key.public_bytes_raw(), sig.signature, note.text.encode("utf-8")):
            return ("failed", "checkpoint_signature_invalid",
                    f"signature by {sig.name} ({sig.key_id.hex()}) does not verify", cp)
        good += 1
    if not good:
        where = "a trusted key" if trusted else "a key of the bundle's jwks.json"
        return "failed", "checkpoint_signature_invalid", f"no signature by {where}", cp
    if not trusted:
        return "abstained", "untrusted_key", _UNTRUSTED % "checkpoint", cp
    return "verified", "checkpoint_signature_valid", "signed by a trusted key", cp
