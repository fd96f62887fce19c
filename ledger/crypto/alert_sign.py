"""Sign and check alerts (docs/format-alert.md) with the ledger's Ed25519 key.

The key is the newest active key of the keyring named after the ledger origin (the one
that signs receipts and tokens); ``kid`` is its JWK ``kid``, so a receiver verifies an
alert with the ledger's ``/.well-known/jwks.json``.
"""

from __future__ import annotations

from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from ledger.core.alert import signing_input
from ledger.core.strict import StrictError, loads
from ledger.core.strict import b64url_decode as strict_b64url
from ledger.crypto.jws import verifies
from ledger.crypto.keys import b64url, b64url_decode
from ledger.crypto.tokens import key_from_jwk
from ledger.errors import CanonicalizationError, UsageError

ALG = "Ed25519"
SIG_SIZE = 64


def sign_alert(alert: dict[str, Any], key: Ed25519PrivateKey, kid: str) -> dict[str, Any]:
    """The webhook envelope of ``alert``, signed by ``key`` (named ``kid``)."""
    sig = key.sign(signing_input(alert))
    return {"alert": alert, "signature": {"alg": ALG, "kid": kid, "sig": b64url(sig)}}


def check_alert(envelope: Any, jwks: dict[str, Any]) -> dict[str, Any]:
    """The alert of ``envelope`` if its signature verifies with the key of ``jwks`` its
    ``kid`` names.  ``envelope`` is the webhook body as received (bytes or text, read
    strictly: UTF-8 JSON without duplicate keys) or already parsed.  ``signature.sig`` must
    be canonical unpadded base64url of 64 bytes.  Raises UsageError (code ``bad_alert`` or
    ``bad_alert_signature``)."""
    if isinstance(envelope, (bytes, bytearray, str)):
        try:
            envelope = loads(bytes(envelope) if isinstance(envelope, bytearray) else envelope)
        except StrictError as exc:
            raise UsageError(f"the alert body is not strict JSON: {exc.message}",
                             code="bad_alert", field=exc.field or "body") from None
    if not isinstance(envelope, dict) or not isinstance(envelope.get("signature"), dict):
        raise UsageError("an alert envelope has \"alert\" and \"signature\" objects",
                         code="bad_alert", field="signature")
    sig = envelope["signature"]
    if sig.get("alg") != ALG:
        raise UsageError(f"alert signature alg must be {ALG}", code="bad_alert",
                         field="signature.alg")
    try:
        message = signing_input(envelope.get("alert"))
    except CanonicalizationError as exc:
        raise UsageError(f"the alert is outside the canonical JSON subset: {exc.message}",
                         code="bad_alert", field="alert") from None
    try:
        raw = strict_b64url(sig.get("sig"), "signature.sig")
    except StrictError:
        raw = b""
    if len(raw) != SIG_SIZE:
        raise UsageError(f"alert signature is not canonical unpadded base64url of {SIG_SIZE}"
                         " bytes", code="bad_alert", field="signature.sig")
    for jwk in jwks.get("keys", []):
        got = key_from_jwk(jwk)
        if got is None or got[1] != sig.get("kid") or got[0] != "EdDSA":
            continue
        if verifies(_raw(jwk), raw, message):
            return dict(envelope["alert"])
    raise UsageError(f"the alert signature does not verify with key {sig.get('kid')!r}",
                     code="bad_alert_signature", field="signature")


def _raw(jwk: dict[str, Any]) -> bytes:
    return b64url_decode(str(jwk["x"]))
