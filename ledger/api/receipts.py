"""Signed append receipts: a JWT per appended (or replayed) entry.

Header ``{"alg": "EdDSA", "kid": <ledger key thumbprint>, "typ": "ledger-receipt+jwt"}``;
claims::

    {"iss": <ledger origin>, "origin": <ledger origin>, "ledger_id": <uuid>,
     "seq": <int>, "entry_hash": "sha256:<hex>", "recorded_at": "<RFC 3339 µs>",
     "producer": <token subject>, "iat": <s>}

A receipt is issued only after the entry's transaction has committed; it says
"this ledger holds entry ``seq`` with this hash".  Verify it with the keys
at ``/.well-known/jwks.json`` and, for the strongest check, with an inclusion
proof (``GET /v1/entries/{seq}?proof=true``) whose leaf is ``entry_hash``.
"""

from __future__ import annotations

from typing import Any

from ledger.crypto.tokens import verify_ledger_jwt
from ledger.ops.append import AppendResult
from ledger.ops.tokens import RECEIPT_TYP, JwtSigner

RECEIPT_CLAIMS = ("iss", "origin", "ledger_id", "seq", "entry_hash", "recorded_at", "iat")


def receipt_claims(result: AppendResult, *, origin: str, ledger_id: str,
                   producer: str | None, now_s: int) -> dict[str, Any]:
    claims: dict[str, Any] = {"iss": origin, "origin": origin, "ledger_id": ledger_id,
                              "seq": result.seq, "entry_hash": result.entry_hash,
                              "recorded_at": result.recorded_at, "iat": now_s}
    if producer is not None:
        claims["producer"] = producer
    return claims


def sign_receipt(signer: JwtSigner, result: AppendResult, *, origin: str, ledger_id: str,
                 producer: str | None, now_s: int) -> str:
    """The receipt JWT for an accepted ``result`` (``result.ok`` must be true)."""
    assert result.ok, "receipts are only issued for appended entries"
    return signer.sign_jwt(receipt_claims(result, origin=origin, ledger_id=ledger_id,
                                          producer=producer, now_s=now_s), RECEIPT_TYP)


def verify_receipt(token: str, jwks: dict[str, Any], origin: str) -> dict[str, Any]:
    """The claims of a receipt signed by one of ``jwks``'s Ed25519 keys for ``origin``.

    Raises IntegrityError (code ``receipt_invalid``) for anything else.
    """
    return verify_ledger_jwt(token, jwks, typ=RECEIPT_TYP, issuer=origin,
                             require=list(RECEIPT_CLAIMS), code="receipt_invalid")
