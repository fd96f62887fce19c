"""The re-execution worker's classification of an engine's failure (ledger.ops.reexec_worker):
an error raised close to the worker's memory limit is the limit's, whatever its type."""

from __future__ import annotations

from typing import Any

import pytest

from ledger.core.reexec import MEMORY_LIMIT, RAISED
from ledger.ops import reexec_worker


class _Raises:
    name = "raises"

    def __init__(self, exc: BaseException) -> None:
        self.exc = exc

    def execute(self, plan: Any) -> Any:
        raise self.exc


def _msg() -> dict[str, Any]:
    return {"id": 7, "reexecutor": "raises",
            "plan": {"engine": "math", "call": "c", "inputs": {}}}


@pytest.fixture
def limit(monkeypatch: pytest.MonkeyPatch):
    """Sets the limit the worker compares its peak address space with (no real rlimit)."""
    def set_(nbytes: int) -> None:
        monkeypatch.setitem(reexec_worker._LIMIT, "bytes", nbytes)
    return set_


def test_a_system_error_at_the_limit_is_memory_limit(limit) -> None:
    peak = reexec_worker._peak_address_space()
    assert peak > 0  # Linux: VmPeak is read
    limit(peak)  # the peak has reached the limit
    plugins = {"raises": _Raises(SystemError("error return without exception set"))}
    ans = reexec_worker._answer(_msg(), plugins)
    assert ans["reason"] == MEMORY_LIMIT and ans["error"] == "SystemError"


def test_an_error_far_from_the_limit_is_raised(limit) -> None:
    limit(reexec_worker._peak_address_space() * 4)
    ans = reexec_worker._answer(_msg(), {"raises": _Raises(ValueError("bad"))})
    assert ans["reason"] == RAISED and ans["error"] == "ValueError"


def test_without_a_limit_an_error_is_raised(limit) -> None:
    limit(0)
    ans = reexec_worker._answer(_msg(), {"raises": _Raises(SystemError("x"))})
    assert ans["reason"] == RAISED


def test_memory_error_is_memory_limit(limit) -> None:
    limit(0)
    ans = reexec_worker._answer(_msg(), {"raises": _Raises(MemoryError())})
    assert ans["reason"] == MEMORY_LIMIT
