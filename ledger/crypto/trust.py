"""The attestation trust store (folded from ``key_event`` entries) and the
attestation check of design §2.3.

Trust rules (docs/audit.md, section "Trust store"):

* ``trust`` makes a producer public key (issuer, kid, JWK) acceptable for rows
  *after* the event's seq; the same kid may name several keys over time (the
  upstream ephemeral ``<iss>#signing-key-v1``) — a kid is only a hint, every
  active key under it is tried.
* ``retire`` / ``revoke`` stop accepting the key for rows after the event.  Rows
  recorded before stay valid evidence, *unless* the revocation carries
  ``compromised_since``: then a row recorded at or after that time whose token
  verifies only with that key fails (``attestation_key_compromised``).
* Time is judged at the row's ``recorded_at``: the token must have been issued
  (``iat``) and be valid (``nbf``, if present) by then, 5 minutes of skew each, and
  not expired (``exp``) at that time.
* A key is trusted for its issuer only: a token whose signature verifies with a key
  active at the row for *another* issuer than its ``iss`` is a forgery attempt and
  fails (``attestation_issuer_mismatch``), whether its issuer is known or not.
* An issuer with no key trusted at the row's position is *unknown*: the check
  abstains (``unknown_issuer_key``).  A key trusted later can confirm such a row
  (verified) but never refute it (a failure with a later key still abstains).

Every rule, in the order applied: docs/format-attestation.md.
"""

from __future__ import annotations

import base64
import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ec import (
    EllipticCurvePrivateKey,
    EllipticCurvePublicKey,
)
from jwt.algorithms import ECAlgorithm

from ledger.core.audit import AttestationJudge, AuditedRow
from ledger.crypto.attestation import (
    ATTESTATION_TYP,
    CLOCK_SKEW_US,
    REQUIRED_CLAIMS,
    Binding,
    claims_problem,
    time_problem,
)
from ledger.crypto.keys import b64url_decode

__all__ = ["CLOCK_SKEW_US", "REQUIRED_CLAIMS", "AttestationCheck", "TrustStore", "TrustedKey",
           "check_attestation", "jwk_thumbprint", "public_jwk", "time_problem"]

ALLOWED_ALGS = ("ES256",)
ACTIONS = ("trust", "retire", "revoke")


def jwk_thumbprint(jwk: dict[str, Any]) -> str:
    """RFC 7638 thumbprint (SHA-256, base64url without padding) of an EC or OKP JWK."""
    kty = jwk.get("kty")
    members = {"EC": ("crv", "kty", "x", "y"), "OKP": ("crv", "kty", "x"),
               "RSA": ("e", "kty", "n")}.get(kty)  # type: ignore[arg-type]
    if members is None or any(not isinstance(jwk.get(m), str) for m in members):
        raise ValueError(f"JWK of kty {kty!r} lacks its required members")
    canon = json.dumps({m: jwk[m] for m in members}, separators=(",", ":"), sort_keys=True)
    return base64.urlsafe_b64encode(hashlib.sha256(canon.encode()).digest()).rstrip(b"=").decode()


def public_jwk(jwk: dict[str, Any]) -> dict[str, Any]:
    """The public members of a P-256 JWK; raises ValueError for anything else."""
    if jwk.get("kty") != "EC" or jwk.get("crv") != "P-256":
        raise ValueError("attestation keys must be EC P-256 (ES256) JWKs")
    if "d" in jwk:
        raise ValueError("refusing a private JWK: give the public key only")
    ECAlgorithm.from_jwk(json.dumps(jwk))  # validates the point
    out = {k: jwk[k] for k in ("kty", "crv", "x", "y")}
    if isinstance(jwk.get("kid"), str):
        out["kid"] = jwk["kid"]
    return out


@dataclass
class TrustedKey:
    issuer: str
    kid: str
    thumbprint: str
    jwk: dict[str, Any]
    since_seq: int  # accepted for rows with seq > since_seq
    until_seq: int | None = None  # retired/revoked: not accepted for rows with seq > until_seq
    compromised_since_us: int | None = None
    _key: EllipticCurvePublicKey | EllipticCurvePrivateKey | None = field(default=None,
                                                                          repr=False)

    @property
    def public_key(self) -> EllipticCurvePublicKey | EllipticCurvePrivateKey:
        """The key of ``jwk`` (loaded once).  Raises what PyJWT raises for a bad JWK."""
        if self._key is None:
            self._key = ECAlgorithm.from_jwk(json.dumps(self.jwk))
        return self._key

    def active_at(self, seq: int) -> bool:
        return self.since_seq < seq and (self.until_seq is None or seq <= self.until_seq)


