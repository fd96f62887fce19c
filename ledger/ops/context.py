"""The object every use case receives: one ledger's engine, identity, clock and caches.

``LedgerContext`` replaces the facade as the parameter of the use cases in
``ledger.ops``: a use case is a function ``f(ctx, ...)`` that returns data.  The
facade (``ledger.facade.Ledger``) owns one context and delegates to those
functions; nothing in ``ops`` imports the facade.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sqlalchemy import Engine

from ledger.clock import Clock, SystemClock
from ledger.crypto.keys import Keyring
from ledger.crypto.trust import TrustStore
from ledger.ops.limits import QuarantineLimits, TenantQuotas
from ledger.ops.trust_store import last_key_event_seq, load_trust_store
from ledger.ops.verified import RedactionCache
from ledger.store.entries import LedgerMeta

__all__ = ["Engine", "Keyring", "LedgerContext", "LedgerMeta", "QuarantineLimits",
           "TenantQuotas", "TrustCache", "TrustStore"]


@dataclass
class TrustCache:
    """The attestation trust store folded from key_event entries, kept between calls.

    ``get`` refolds only the key events appended since the last fold.
    """

    store: TrustStore | None = None

    def get(self, engine: Engine, refresh: bool = True) -> TrustStore:
        if self.store is None:
            self.store = load_trust_store(engine)
        elif refresh and last_key_event_seq(engine) > self.store.last_event_seq:
            self.store = load_trust_store(engine, self.store)
        return self.store


@dataclass
class LedgerContext:
    """One open ledger: its engine, its identity (``meta``), its clock and its caches."""

    engine: Engine
    meta: LedgerMeta
    clock: Clock = field(default_factory=SystemClock)
    trust: TrustCache = field(default_factory=TrustCache)
    quarantine_limits: QuarantineLimits = field(default_factory=QuarantineLimits.from_env)
    tenant_quotas: TenantQuotas = field(default_factory=TenantQuotas.from_env)
    reads: RedactionCache = field(default_factory=RedactionCache)

    @property
    def ledger_id(self) -> str:
        return self.meta.ledger_id

    @property
    def origin(self) -> str:
        return self.meta.origin

    def trust_store(self, refresh: bool = True) -> TrustStore:
        """The trust store as of the last key event (refolded when new events arrived)."""
        return self.trust.get(self.engine, refresh)

    def close(self) -> None:
        self.engine.dispose()
