"""Attestation JWTs from the upstream producer: inspection (and, with a trust
store, verification — see :mod:`ledger.crypto.trust`).

Header values read before verification are hints only (named ``unverified_*``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import jwt

from ledger.errors import SubmissionError

ATTESTATION_TYP = "qwed-attestation+jwt"

# Attestation verdicts recorded on each entry (att_verdict column / envelope).
VERDICT_NONE = "none"  # no attestation submitted
VERDICT_UNCHECKED = "unchecked"  # issuer has no trusted key at append time: stored, not judged
VERDICT_VALID = "valid"  # verified against the trust store at append time


@dataclass(frozen=True)
class UnverifiedAttestation:
    unverified_header: dict[str, Any]
    unverified_claims: dict[str, Any]

    @property
    def kid(self) -> str | None:
        kid = self.unverified_header.get("kid")
        return kid if isinstance(kid, str) else None

    @property
    def iss(self) -> str | None:
        iss = self.unverified_claims.get("iss")
        return iss if isinstance(iss, str) else None


def inspect_attestation(token: str) -> UnverifiedAttestation:
    """Decode header and claims without verifying.  Raises SubmissionError if the
    token is not a JWS compact serialization with JSON object header and claims."""
    try:
        header = jwt.get_unverified_header(token)
        claims = jwt.decode(token, options={"verify_signature": False})
    except jwt.PyJWTError as exc:
        raise SubmissionError(f"not a decodable JWT: {exc}", code="attestation_malformed",
                              field="attestation") from None
    if not isinstance(claims, dict):
        raise SubmissionError("JWT claims are not a JSON object", code="attestation_malformed",
                              field="attestation")
    return UnverifiedAttestation(header, claims)
