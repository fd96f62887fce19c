"""RFC 3161 time-stamp tokens over checkpoints, with the ``rfc3161-client`` library.

What is time-stamped is the checkpoint *note text* (origin, size, root hash and any
extension lines; not the signature lines, so cosignatures can be added later): the
request carries ``SHA-256(text)`` as its message imprint, a random 64-bit nonce, and
asks for the TSA certificate.  A token is the DER ``TimeStampResp`` the TSA answered.

Verification (``verify_token``) checks the status, the CMS signature and the chain to
the configured TSA certificates (valid at the token's time), the signer certificate's
critical extendedKeyUsage timeStamping, the imprint, the nonce (when known) and the
policy OID (when configured).  Every failure is a TimestampError.

The token is kept as the TSA sent it.  Many TSAs (OpenSSL's ``ts -reply -chain`` among
them) put the certificates of the CMS SignedData in the order they were given, which is
valid BER but not the DER order of a SET OF; the library parses DER only.  So before
parsing, the SET OF fields of the SignedData (digest algorithms, certificates, CRLs,
signer infos) are put in DER order (:func:`der_set_order`): no signed byte changes (the
signature covers the signed attributes, not these sets), and the bytes stored, exported
and given to other verifiers stay the TSA's.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from cryptography import x509
from rfc3161_client import (
    HashAlgorithm,
    TimestampRequestBuilder,
    VerificationError,
    VerifierBuilder,
    decode_timestamp_response,
)
from rfc3161_client.tsp import PKIStatus

from ledger.errors import TimestampError, UsageError

REQUEST_TYPE = "application/timestamp-query"
RESPONSE_TYPE = "application/timestamp-reply"


@dataclass(frozen=True)
class TokenInfo:
    """What a token says: ``gen_time`` (UTC), its ``serial``, ``policy`` OID and ``nonce``."""

    gen_time: datetime
    serial: int
    policy: str
    nonce: int | None


@dataclass(frozen=True)
class TsaTrust:
    """Certificates trusted for tokens: self-signed ones are roots, others intermediates;
    ``policy``: the policy OID tokens must carry (None: any)."""

    roots: tuple[x509.Certificate, ...]
    intermediates: tuple[x509.Certificate, ...] = ()
    policy: str | None = None


def load_tsa_trust(path: str | os.PathLike[str], policy: str | None = None) -> TsaTrust:
    """Read a PEM bundle of TSA certificates.  Raises UsageError (unreadable, no cert,
    no self-signed root)."""
    try:
        certs = x509.load_pem_x509_certificates(Path(path).read_bytes())
    except (OSError, ValueError) as exc:
        raise UsageError(f"cannot read TSA certificates {path}: {exc}", code="bad_tsa_certs",
                         field="tsa_certs") from None
    roots = tuple(c for c in certs if c.issuer == c.subject)
    if not roots:
        raise UsageError(f"{path} holds no self-signed (root) certificate",
                         code="bad_tsa_certs", field="tsa_certs")
    if policy is not None:
        try:
            x509.ObjectIdentifier(policy)
        except ValueError:
            raise UsageError(f"{policy!r} is not an OID", code="bad_tsa_policy",
                             field="tsa_policy") from None
    return TsaTrust(roots, tuple(c for c in certs if c.issuer != c.subject), policy)


def make_request(message: bytes) -> tuple[bytes, int]:
    """(DER TimeStampReq over SHA-256(message) with a nonce and certReq, the nonce)."""
    req = (TimestampRequestBuilder().data(message).hash_algorithm(HashAlgorithm.SHA256)
           .nonce(nonce=True).cert_request(cert_request=True).build())
    return req.as_bytes(), int(req.nonce)  # type: ignore[arg-type]


def _tlv(data: bytes | bytearray, pos: int, end: int) -> tuple[int, int, int]:
    """(tag, content start, content end) of the DER element at ``pos``.  Raises ValueError
    (a high tag number, an indefinite or overlong length)."""
    if pos + 2 > end or data[pos] & 0x1F == 0x1F:
        raise ValueError("unsupported tag")
    first = data[pos + 1]
    if first < 0x80:
        start, length = pos + 2, first
    elif first == 0x80 or first - 0x80 > 8:
        raise ValueError("indefinite or overlong length")
    else:
        n = first - 0x80
        start, length = pos + 2 + n, int.from_bytes(data[pos + 2:pos + 2 + n], "big")
    if start + length > end:
        raise ValueError("element runs past its parent")
    return data[pos], start, start + length


def _children(data: bytes | bytearray, start: int, end: int) -> list[tuple[int, int, int]]:
    """(tag, offset, end) of each element inside ``[start, end)``."""
    out, pos = [], start
    while pos < end:
        tag, _, stop = _tlv(data, pos, end)
        out.append((tag, pos, stop))
        pos = stop
    return out


SET_TAGS = (0x31, 0xA0, 0xA1)  # SET; certificates [0] and crls [1] IMPLICIT SET OF


def der_set_order(token: bytes) -> bytes:
    """``token`` with the SET OF fields of its SignedData in DER order (elements sorted by
    their encodings; lengths do not change, so nothing else moves).  A token that is not
    laid out as a TimeStampResp with a SignedData is returned unchanged, for the parser
    to refuse."""
    out = bytearray(token)
    try:
        _, s, e = _tlv(out, 0, len(out))                  # TimeStampResp
        kids = _children(out, s, e)
        if len(kids) < 2:
            return token
        _, s, e = _tlv(out, kids[1][1], kids[1][2])       # timeStampToken: ContentInfo
        kids = _children(out, s, e)
        _, s, e = _tlv(out, kids[1][1], kids[1][2])       # content [0] EXPLICIT
        _, s, e = _tlv(out, s, e)                         # SignedData
        for tag, pos, stop in _children(out, s, e)[1:]:
            if tag in SET_TAGS:
                _, cs, ce = _tlv(out, pos, stop)
                parts = sorted(bytes(out[p:q]) for _, p, q in _children(out, cs, ce))
                out[cs:ce] = b"".join(parts)
    except (ValueError, IndexError):
        return token
    return bytes(out)


def read_token(token: bytes, message: bytes, nonce: int | None = None) -> TokenInfo:
    """Parse a token and check what needs no trust anchor: status granted, SHA-256 imprint
    of ``message``, ``nonce``.  Raises TimestampError."""
    try:
        resp = decode_timestamp_response(der_set_order(token))
    except Exception as exc:  # noqa: BLE001 - the library raises ValueError and others
        raise TimestampError(f"not an RFC 3161 TimeStampResp: {exc}") from None
    if resp.status not in (PKIStatus.GRANTED, PKIStatus.GRANTED_WITH_MODS):
        raise TimestampError(f"the TSA did not grant the request (status {resp.status})")
    info = resp.tst_info
    imprint = info.message_imprint
    if imprint.hash_algorithm.dotted_string != "2.16.840.1.101.3.4.2.1":
        raise TimestampError("the token's imprint is not SHA-256", code="timestamp_imprint")
    if imprint.message != hashlib.sha256(message).digest():
        raise TimestampError("the token is over other data (imprint mismatch)",
                             code="timestamp_imprint")
    if nonce is not None and info.nonce != nonce:
        raise TimestampError("the token's nonce is not the request's", code="timestamp_nonce")
    gen = info.gen_time
    gen = gen.replace(tzinfo=UTC) if gen.tzinfo is None else gen.astimezone(UTC)
    return TokenInfo(gen, int(info.serial_number), info.policy.dotted_string,
                     None if info.nonce is None else int(info.nonce))


def verify_token(token: bytes, message: bytes, trust: TsaTrust,
                 nonce: int | None = None) -> TokenInfo:
    """Everything of :func:`read_token` plus the signature, chain, EKU and policy.
    Raises TimestampError."""
    info = read_token(token, message, nonce)
    if trust.policy is not None and info.policy != trust.policy:
        raise TimestampError(f"the token's policy {info.policy} is not {trust.policy}",
                             code="timestamp_policy")
    verifier = VerifierBuilder(roots=list(trust.roots),
                               intermediates=list(trust.intermediates)).build()
    try:
        verifier.verify_message(decode_timestamp_response(der_set_order(token)), message)
    except (VerificationError, ValueError) as exc:
        raise TimestampError("the token does not verify against the TSA certificates: "
                             + str(exc)[:160],
                             code="timestamp_signature") from None
    return info
