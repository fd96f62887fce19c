"""Producer trust-store changes as ``key_event`` entries, and loading the store.

The trust store is never a mutable table: it is the fold of the key events in
the chain, so adding a key is itself recorded, hashed and checkpointed.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Engine

from ledger.crypto.trust import TrustStore, jwk_thumbprint, public_jwk
from ledger.errors import NotFound, UsageError
from ledger.ops.append import AppendResult, Prepared, check_producer, commit_batch, prepare_event
from ledger.ops.context import LedgerContext


def _event(action: str, issuer: str, kid: str, thumbprint: str | None, producer: str | None,
           doc: dict[str, Any]) -> Prepared:
    fields = {"action": action, "issuer": issuer, "kid": kid, "thumbprint": thumbprint,
              "producer": producer}
    return prepare_event("key_event", fields, "event",
                         {"action": action, "issuer": issuer, "kid": kid,
                          "thumbprint": thumbprint, **doc})


def trust_events(store: TrustStore, issuer: str, jwks: dict[str, Any], reason: str | None,
                 producer: str | None) -> list[Prepared]:
    """Key events trusting every key of ``jwks`` for ``issuer`` (already-active keys skipped).

    A key's kid is the JWK's ``kid``, else ``<issuer>#<RFC 7638 thumbprint>`` as upstream
    names configured keys.  Raises UsageError for a malformed JWKS.
    """
    if not issuer or not isinstance(issuer, str):
        raise UsageError("an issuer is required", field="issuer")
    keys = jwks.get("keys") if isinstance(jwks, dict) else None
    if not isinstance(keys, list) or not keys:
        raise UsageError("the JWKS has no keys (expected {\"keys\": [...]})", field="jwks")
    out = []
    for i, raw in enumerate(keys):
        try:
            jwk = public_jwk(raw)
            thumb = jwk_thumbprint(jwk)
        except Exception as exc:  # noqa: BLE001 - any malformed JWK is the user's input
            raise UsageError(f"keys[{i}]: not a usable P-256 public JWK ({exc})",
                             field="jwks") from None
        kid = jwk.pop("kid", None) or f"{issuer}#{thumb}"
        if any(k.issuer == issuer and k.kid == kid and k.thumbprint == thumb
               and k.until_seq is None for k in store.keys):
            continue
        out.append(_event("trust", issuer, kid, thumb, producer,
                          {"jwk": jwk, "reason": reason}))
    return out


def end_event(store: TrustStore, action: str, kid: str, reason: str | None,
              producer: str | None, compromised_since_us: int | None = None,
              thumbprint: str | None = None) -> Prepared:
    """A retire/revoke event for an active key.  Raises NotFound if none matches."""
    active = [k for k in store.keys if k.kid == kid and k.until_seq is None
              and thumbprint in (None, k.thumbprint)]
    if not active:
        raise NotFound(f"no active trusted key with kid {kid!r}", field="kid")
    issuer = active[0].issuer
    doc: dict[str, Any] = {"reason": reason}
    if action == "revoke":
        doc["compromised_since_us"] = compromised_since_us
    return _event(action, issuer, kid, thumbprint, producer, doc)


def append_events(engine: Engine, ledger_id: str, clock: Any,
                  events: list[Prepared]) -> list[AppendResult]:
    return commit_batch(engine, ledger_id, clock, events) if events else []


def trust_issuer(ctx: LedgerContext, issuer: str, jwks: dict[str, Any], *,
                 reason: str | None = None, producer: str | None = None) -> list[AppendResult]:
    """Append one ``trust`` key event per new key of ``jwks``."""
    check_producer(producer)
    events = trust_events(ctx.trust_store(), issuer, jwks, reason, producer)
    return append_events(ctx.engine, ctx.ledger_id, ctx.clock, events)


def end_key(ctx: LedgerContext, action: str, kid: str, *, reason: str | None = None,
            producer: str | None = None, compromised_since_us: int | None = None,
            thumbprint: str | None = None) -> list[AppendResult]:
    """Append a ``retire`` or ``revoke`` key event for an active key."""
    check_producer(producer)
    ev = end_event(ctx.trust_store(), action, kid, reason, producer, compromised_since_us,
                   thumbprint)
    return append_events(ctx.engine, ctx.ledger_id, ctx.clock, [ev])