class TrustStore:
    """All key events of a ledger, queryable as of any position."""

    def __init__(self) -> None:
        self.keys: list[TrustedKey] = []
        self.last_event_seq = -1

    def apply(self, seq: int, event: dict[str, Any]) -> None:
        """Fold one key_event document (events must be applied in seq order)."""
        action, issuer = event.get("action"), event.get("issuer")
        self.last_event_seq = max(self.last_event_seq, seq)
        if action == "trust":
            self.keys.append(TrustedKey(issuer, event["kid"], event["thumbprint"],  # type: ignore[arg-type]
                                        event["jwk"], seq))
            return
        for k in self.keys:
            if k.issuer == issuer and k.kid == event.get("kid") and k.until_seq is None and (
                    event.get("thumbprint") in (None, k.thumbprint)):
                k.until_seq = seq
                if action == "revoke" and event.get("compromised_since_us") is not None:
                    k.compromised_since_us = event["compromised_since_us"]

    def issuer_known(self, issuer: str, seq: int) -> bool:
        return any(k.issuer == issuer and k.since_seq < seq for k in self.keys)

    def issuers(self) -> list[str]:
        return sorted({k.issuer for k in self.keys})


@dataclass(frozen=True)
class AttestationCheck:
    disposition: str  # "verified" | "failed" | "abstained"
    code: str
    message: str
    kid: str | None = None
    iss: str | None = None
    thumbprint: str | None = None
    iat: int | None = None  # set when verified: the time bounds the row must fall in
    exp: int | None = None
    nbf: int | None = None


def _fail(code: str, message: str, kid: str | None, iss: str | None) -> AttestationCheck:
    return AttestationCheck("failed", code, message, kid, iss)


def check_attestation(token: str, *, store: TrustStore, seq: int, recorded_at_us: int,
                      proof_ref: str | None, query: str | None = None,
                      admission: str | None = None, engine: str | None = None,
                      ) -> AttestationCheck:
    """Judge one attestation as of ledger position ``seq`` and time ``recorded_at_us`` for a
    row with these ``proof_ref``, ``query``, ``admission`` and ``engine`` (None: unknown, not
    checked).  Never raises for bad data: the disposition says verified, failed or
    abstained, with its code."""
    try:
        jws = _parse_jws(token)
    except ValueError as exc:
        return _fail("attestation_malformed", f"not a decodable JWT: {exc}", None, None)
    header, unverified = jws.header, jws.claims
    kid = header.get("kid") if isinstance(header.get("kid"), str) else None
    iss = unverified.get("iss") if isinstance(unverified.get("iss"), str) else None
    row = Binding(proof_ref, query, admission, engine)
    if iss is None or not store.issuer_known(iss, seq):
        return _foreign(jws, store, seq, kid, iss) or _judge_with_later_keys(
            jws, store, seq, recorded_at_us, row, kid, iss)
    res = _judge(jws, [k for k in store.keys if k.issuer == iss and k.kid == kid], seq,
                 recorded_at_us, row, kid, iss)
    if res.code in ("attestation_unknown_kid", "attestation_signature_invalid"):
        return _foreign(jws, store, seq, kid, iss) or res
    return res


def _foreign(token: _JWS, store: TrustStore, seq: int, kid: str | None,
             iss: str | None) -> AttestationCheck | None:
    """A failure if a key active at ``seq`` for an issuer other than the token's verifies
    its signature: a key is trusted for its own issuer only."""
    for k in store.keys:
        if k.issuer != iss and k.active_at(seq) and _verifies(k, token):
            return _fail("attestation_issuer_mismatch",
                         f"signed with key {k.kid!r} trusted for issuer {k.issuer!r}, but the "
                         f"token claims issuer {iss!r}: a key is trusted for its own issuer "
                         "only", kid, iss)
    return None


@dataclass(frozen=True)
class _JWS:
    header: dict[str, Any]
    claims: dict[str, Any]
    signing_input: bytes
    signature: bytes


