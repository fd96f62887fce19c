"""JWTs signed with the ledger key (access tokens for the HTTP service, receipts), and the
key sets tokens are verified against (the ledger's JWKS, or an external issuer's).

The signing key is the newest *active* Ed25519 key of the keyring
(``ledger.crypto.keys``) named after the ledger origin; its RFC 7638
thumbprint is the JWT ``kid``.  Every key of the keyring named after the
origin (active or retired) is published as the JWKS, so a token or receipt
signed before a rotation still verifies.

Access token (RFC 9068 style, header ``typ: at+jwt``, ``alg: EdDSA``)::

    {"iss": <issuer, default the origin>, "aud": <audience, default the origin>,
     "sub": <subject: the producer identity recorded on appended entries>,
     "role": "producer" | "auditor" | "developer" | "agent" | "custodian",
     "iat": <s>, "nbf": <s>, "exp": <s>, "jti": <random hex>}
"""

from __future__ import annotations

import json
import os
import re
import secrets
import threading
import time
from collections.abc import Callable
from typing import Any

from ledger.crypto.tokens import JwtSigner, KeySet, ledger_signer
from ledger.errors import UsageError

__all__ = ["ACCESS_TOKEN_TYP", "RECEIPT_TYP", "ROLES", "JwksSource", "JwtSigner", "KeySet",
           "access_token_claims", "check_role", "check_subject", "ledger_signer",
           "mint_access_token", "parse_ttl"]

ACCESS_TOKEN_TYP = "at+jwt"
RECEIPT_TYP = "ledger-receipt+jwt"
ROLES = ("producer", "auditor", "developer", "agent", "custodian", "operator")
MAX_SUBJECT = 256  # the producer column's width
MAX_TTL_S = 366 * 86_400
MAX_JWKS_BYTES = 1024 * 1024
_TTL_RE = re.compile(r"(\d{1,9})([smhd]?)")
_UNIT_S = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86_400}


def parse_ttl(text: str) -> int:
    """``3600``, ``90s``, ``30m``, ``12h``, ``7d`` -> seconds (1 s .. 366 d).  Raises UsageError."""
    m = _TTL_RE.fullmatch(text.strip()) if isinstance(text, str) else None
    seconds = int(m.group(1)) * _UNIT_S[m.group(2)] if m else 0
    if not 0 < seconds <= MAX_TTL_S:
        raise UsageError(f"ttl must be 1s..366d (e.g. 3600, 30m, 12h, 7d), not {text!r}",
                         code="bad_ttl", field="ttl")
    return seconds


def check_subject(subject: Any) -> str:
    """A subject is 1..256 characters of valid text.  Raises UsageError."""
    ok = isinstance(subject, str) and 0 < len(subject) <= MAX_SUBJECT
    if ok:
        try:
            subject.encode("utf-8")
        except UnicodeEncodeError:
            ok = False
    if not ok:
        raise UsageError(f"subject must be 1..{MAX_SUBJECT} characters of valid text",
                         code="bad_subject", field="subject")
    return subject


def check_role(role: Any) -> str:
    if role not in ROLES:
        raise UsageError(f"role must be one of {', '.join(ROLES)}", code="bad_role",
                         field="role")
    return role


def access_token_claims(*, role: str, subject: str, ttl_s: int, issuer: str, audience: str,
                        now_s: int, jti: str | None = None) -> dict[str, Any]:
    """The claims of an access token.  Raises UsageError for a bad role/subject/ttl."""
    check_role(role)
    check_subject(subject)
    if not 0 < ttl_s <= MAX_TTL_S:
        raise UsageError("ttl must be 1s..366d", code="bad_ttl", field="ttl")
    return {"iss": issuer, "aud": audience, "sub": subject, "role": role,
            "iat": now_s, "nbf": now_s, "exp": now_s + ttl_s,
            "jti": jti or secrets.token_hex(16)}


def mint_access_token(signer: JwtSigner, *, role: str, subject: str, ttl_s: int, issuer: str,
                      audience: str, now_s: int) -> str:
    """An EdDSA access token signed by the ledger key (self-hosted set-ups)."""
    claims = access_token_claims(role=role, subject=subject, ttl_s=ttl_s, issuer=issuer,
                                 audience=audience, now_s=now_s)
    return signer.sign_jwt(claims, ACCESS_TOKEN_TYP)


class JwksSource:
    """Where trusted keys come from: fixed, a file (re-read on change), or a URL."""

    REFETCH_S = 30.0
    MAX_AGE_S = 300.0

    def __init__(self, *, fixed: dict[str, Any] | None = None, location: str | None = None,
                 fetch: Callable[[str], bytes] | None = None) -> None:
        self.location = location
        self._fetch = fetch or _http_get
        self._lock = threading.Lock()
        self._stamp: Any = None
        self._fetched_at = 0.0
        self.keyset = KeySet(fixed) if fixed is not None else KeySet({"keys": []})
        if location is not None:
            self.refresh(force=True)

    @property
    def is_url(self) -> bool:
        return bool(self.location) and self.location.startswith(("http://", "https://"))

    def stale(self, kid: Any) -> bool:
        """Whether a (blocking) refresh is due before verifying a token with ``kid``."""
        if self.location is None:
            return False
        age = time.monotonic() - self._fetched_at
        if not self.is_url:
            return age > 1.0  # cheap stat, at most once a second
        return age > self.MAX_AGE_S or (not self.keyset.knows(kid) and age > self.REFETCH_S)

    def refresh(self, force: bool = False) -> None:
        """Reload the keys.  Raises UsageError on the first load only; later failures keep
        the keys already known (an issuer outage must not lock everybody out at once)."""
        assert self.location is not None
        with self._lock:
            try:
                if self.is_url:
                    data = self._fetch(self.location)
                else:
                    st = os.stat(self.location)
                    stamp = (st.st_mtime_ns, st.st_size)
                    self._fetched_at = time.monotonic()
                    if stamp == self._stamp and not force:
                        return
                    with open(self.location, "rb") as fh:
                        data = fh.read(MAX_JWKS_BYTES + 1)
                    self._stamp = stamp
                if len(data) > MAX_JWKS_BYTES:
                    raise UsageError("JWKS larger than 1 MiB", code="bad_jwks", field="jwks")
                try:
                    doc = json.loads(data)
                except ValueError as exc:
                    raise UsageError("the JWKS is not JSON", code="bad_jwks",
                                     field="jwks") from exc
                self.keyset = KeySet(doc)
            except (OSError, UsageError) as exc:
                if force:
                    if isinstance(exc, UsageError):
                        raise
                    raise UsageError(f"cannot read JWKS {self.location}: {exc}",
                                     code="bad_jwks", field="jwks") from exc
            finally:
                self._fetched_at = time.monotonic()


def _http_get(url: str) -> bytes:
    """GET a JWKS (5 s timeout, at most 1 MiB + 1 byte read, redirects refused).
    Raises OSError."""
    import urllib.error
    import urllib.request

    class _NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args: Any, **kwargs: Any) -> None:
            return None

    opener = urllib.request.build_opener(_NoRedirect)
    req = urllib.request.Request(url, headers={"Accept": "application/json"})
    try:
        with opener.open(req, timeout=5.0) as resp:
            return resp.read(MAX_JWKS_BYTES + 1)
    except (urllib.error.URLError, ValueError) as exc:
        raise OSError(f"JWKS fetch failed: {exc}") from exc
