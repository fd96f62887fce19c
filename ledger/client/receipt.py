"""Receipt verification for the client: its only code that calls PyJWT (its crypto boundary).

A receipt (docs/http.md "Receipts") is a JWT signed by the ledger key::

    header {"alg": "EdDSA", "kid": <thumbprint>, "typ": "ledger-receipt+jwt"}
    claims {"iss", "origin", "ledger_id", "seq", "entry_hash", "recorded_at", "producer"?, "iat"}

:func:`verify_receipt` accepts it only if the signature verifies with the key its ``kid``
names in the ledger's JWKS (the ``kid`` is a hint: nothing is trusted because of it),
``iss``/``origin`` and ``ledger_id`` are the ledger's, and ``seq``/``entry_hash`` equal
what the response said.
"""

from __future__ import annotations

import json
from typing import Any

import jwt

from ledger.client.errors import ReceiptInvalid

RECEIPT_TYP = "ledger-receipt+jwt"
RECEIPT_CLAIMS = ("iss", "origin", "ledger_id", "seq", "entry_hash", "recorded_at", "iat")


_KEYS: dict[str, Any] = {}  # JWK text -> public key object (parsing one costs more than a check)


def _key(jwk: dict[str, Any]) -> Any:
    text = json.dumps(jwk, sort_keys=True)
    if text not in _KEYS:
        if len(_KEYS) > 64:
            _KEYS.clear()
        _KEYS[text] = jwt.PyJWK(jwk, algorithm="EdDSA").key
    return _KEYS[text]


def receipt_kid(token: str) -> str | None:
    """The unverified ``kid`` hint of a receipt (None if it does not decode)."""
    try:
        kid = jwt.get_unverified_header(token).get("kid")
    except jwt.InvalidTokenError:
        return None
    return kid if isinstance(kid, str) else None


def verify_receipt(token: Any, jwks: dict[str, Any], *, origin: str, ledger_id: str | None,
                   seq: Any, entry_hash: Any) -> dict[str, Any]:
    """The verified claims of ``token``.  Raises ReceiptInvalid for anything else."""
    if not isinstance(token, str):
        raise ReceiptInvalid("the ledger answered without a receipt")
    try:
        header = jwt.get_unverified_header(token)
        if header.get("typ") != RECEIPT_TYP or header.get("alg") != "EdDSA":
            raise ReceiptInvalid("not a ledger receipt (typ/alg)")
        keys = [k for k in jwks.get("keys", []) if k.get("kid") == header.get("kid")]
        if not keys:
            raise ReceiptInvalid("receipt signed by a key the ledger does not publish")
        key = _key(keys[0])
        claims = jwt.decode(token, key, algorithms=["EdDSA"], issuer=origin,
                            options={"require": list(RECEIPT_CLAIMS), "verify_aud": False})
    except (jwt.InvalidTokenError, jwt.PyJWKError) as exc:
        raise ReceiptInvalid(f"receipt does not verify: {exc}") from exc
    if claims.get("origin") != origin:
        raise ReceiptInvalid("receipt names another ledger origin")
    if ledger_id is not None and claims.get("ledger_id") != ledger_id:
        raise ReceiptInvalid("receipt names another ledger id")
    if claims.get("seq") != seq or claims.get("entry_hash") != entry_hash:
        raise ReceiptInvalid("receipt does not sign the seq and entry_hash the ledger answered",
                             detail={"seq": seq, "entry_hash": entry_hash})
    return claims
