"""Bearer-token authentication and the role policy of every route.

A token is accepted only if all of these hold (anything else is 401):

- at most 8 KiB; header ``alg`` is ``EdDSA`` or ``ES256`` (pinned: never ``none``,
  never HMAC, never RSA) and matches the key type (Ed25519 / P-256); no ``crit``;
- ``typ`` is ``at+jwt`` (self-hosted tokens; an external issuer may also use ``JWT``
  or no ``typ``) — so a ledger *receipt* can never be used as an access token;
- the signature verifies with a key of the trusted JWKS (``kid`` picks the key;
  it is only a hint: a token is accepted only if that key's signature verifies);
- ``iss`` and ``aud`` equal the configured issuer and audience; ``exp``, ``iat``
  and ``sub`` present; ``exp``/``nbf`` honoured with a small leeway;
- the role claim is one of producer, auditor, developer, agent, custodian, operator
  (else 403);
- the ``tenant`` claim, when present, is a tenant id (``ledger.core.tenant``) and the role
  is not operator (else 401: a malformed scope is never read as "no scope").

A token with a tenant is scoped to it: it appends to that tenant's chain, every entries
read answers from that tenant's entries only, and custody (redact, hold, holds) reaches its
tenant's entries only (an entry of another tenant is answered exactly as a missing one).
Actions that cannot be scoped yet refuse it with one 403 ``tenant_scope``
(:data:`TENANT_ACTIONS`, :func:`operator_level`).  A token without a
tenant is operator-level: what every token meant before tenants (docs/http.md, "Tenants").

The trusted JWKS is the ledger keyring's (tokens minted by ``ledger token issue``)
or, instead, an external issuer's JWKS (a file, re-read when it changes, or an
``http(s)`` URL, cached and re-fetched at most every 30 s for an unknown ``kid``).
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from fastapi import Depends, Request
from fastapi.security import HTTPBearer

from ledger.crypto.jwks import JwksSource
from ledger.crypto.tokens import Rejection, decode_with_keys, unverified_header
from ledger.errors import Forbidden, Unauthenticated, UsageError
from ledger.ops.tokens import (
    ACCESS_TOKEN_TYP,
    ROLES,
    TENANT_CLAIM,
    check_subject,
    check_token_tenant,
)

ALGORITHMS = ("EdDSA", "ES256")
MAX_TOKEN_CHARS = 8192
LAYER = {"auditor": 3, "developer": 2, "agent": 1}  # disclosure layer of each reading role
# custodian: no reading layer; it redacts and holds (routes_custody)
# operator: no reading layer; it scrapes /metrics (routes_ops)

# Who may do what.  Every route names one action; tests check every cell.
POLICY: dict[str, frozenset[str]] = {
    "append": frozenset({"producer", "auditor"}),
    "read": frozenset({"auditor", "developer", "agent"}),
    "checkpoint": frozenset({"auditor", "developer", "agent"}),
    "export": frozenset({"auditor", "developer", "agent"}),
    "schema": frozenset(ROLES),
    "redact": frozenset({"custodian"}),
    "hold": frozenset({"custodian"}),
    "holds": frozenset({"custodian", "auditor"}),
    "audits": frozenset({"auditor"}),  # recorded audit runs and their findings
    # recorded re-verification runs, projected for the reader's layer
    "reverify_runs": frozenset({"auditor", "developer", "agent"}),
    "metrics": frozenset({"operator"}),  # GET /metrics (routes_ops); operator reads nothing else
}
# The actions a token with a tenant may use: each answers from (or writes to) its tenant
# only.  Every other action spans the whole ledger and refuses it (``operator_level``).
# redact / hold / holds: its tenant's entries and holds only (ledger.ops.custody).
# audits / reverify_runs: only the runs recorded for its tenant (``ledger audit|reverify
# --tenant T --record``; routes_history).
TENANT_ACTIONS = frozenset({"append", "read", "checkpoint", "export", "schema",
                            "redact", "hold", "holds", "audits", "reverify_runs"})
TENANT_SCOPE_CODE = "tenant_scope"


@dataclass(frozen=True)
class Principal:
    """The verified caller."""

    role: str
    subject: str
    claims: dict[str, Any] = field(default_factory=dict, compare=False)
    tenant: str | None = None  # None: operator-level (every tenant)

    @property
    def layer(self) -> int:
        """Disclosure layer (1 agent, 2 developer, 3 auditor); 0 for a producer."""
        return LAYER.get(self.role, 0)


class TokenVerifier:
    """Verifies bearer tokens; caches verified tokens for at most 60 s (and never past exp)."""

    CACHE_S = 60.0
    CACHE_SIZE = 4096

    def __init__(self, source: JwksSource, *, issuer: str, audience: str,
                 typs: Iterable[str | None] = (ACCESS_TOKEN_TYP,), role_claim: str = "role",
                 leeway_s: int = 30) -> None:
        self.source = source
        self.issuer = issuer
        self.audience = audience
        self.typs = {t.lower() if t else None for t in typs}
        self.role_claim = role_claim
        self.leeway_s = leeway_s
        self._cache: dict[str, tuple[Principal, Any]] = {}

    def header_kid(self, token: str) -> Any:
        header = unverified_header(token)
        return header.get("kid") if header is not None else None

    def cached(self, token: str) -> Principal | None:
        """The principal of a token verified less than 60 s ago (and not expired since)."""
        hit = self._cache.get(token)
        return hit[0] if hit is not None and hit[1] > time.time() else None

    def verify(self, token: str) -> Principal:
        """The principal of a valid token.  Raises Unauthenticated or Forbidden."""
        hit = self.cached(token)
        if hit is not None:
            return hit
        now = time.time()
        principal, exp = self._verify(token)
        if len(self._cache) >= self.CACHE_SIZE:
            self._cache.clear()
        self._cache[token] = (principal, min(now + self.CACHE_S, exp))
        return principal

    def _verify(self, token: str) -> tuple[Principal, Any]:
        if len(token) > MAX_TOKEN_CHARS:
            raise Unauthenticated("token too long", code="invalid_token")
        header = unverified_header(token)
        if header is None:
            raise Unauthenticated("malformed token", code="invalid_token")
        alg = header.get("alg")
        if alg not in ALGORITHMS:
            raise Unauthenticated(f"token algorithm must be one of {', '.join(ALGORITHMS)}",
                                  code="invalid_token")
        if "crit" in header:
            raise Unauthenticated("token has critical header parameters", code="invalid_token")
        typ = header.get("typ")
        if typ is not None and not isinstance(typ, str):
            raise Unauthenticated("token type must be text", code="invalid_token")
        typ = typ.lower().removeprefix("application/") if typ is not None else None
        if typ not in self.typs:
            raise Unauthenticated("token type is not an access token", code="invalid_token")
        keys = self.source.keyset.candidates(header.get("kid"), alg)
        if not keys:
            raise Unauthenticated("token signed by an unknown key", code="invalid_token")
        claims = self._decode(token, alg, keys)
        role = claims.get(self.role_claim)
        try:
            subject = check_subject(claims.get("sub"))
        except UsageError:
            raise Unauthenticated("token subject must be 1..256 characters",
                                  code="invalid_token") from None
        if role not in ROLES:
            raise Forbidden(f"token role must be one of {', '.join(ROLES)}")
        try:
            # present, the claim must be a tenant id (null included): never "no tenant"
            tenant = check_token_tenant(claims[TENANT_CLAIM], role) \
                if TENANT_CLAIM in claims else None
            if TENANT_CLAIM in claims and tenant is None:
                raise UsageError("must be a tenant id", field="tenant")
        except UsageError as exc:
            raise Unauthenticated(f"token tenant claim: {exc.message}",
                                  code="invalid_token") from None
        return Principal(role, subject, claims, tenant), int(claims["exp"]) + self.leeway_s

    def _decode(self, token: str, alg: str, keys: list[Any]) -> dict[str, Any]:
        got = decode_with_keys(token, keys, alg, audience=self.audience, issuer=self.issuer,
                               leeway_s=self.leeway_s,
                               require=["exp", "iat", "iss", "aud", "sub"])
        if isinstance(got, Rejection):
            code = "token_expired" if got.code == "token_expired" else "invalid_token"
            raise Unauthenticated(got.message, code=code)
        return got


bearer_scheme = HTTPBearer(auto_error=False, description="JWT access token (see docs/http.md)")


async def authenticate(request: Request) -> Principal:
    """The verified principal of this request.  Raises Unauthenticated / Forbidden."""
    header = request.headers.get("authorization")
    if not header:
        raise Unauthenticated("an Authorization: Bearer token is required",
                              code="missing_token")
    scheme, _, token = header.partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token:
        raise Unauthenticated("the Authorization header must be 'Bearer <token>'",
                              code="invalid_token")
    verifier: TokenVerifier = request.app.state.verifier
    hit = verifier.cached(token)
    if hit is not None:
        return hit
    if verifier.source.location is not None and \
            verifier.source.stale(verifier.header_kid(token)):
        from starlette.concurrency import run_in_threadpool

        await run_in_threadpool(verifier.source.refresh)
    return verifier.verify(token)


def operator_level(principal: Principal, what: str) -> None:
    """Refuse a token with a tenant for ``what``, something that spans every tenant (403
    ``tenant_scope``, the same body whatever the tenant and whatever the ledger holds)."""
    if principal.tenant is not None:
        raise Forbidden(f"{what} spans every tenant: it needs an operator-level token (one "
                        "without a tenant)", code=TENANT_SCOPE_CODE,
                        detail={"rule": "a token with a tenant reads and writes only its "
                                        "tenant's entries", "refused": what})


def require(action: str) -> Any:
    """A dependency that authenticates and checks ``POLICY[action]`` (and, for an action
    outside ``TENANT_ACTIONS``, that the token is operator-level)."""
    allowed = POLICY[action]

    async def dependency(request: Request, _: Any = Depends(bearer_scheme)) -> Principal:
        principal = await authenticate(request)
        request.state.principal = principal  # for the request log (ledger.api.logs)
        if principal.role not in allowed:
            raise Forbidden(f"role {principal.role!r} may not {action}",
                            detail={"role": principal.role, "action": action})
        if action not in TENANT_ACTIONS:
            operator_level(principal, f"the action {action!r}")
        return principal

    dependency.action = action  # type: ignore[attr-defined]
    return Depends(dependency)
