"""Operational bounds (not part of the format): the quarantine's size, the tenants' entry
quotas, and what one
``ledger serve`` process allows slow and many clients (``ConnectionGuard``: the request
head and body timeouts and the connection cap, enforced by ``ledger.api.limits``).

``QuarantineLimits``: at most ``max_rows`` quarantine rows in all and ``max_per_producer``
rows of one producer (no producer counts as one producer).  Defaults: 10,000 and 1,000;
the environment variables ``LEDGER_QUARANTINE_MAX_ROWS`` and
``LEDGER_QUARANTINE_MAX_PER_PRODUCER`` change the defaults of every ledger opened in the
process; ``Ledger.open(..., quarantine=QuarantineLimits(...))`` sets them for one ledger.

``TenantQuotas``: the most entries a tenant's chain may hold for a producer's result to be
appended to it (docs/tenants.md, "Quotas").  Set by the operator: the environment variable
``LEDGER_TENANT_QUOTAS`` (``acme=100000,globex=5000``) for every ledger opened in the process
(``ledger serve``, ``ledger append``), or ``Ledger.open(..., quotas=TenantQuotas({...}))``.
A tenant without a quota has none.
"""

from __future__ import annotations

import os
import resource
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field

from ledger.core.tenant import is_tenant
from ledger.errors import UsageError

DEFAULT_MAX_ROWS = 10_000
DEFAULT_MAX_PER_PRODUCER = 1_000
ENV_MAX_ROWS = "LEDGER_QUARANTINE_MAX_ROWS"
ENV_MAX_PER_PRODUCER = "LEDGER_QUARANTINE_MAX_PER_PRODUCER"


@dataclass(frozen=True)
class QuarantineLimits:
    """How many quarantine rows are kept, in all and per producer (each at least 0; 0
    keeps nothing and only counts).  Raises UsageError for a negative or non-integer bound."""

    max_rows: int = DEFAULT_MAX_ROWS
    max_per_producer: int = DEFAULT_MAX_PER_PRODUCER

    def __post_init__(self) -> None:
        for name, value in asdict(self).items():
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise UsageError(f"quarantine {name} must be an integer of at least 0",
                                 field=f"quarantine_{name}")

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> QuarantineLimits:
        """The defaults, changed by ``LEDGER_QUARANTINE_MAX_ROWS`` /
        ``LEDGER_QUARANTINE_MAX_PER_PRODUCER``.  Raises UsageError for a bad value."""
        env = os.environ if environ is None else environ
        values: dict[str, int] = {}
        for name, var in (("max_rows", ENV_MAX_ROWS),
                          ("max_per_producer", ENV_MAX_PER_PRODUCER)):
            text = env.get(var)
            if text:
                try:
                    values[name] = int(text)
                except ValueError:
                    raise UsageError(f"{var} must be an integer", field=var) from None
        return cls(**values)


ENV_TENANT_QUOTAS = "LEDGER_TENANT_QUOTAS"


@dataclass(frozen=True)
class TenantQuotas:
    """tenant -> the most entries its chain may hold for a producer's result entry to be
    appended (custody, audit and re-verification entries are never refused, and count).
    Raises UsageError for a bad tenant id or a bound that is not an integer >= 0."""

    limits: Mapping[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for tenant, limit in self.limits.items():
            if not is_tenant(tenant):
                raise UsageError(f"{tenant!r} in {ENV_TENANT_QUOTAS} is not a tenant id (1..63 "
                                 "characters of a-z, 0-9, '.', '_', '-', starting with a "
                                 "letter or a digit)", field=ENV_TENANT_QUOTAS)
            if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
                raise UsageError(f"the quota of tenant {tenant!r} must be an integer of at "
                                 "least 0", field=ENV_TENANT_QUOTAS)

    def of(self, tenant: str) -> int | None:
        """The quota of ``tenant``; None: it has none."""
        return self.limits.get(tenant)

    @classmethod
    def parse(cls, text: str) -> TenantQuotas:
        """``tenant=N`` pairs separated by commas (blank: no quota)."""
        limits: dict[str, int] = {}
        for part in (p.strip() for p in text.split(",")):
            if not part:
                continue
            tenant, sep, value = part.partition("=")
            tenant = tenant.strip()
            if not sep or tenant in limits:
                raise UsageError(f"{ENV_TENANT_QUOTAS} is tenant=N pairs separated by commas,"
                                 " each tenant once", field=ENV_TENANT_QUOTAS)
            try:
                limits[tenant] = int(value.strip())
            except ValueError:
                raise UsageError(f"the quota of tenant {tenant!r} in {ENV_TENANT_QUOTAS} must "
                                 "be an integer", field=ENV_TENANT_QUOTAS) from None
        return cls(limits)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> TenantQuotas:
        env = os.environ if environ is None else environ
        return cls.parse(env.get(ENV_TENANT_QUOTAS, ""))


# -- the HTTP service's connections -------------------------------------------------------
DEFAULT_HEAD_TIMEOUT_S = 10.0
DEFAULT_BODY_TIMEOUT_S = 30.0
ACCEPT_BACKLOG = 128   # connections the kernel queues (and asyncio accepts in one go)
RESERVED_FDS = ACCEPT_BACKLOG + 64  # the backlog, database connections, files, the loop
MIN_CONNECTIONS = 16


@dataclass(frozen=True)
class ConnectionGuard:
    """Per-process bounds on connections (``ledger serve --head-timeout --body-timeout
    --max-connections``): seconds to receive a request head, seconds to receive a body
    once its head is in, connections kept open at once."""

    head_timeout_s: float = DEFAULT_HEAD_TIMEOUT_S
    body_timeout_s: float = DEFAULT_BODY_TIMEOUT_S
    max_connections: int = 0  # 0: derived from the descriptor limit

    def connection_cap(self) -> int:
        """``max_connections``, or the soft RLIMIT_NOFILE less ``RESERVED_FDS``."""
        return self.max_connections or descriptor_cap()


def descriptor_cap(soft_limit: int | None = None) -> int:
    """Connections a process may hold so that accepting one never hits its descriptor
    limit: the soft RLIMIT_NOFILE less ``RESERVED_FDS`` (database connections, files, the
    accept backlog), at least ``MIN_CONNECTIONS``."""
    if soft_limit is None:
        soft_limit = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
        if soft_limit == resource.RLIM_INFINITY:
            soft_limit = 1 << 20
    return max(MIN_CONNECTIONS, soft_limit - RESERVED_FDS)