def _parse_jws(token: str) -> _JWS:
    """Split a JWS compact serialization once (header, claims, signing input, signature)."""
    parts = token.split(".")
    if len(parts) != 3:
        raise ValueError("a JWS compact serialization has three parts")
    try:
        header, claims = json.loads(b64url_decode(parts[0])), json.loads(b64url_decode(parts[1]))
        signature = b64url_decode(parts[2])
    except (ValueError, TypeError, RecursionError) as exc:
        raise ValueError(str(exc) or type(exc).__name__) from None
    if not isinstance(header, dict) or not isinstance(claims, dict):
        raise ValueError("header and claims must be JSON objects")
    return _JWS(header, claims, f"{parts[0]}.{parts[1]}".encode("ascii"), signature)


_ES256 = ECAlgorithm(ECAlgorithm.SHA256)


def _verifies(key: TrustedKey, token: _JWS) -> bool:
    """Does ``key`` verify the token's ES256 signature?  A key whose JWK does not load (only
    a key event forged behind the append path can hold one) verifies nothing."""
    try:
        public_key = key.public_key
    except Exception:  # noqa: BLE001 - any unusable stored JWK
        return False
    return _ES256.verify(token.signing_input, public_key, token.signature)


def _judge_with_later_keys(token: _JWS, store: TrustStore, seq: int, t: int, row: Binding,
                           kid: str | None, iss: str | None) -> AttestationCheck:
    later = [k for k in store.keys if k.issuer == iss and k.kid == kid and k.since_seq >= seq]
    if later:
        res = _judge(token, later, None, t, row, kid, iss)
        if res.disposition == "verified":
            return AttestationCheck("verified", "attestation_valid_later_key",
                                    "verified with a key trusted after this row", kid, iss,
                                    res.thumbprint)
    return AttestationCheck("abstained", "unknown_issuer_key",
                            f"no key of issuer {iss!r} was trusted at this position", kid, iss)


def _judge(token: _JWS, candidates: list[TrustedKey], seq: int | None, t: int, row: Binding,
           kid: str | None, iss: str | None) -> AttestationCheck:
    header = token.header
    if header.get("alg") not in ALLOWED_ALGS:
        return _fail("attestation_alg_not_allowed", f"alg {header.get('alg')!r} is not ES256",
                     kid, iss)
    if header.get("typ") != ATTESTATION_TYP:
        return _fail("attestation_typ", f"typ {header.get('typ')!r} is not {ATTESTATION_TYP}",
                     kid, iss)
    if "crit" in header:
        return _fail("attestation_crit", "crit header parameters are not supported", kid, iss)
    active = [k for k in candidates if seq is None or k.active_at(seq)]
    if not active:
        why = "is retired or revoked" if candidates else "names no trusted key"
        return _fail("attestation_unknown_kid", f"kid {kid!r} {why} at this position", kid, iss)
    key = next((k for k in active if _verifies(k, token)), None)
    if key is None:
        return _fail("attestation_signature_invalid",
                     f"signature does not verify with any key named {kid!r}", kid, iss)
    claims = token.claims
    missing = [c for c in REQUIRED_CLAIMS if c not in claims]
    if missing:
        return _fail("attestation_claims_missing", f"required claims missing: {missing}",
                     kid, iss)
    if key.compromised_since_us is not None and t >= key.compromised_since_us:
        return _fail("attestation_key_compromised",
                     "signed by a key revoked as compromised before this row was recorded",
                     kid, iss)
    bad = claims_problem(claims, t, row)
    if bad:
        return _fail(bad[0], bad[1], kid, iss)
    return AttestationCheck("verified", "attestation_valid", "signature and binding verified",
                            kid, iss, key.thumbprint, claims["iat"], claims["exp"],
                            claims.get("nbf"))


def row_judge(store: TrustStore) -> AttestationJudge:
    """The audit's attestation judge over ``store``: ``judge(token, row, envelope, query)``
    -> (disposition, code, message), the token judged as of the row's seq and recorded
    time against the row's envelope fields.  Used by ``ledger audit`` and by the offline
    export verifier alike."""
    def judge(token: str, row: AuditedRow, env: dict[str, Any] | None, query: str | None,
              ) -> tuple[str, str, str]:
        env = env or {}
        r = check_attestation(token, store=store, seq=row.seq, recorded_at_us=row.recorded_at,
                              proof_ref=env.get("proof_ref"), query=query,
                              admission=env.get("admission"), engine=env.get("engine"))
        return r.disposition, r.code, r.message
    return judge
