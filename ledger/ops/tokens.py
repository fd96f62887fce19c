"""JWTs signed with the ledger key (access tokens for the HTTP service, receipts): roles,
subjects, lifetimes and claims.  The key sets tokens are verified against (the ledger's
JWKS, or an external issuer's, from a file or a URL) are ``ledger.crypto.jwks``.

The signing key is the newest *active* Ed25519 key of the keyring
(``ledger.crypto.keys``) named after the ledger origin; its RFC 7638
thumbprint is the JWT ``kid``.  Every key of the keyring named after the
origin (active or retired) is published as the JWKS, so a token or receipt
signed before a rotation still verifies.

Access token (RFC 9068 style, header ``typ: at+jwt``, ``alg: EdDSA``)::

    {"iss": <issuer, default the origin>, "aud": <audience, default the origin>,
     "sub": <subject: the producer identity recorded on appended entries>,
     "role": "producer" | "auditor" | "developer" | "agent" | "custodian",
     "tenant": <tenant id>,   (optional)
     "iat": <s>, "nbf": <s>, "exp": <s>, "jti": <random hex>}

``tenant`` (optional; ``ledger.core.tenant.check_tenant``) scopes the token to one tenant:
it appends to that tenant's chain and reads only that tenant's entries (docs/http.md,
"Tenants").  A token without it is operator-level, as every token minted before tenants
existed: it appends to the ``default`` tenant and reads every tenant.  An ``operator``
token never carries one.
"""

from __future__ import annotations

import re
import secrets
from typing import Any, cast

from ledger.core.tenant import DEFAULT_TENANT, check_tenant
from ledger.crypto.tokens import JwtSigner
from ledger.errors import TenantError, UsageError

__all__ = ["ACCESS_TOKEN_TYP", "RECEIPT_TYP", "ROLES", "TENANT_CLAIM", "access_token_claims",
           "check_role", "check_subject", "check_token_tenant", "mint_access_token",
           "parse_ttl"]

ACCESS_TOKEN_TYP = "at+jwt"
RECEIPT_TYP = "ledger-receipt+jwt"
ROLES = ("producer", "auditor", "developer", "agent", "custodian", "operator")
TENANT_CLAIM = "tenant"  # the claim that scopes a token to one tenant (absent: operator-level)
MAX_SUBJECT = 256  # the producer column's width
MAX_TTL_S = 366 * 86_400
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
    return cast(str, subject)  # ok implies isinstance(subject, str), which mypy cannot follow


def check_role(role: Any) -> str:
    if role not in ROLES:
        raise UsageError(f"role must be one of {', '.join(ROLES)}", code="bad_role",
                         field="role")
    return cast(str, role)  # one of ROLES


def check_token_tenant(tenant: Any, role: str) -> str | None:
    """The tenant a token of ``role`` may carry: None, or a valid tenant id other than
    ``default`` for any role but ``operator`` (its only route, ``/metrics``, spans every
    tenant).  ``default`` is refused: its chain holds the operator's own entries (custody
    orders over every tenant's entries, whole-ledger audit and re-verification runs), so a
    token scoped to it would read what spans every tenant (docs/tenants.md).  Raises
    TenantError (field ``tenant``)."""
    if tenant is None:
        return None
    check_tenant(tenant)
    if tenant == DEFAULT_TENANT:
        raise TenantError("the default tenant's chain is the operator's: a token for it is "
                          "operator-level (one without a tenant)", field="tenant")
    if role == "operator":
        raise TenantError("an operator token is operator-level: it cannot carry a tenant",
                          field="tenant")
    return cast(str, tenant)


def access_token_claims(*, role: str, subject: str, ttl_s: int, issuer: str, audience: str,
                        now_s: int, jti: str | None = None, tenant: str | None = None,
                        ) -> dict[str, Any]:
    """The claims of an access token (``tenant``: scoped to that tenant; None:
    operator-level).  Raises UsageError for a bad role/subject/ttl/tenant."""
    check_role(role)
    check_subject(subject)
    check_token_tenant(tenant, role)
    if not 0 < ttl_s <= MAX_TTL_S:
        raise UsageError("ttl must be 1s..366d", code="bad_ttl", field="ttl")
    claims: dict[str, Any] = {"iss": issuer, "aud": audience, "sub": subject, "role": role}
    if tenant is not None:
        claims[TENANT_CLAIM] = tenant
    claims.update(iat=now_s, nbf=now_s, exp=now_s + ttl_s, jti=jti or secrets.token_hex(16))
    return claims


def mint_access_token(signer: JwtSigner, *, role: str, subject: str, ttl_s: int, issuer: str,
                      audience: str, now_s: int, tenant: str | None = None) -> str:
    """An EdDSA access token signed by the ledger key (self-hosted set-ups); ``tenant``
    scopes it to one tenant."""
    claims = access_token_claims(role=role, subject=subject, ttl_s=ttl_s, issuer=issuer,
                                 audience=audience, now_s=now_s, tenant=tenant)
    return signer.sign_jwt(claims, ACCESS_TOKEN_TYP)
