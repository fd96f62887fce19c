"""Operational bounds (not part of the format): the quarantine's size, and what one
``ledger serve`` process allows slow and many clients (``ConnectionGuard``: the request
head and body timeouts and the connection cap, enforced by ``ledger.api.limits``).

``QuarantineLimits``: at most ``max_rows`` quarantine rows in all and ``max_per_producer``
rows of one producer (no producer counts as one producer).  Defaults: 10,000 and 1,000;
the environment variables ``LEDGER_QUARANTINE_MAX_ROWS`` and
``LEDGER_QUARANTINE_MAX_PER_PRODUCER`` change the defaults of every ledger opened in the
process; ``Ledger.open(..., quarantine=QuarantineLimits(...))`` sets them for one ledger.
"""

from __future__ import annotations

import os
import resource
from collections.abc import Mapping
from dataclasses import asdict, dataclass

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
