"""Time as a parameter: production uses SystemClock, tests FixedClock."""

from __future__ import annotations

import time
from typing import Protocol

from ledger.core.timestamp import format_us, parse_rfc3339

__all__ = ["Clock", "FixedClock", "SystemClock", "format_us", "parse_rfc3339"]


class Clock(Protocol):
    def now_us(self) -> int:
        """Microseconds since the Unix epoch, UTC."""
        ...


class SystemClock:
    def now_us(self) -> int:
        return time.time_ns() // 1000


class FixedClock:
    """A clock that returns a set time and advances only when told to."""

    def __init__(self, now_us: int, step_us: int = 0) -> None:
        self._now = now_us
        self._step = step_us

    def now_us(self) -> int:
        t = self._now
        self._now += self._step
        return t

    def advance(self, us: int) -> None:
        self._now += us
