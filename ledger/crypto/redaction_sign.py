"""The signature of a ``ledger-redaction/2`` request: made and checked here only.

A redaction erases payload bytes; whoever can write the database could append one. So
each redaction's request document carries a compact JWS by the ledger's signing key
(EdDSA, Ed25519), which a database writer does not have::

    header {"alg": "EdDSA", "kid": <RFC 7638 thumbprint>, "typ": "ledger-redaction+jwt"}
    claims {"ledger": <ledger id>, "request_digest": "sha256:<hex>"}

``request_digest`` is SHA-256 of the canonical JSON of the document without its
``signature`` member (``RedactionRequest.request_digest``).  The audit (given the ledger's
public keys, ``--key``) and the export verifiers (``--jwks``) check it: docs/format.md
§10.1.  Ed25519 is deterministic, so the same request gives the same token.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ledger.core.finding import Disposition
from ledger.core.redaction import RedactionRequest, signature_claims
from ledger.core.strict import StrictError
from ledger.crypto.jws import SignatureCheck, parse_jwt, verifies
from ledger.crypto.keys import PublicKeyRef, jwk_thumbprint
from ledger.crypto.tokens import JwtSigner

REDACTION_TYP = "ledger-redaction+jwt"


def sign_request(signer: JwtSigner, ledger_id: str, req: RedactionRequest) -> RedactionRequest:
    """``req`` signed by the ledger key of ``signer`` (a ``ledger-redaction/2`` document)."""
    return req.signed(signer.sign_jwt(signature_claims(ledger_id, req), REDACTION_TYP))


def check_signature(req: RedactionRequest, ledger_id: str, keys: list[PublicKeyRef] | None,
                    *, trusted: bool = True) -> SignatureCheck[dict[str, Any]]:
    """The check of a signed request's signature.  ``keys``: the ledger's public keys as
    the verifier holds them (None: none given -> abstained ``no_ledger_key``); with
    ``trusted`` False they come from the data checked itself (a bundle's jwks.json), and a
    signature that verifies only abstains (``untrusted_key``).  Never raises."""
    if req.signature is None:
        return SignatureCheck(Disposition.ABSTAINED, "redaction_unsigned",
                              "an unsigned ledger-redaction/1 request")
    try:
        header, claims, signing_input, sig = parse_jwt(req.signature.encode("ascii"))
    except (ValueError, UnicodeError, RecursionError) as exc:
        why = exc.message if isinstance(exc, StrictError) else exc
        return SignatureCheck(Disposition.FAILED, "redaction_signature_invalid",
                              f"the signature is not a compact JWS: {why}")
    if header.get("alg") != "EdDSA" or header.get("typ") != REDACTION_TYP or "crit" in header:
        return SignatureCheck(Disposition.FAILED, "redaction_signature_invalid",
                              f"the signature's header must be alg EdDSA, typ {REDACTION_TYP}, "
                              "no crit", claims)
    want = signature_claims(ledger_id, req)
    if claims != want:
        return SignatureCheck(Disposition.FAILED, "redaction_signature_invalid",
                              "the signature's claims are not this ledger and this request "
                              f"(expected {want}, got {claims})", claims)
    if keys is None:
        return SignatureCheck(Disposition.ABSTAINED, "no_ledger_key",
                              "no ledger public key given (ledger audit --key, ledger "
                              "verify-export --jwks), so the redaction's signature was not "
                              "verified", claims)
    kid = header.get("kid")
    ordered = sorted(keys, key=lambda k: jwk_thumbprint(k.public_raw) != kid)
    if any(verifies(k.public_raw, sig, signing_input) for k in ordered):
        if trusted:
            return SignatureCheck(Disposition.VERIFIED, "redaction_signature_valid",
                                  "signed by a ledger key", claims)
        return SignatureCheck(Disposition.ABSTAINED, "untrusted_key",
                              "the redaction's signature verifies only with the bundle's own "
                              "jwks.json; give the ledger's keys with --jwks", claims)
    where = "any ledger key given" if trusted else "any key of the bundle's jwks.json"
    return SignatureCheck(Disposition.FAILED, "redaction_signature_invalid",
                          f"the redaction's signature does not verify with {where}", claims)


def judge_redactions(requests: Iterable[tuple[int, RedactionRequest]], ledger_id: str,
                     keys: list[PublicKeyRef] | None, *, trusted: bool = True,
                     ) -> list[tuple[int, SignatureCheck[dict[str, Any]]]]:
    """The signature check of every redaction (``(seq, request)`` in seq order), with the
    rule for unsigned ones: an unsigned (``ledger-redaction/1``) request is abstained
    (``redaction_unsigned``: its authority cannot be confirmed; redactions written before
    signed ones existed), and failed once a signed request came before it in the chain
    (software that signs never writes an unsigned one again).  Verified checks are
    returned too."""
    out: list[tuple[int, SignatureCheck[dict[str, Any]]]] = []
    seen_signed = None
    for seq, req in requests:
        if req.signature is None:
            if seen_signed is not None:
                out.append((seq, SignatureCheck[dict[str, Any]](
                    Disposition.FAILED, "redaction_unsigned",
                    f"an unsigned ledger-redaction/1 request after the signed redaction "
                    f"{seen_signed}: nothing that signs redactions writes an unsigned one")))
            else:
                out.append((seq, SignatureCheck[dict[str, Any]](
                    Disposition.ABSTAINED, "redaction_unsigned",
                    "an unsigned ledger-redaction/1 request (written before redactions were "
                    "signed): the audit cannot confirm who asked; check it against the "
                    "custodian's records")))
            continue
        if seen_signed is None:
            seen_signed = seq
        out.append((seq, check_signature(req, ledger_id, keys, trusted=trusted)))
    return out
