"""The schedule of ``ledger serve --checkpoint-every``: a time or an entry count."""

from __future__ import annotations

import re
from dataclasses import dataclass

from ledger.errors import UsageError

_EVERY = re.compile(r"^(\d+(?:\.\d+)?)(s|m|h|e|entries)$")


@dataclass(frozen=True)
class Schedule:
    """Checkpoint after ``seconds`` (0: never by time) or ``entries`` (0: never by count)."""

    seconds: float = 0.0
    entries: int = 0


def parse_every(text: str) -> Schedule:
    """``30s``, ``5m``, ``1h`` (time) or ``1000e`` / ``1000entries`` (count).  Raises
    UsageError."""
    m = _EVERY.match(text.strip())
    if not m or float(m.group(1)) <= 0:
        raise UsageError(f"--checkpoint-every {text!r}: give e.g. 30s, 5m or 1000e",
                         code="bad_schedule", field="checkpoint_every")
    value, unit = float(m.group(1)), m.group(2)
    if unit in ("e", "entries"):
        return Schedule(entries=int(value))
    return Schedule(seconds=value * {"s": 1, "m": 60, "h": 3600}[unit])


_DURATION = re.compile(r"^(\d+(?:\.\d+)?)(ms|s|m|h|d)$")


def parse_duration(text: str, field: str) -> float:
    """``500ms``, ``30s``, ``5m``, ``1h`` or ``1d`` as seconds (> 0).  Raises UsageError
    naming ``field``."""
    m = _DURATION.match(str(text).strip())
    if not m or float(m.group(1)) <= 0:
        raise UsageError(f"{field.replace('_', '-')} {text!r}: give a duration such as 30s, "
                         "5m, 1h or 1d", code="bad_duration", field=field)
    return float(m.group(1)) * {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400}[m.group(2)]


MIN_ON_DEMAND_INTERVAL_S = 1.0


def on_demand_interval(text: str) -> float:
    """The on-demand checkpoint interval (``ledger serve --checkpoint-on-demand-interval``)
    in seconds, at least :data:`MIN_ON_DEMAND_INTERVAL_S`: it bounds how many checkpoints
    proof requests can make.  Raises UsageError naming the setting."""
    name = "checkpoint_on_demand_interval"
    seconds = parse_duration(text, name)
    if seconds < MIN_ON_DEMAND_INTERVAL_S:
        raise UsageError(f"checkpoint-on-demand-interval {text!r}: at least "
                         f"{MIN_ON_DEMAND_INTERVAL_S:g}s (it bounds how many checkpoints "
                         "proof requests can make)", code="bad_duration", field=name)
    return seconds
