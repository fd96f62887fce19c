"""Attestation JWTs from the upstream producer: inspection, and the rules their claims
must meet once the signature verified (the trust store and the signature check are in
:mod:`ledger.crypto.trust`; every rule is listed in docs/format-attestation.md).

Header values read before verification are hints only (named ``unverified_*``).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

import jwt

from ledger.errors import SubmissionError

ATTESTATION_TYP = "qwed-attestation+jwt"

# Attestation verdicts recorded on each entry (att_verdict column / envelope).
VERDICT_NONE = "none"  # no attestation submitted
VERDICT_UNCHECKED = "unchecked"  # issuer has no trusted key at append time: stored, not judged
VERDICT_VALID = "valid"  # verified against the trust store at append time

CLAIMS_VERSION = "1.0"  # qwed.version, the only claims format the upstream producer signs
CLOCK_SKEW_US = 300 * 1_000_000  # leeway of iat and nbf against the judged time
REQUIRED_CLAIMS = ("iss", "sub", "iat", "exp", "jti", "qwed")
Problem = tuple[str, str]  # (code, message)


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


@dataclass(frozen=True)
class Binding:
    """What the ledger knows of the row a token attests; ``None`` members are unknown
    (not checked): ``query`` when the submission gave none, ``admission`` likewise,
    ``engine`` where a caller does not pass it."""

    proof_ref: str | None
    query: str | None = None
    admission: str | None = None
    engine: str | None = None


def _int(value: Any) -> bool:
    return type(value) is int  # not bool, not float


def time_problem(iat: Any, exp: Any, t: int, nbf: Any = None) -> Problem | None:
    """Was a token with these iat/exp/nbf (seconds; nbf optional) valid at time ``t`` (µs)?
    ``iat`` and ``nbf`` may be up to ``CLOCK_SKEW_US`` after ``t``; ``exp`` must be after it."""
    if not _int(iat) or not _int(exp):
        return "attestation_claims_missing", "iat and exp must be integers"
    if nbf is not None and not _int(nbf):
        return "attestation_claims_missing", "nbf, when present, must be an integer"
    if iat * 1_000_000 > t + CLOCK_SKEW_US:
        return "attestation_not_yet_valid", "issued after the row was recorded"
    if nbf is not None and nbf * 1_000_000 > t + CLOCK_SKEW_US:
        return "attestation_nbf_after_record", "valid only from (nbf) after the row was recorded"
    if exp * 1_000_000 <= t:
        return "attestation_expired_at_record", "already expired when the row was recorded"
    return None


def claims_problem(claims: dict[str, Any], t: int, row: Binding) -> Problem | None:
    """The first rule the verified ``claims`` break for ``row`` recorded at ``t`` (µs), or
    None.  A signed value the ledger also knows must agree with it; a member the producer
    always signs but this token lacks (``qwed.version``, ``qwed.query_hash``,
    ``qwed.result.engine``) is not a contradiction.  The issuer binding is the trust
    store's (the key that verified is the issuer's)."""
    bad = time_problem(claims.get("iat"), claims.get("exp"), t, claims.get("nbf"))
    if bad:
        return bad
    if not isinstance(claims.get("jti"), str) or not isinstance(claims.get("sub"), str):
        return "attestation_claims_missing", "jti and sub must be strings"
    q = claims.get("qwed")
    res = q.get("result") if isinstance(q, dict) else None
    if not isinstance(q, dict) or not isinstance(res, dict):
        return "attestation_claims_missing", "qwed.result is missing or not an object"
    if "version" in q and q["version"] != CLAIMS_VERSION:
        return "attestation_version_unsupported", \
            f"qwed.version is {q['version']!r}, not {CLAIMS_VERSION!r}"
    return _binding_problem(claims, q, res, row)


def _binding_problem(claims: dict[str, Any], q: dict[str, Any], res: dict[str, Any],
                     row: Binding) -> Problem | None:
    if res.get("status") != "VERIFIED":
        return "attestation_status_mismatch", f"signed status is {res.get('status')!r}"
    if q.get("proof_hash") != row.proof_ref:
        return "attestation_proof_mismatch", "qwed.proof_hash differs from the row's proof_ref"
    if row.query is not None:
        want = "sha256:" + hashlib.sha256(row.query.encode("utf-8")).hexdigest()
        if q.get("query_hash") != want:
            return "attestation_query_mismatch", "qwed.query_hash does not hash the query"
    if row.admission is not None and q.get("admission") != row.admission:
        return "attestation_admission_mismatch", "qwed.admission differs from the admission"
    if "query_hash" in q and claims["sub"] != q["query_hash"]:
        return "attestation_subject_mismatch", "sub differs from qwed.query_hash"
    if row.engine is not None and "engine" in res and res["engine"] != row.engine:
        return "attestation_engine_mismatch", \
            f"signed engine {res.get('engine')!r} is not the row's engine {row.engine!r}"
    return None
