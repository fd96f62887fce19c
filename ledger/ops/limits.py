"""Operational bounds of a ledger (not part of the format): the quarantine's size.

``QuarantineLimits``: at most ``max_rows`` quarantine rows in all and ``max_per_producer``
rows of one producer (no producer counts as one producer).  Defaults: 10,000 and 1,000;
the environment variables ``LEDGER_QUARANTINE_MAX_ROWS`` and
``LEDGER_QUARANTINE_MAX_PER_PRODUCER`` change the defaults of every ledger opened in the
process; ``Ledger.open(..., quarantine=QuarantineLimits(...))`` sets them for one ledger.
"""

from __future__ import annotations

import os
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
