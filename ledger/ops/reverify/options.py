"""The options of a re-verification run (``ledger reverify``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass
class ReverifyOptions:
    start: int = 0
    end: int | None = None
    seqs: tuple[int, ...] = ()          # only these seqs (within the range)
    engines: tuple[str, ...] = ()       # only these engines
    since_us: int | None = None         # recorded_at >= since
    until_us: int | None = None         # recorded_at < until
    tenant: str | None = None           # only this tenant's entries (recorded in its chain)
    workers: int = 1
    time_limit_s: float = 10.0
    memory_mb: int = 2048
    hash_seed: int = 0
    reexecutors: dict[str, Any] | None = None  # name -> re-executor (None: entry points)
    resume: bool = False  # continue the latest interrupted run (same options)
    record: bool = False  # append a reverify_run entry when the run completes
    producer: str | None = None  # the identity recorded with it
