"""The re-execution sandbox with real worker processes (QWED's math engine): plans queued in
a worker's pipe behind the one it runs are each answered once; when the running plan hits
its time limit, the plans queued behind it are sent again to the replacement, never
charged; a plan too big to wait in a pipe is not queued (no blocked write)."""

from __future__ import annotations

from typing import Any

import pytest

from ledger.core.reexec import TIME_LIMIT
from ledger.ops.sandbox import QUEUED_MAX_BYTES, Sandbox

pytestmark = pytest.mark.slow  # worker processes import SymPy
pytest.importorskip("qwed_new")


def plan(expression: str) -> dict[str, Any]:
    return {"reexecutor": "qwed", "plan": {"engine": "math", "call": "route",
                                           "inputs": {"expression": expression},
                                           "source": {"expression": "query"}}}


def test_queued_plans_are_each_answered_once_in_one_or_two_workers() -> None:
    jobs = [(i, plan(f"(x + {i})**2 = x**2 + {2 * i}*x + {i * i}")) for i in range(1, 13)]
    for workers in (1, 2):
        with Sandbox(workers=workers, time_limit_s=60) as box:
            got = {key: answer for key, answer, _ in box.run(iter(jobs))}
            assert box.restarts == 0
        assert sorted(got) == [i for i, _ in jobs]
        assert all(a["result"]["status"] == "VERIFIED" for a in got.values()), got


def test_a_plan_past_its_limit_costs_only_itself() -> None:
    jobs = [("slow", plan("(x+y+z+w)**30 = 0")), ("a", plan("(x + 1)**2 = x**2 + 2*x + 1")),
            ("b", plan("x + x = 2*x"))]
    with Sandbox(workers=1, time_limit_s=2.0) as box:
        got = {key: (answer, took) for key, answer, took in box.run(jobs)}
        assert box.restarts == 1
    assert got["slow"][0]["reason"] == TIME_LIMIT and 2.0 <= got["slow"][1] < 5.0
    for key in ("a", "b"):  # queued behind it: sent again to the new worker
        assert got[key][0]["result"]["status"] == "VERIFIED", got[key]


def test_a_plan_bigger_than_a_pipe_is_not_queued() -> None:
    big = plan("x + x = 2*x" + " " * (2 * QUEUED_MAX_BYTES))
    jobs = [(0, plan("x + x = 2*x")), (1, big), (2, big), (3, plan("x * 1 = x"))]
    with Sandbox(workers=1, time_limit_s=60) as box:
        got = {key: answer for key, answer, _ in box.run(jobs)}
    assert sorted(got) == [0, 1, 2, 3]
    assert all("result" in a or "error" in a for a in got.values())
