"""Running the plans and comparing: the sandboxed workers' answers judged against the
stored results, a disagreement retried once where the re-executor offers a second plan,
and the counts of the outcomes."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ledger.core import reexec as rx
from ledger.ops.reverify.select import Selected, _base, _error
from ledger.ops.sandbox import Sandbox


def _judge(sel: Selected, plan: rx.Plan, answer: dict[str, Any], seconds: float,
           ) -> tuple[dict[str, Any], list[rx.Difference] | None]:
    """The outcome of one answer (and its differences: None on an engine error)."""
    entry, plugin = sel.entry, sel.plugin
    if "error" in answer:
        out = _error(entry, plugin, str(answer.get("reason", rx.RAISED)),
                     str(answer["error"]), str(answer.get("message", "")))
        out["inputs"], out["seconds"] = plan.source, round(seconds, 6)
        return out, None
    fresh = rx.Fresh(answer["result"], answer.get("preimage"))
    try:
        diffs = plugin.compare(entry, fresh)
    except Exception as exc:  # noqa: BLE001
        return _error(entry, plugin, rx.RAISED, type(exc).__name__, f"compare: {exc}"), None
    out = _base(entry, rx.DISAGREES if diffs else rx.AGREES, plugin)
    if diffs:
        out["differences"] = [d.to_dict() for d in diffs]
    out["inputs"], out["seconds"] = plan.source, round(seconds, 6)
    if isinstance(answer.get("engine_seconds"), (int, float)):
        out["engine_seconds"] = round(float(answer["engine_seconds"]), 6)
    return out, diffs


def _message(sel: Selected, plan: rx.Plan) -> dict[str, Any]:
    return {"reexecutor": sel.plugin.name,
            "plan": {"engine": plan.engine, "call": plan.call, "inputs": plan.inputs,
                     "source": plan.source}}


def reverify_entries(selected: list[Selected], sandbox: Sandbox,
                     on_outcome: Callable[[dict[str, Any]], None]) -> None:
    """Decide every entry of ``selected``: run the plans in ``sandbox``, retry a
    disagreement once where the re-executor offers a second plan, and pass each outcome
    to ``on_outcome`` (in the order they are decided)."""
    jobs = []
    for i, sel in enumerate(selected):
        if sel.outcome is not None:
            on_outcome(sel.outcome)
        else:
            assert sel.plan is not None
            jobs.append((i, _message(sel, sel.plan)))
    retries: list[tuple[int, rx.Plan, dict[str, Any]]] = []
    for i, answer, seconds in sandbox.run(jobs):
        sel = selected[i]
        assert sel.plan is not None
        out, diffs = _judge(sel, sel.plan, answer, seconds)
        second = None
        if diffs:
            retry = getattr(sel.plugin, "retry", None)
            second = retry(sel.entry, sel.plan, diffs) if retry is not None else None
        if second is not None:
            retries.append((i, second, out))
        else:
            on_outcome(out)
    if not retries:
        return
    first = {i: out for i, _, out in retries}
    plans = {i: plan for i, plan, _ in retries}
    for i, answer, seconds in sandbox.run((i, _message(selected[i], plans[i]))
                                          for i in plans):
        out, diffs = _judge(selected[i], plans[i], answer, seconds)
        on_outcome(out if out["outcome"] == rx.AGREES else first[i])


@dataclass
class Counts:
    by_outcome: dict[str, int] = field(default_factory=lambda: dict.fromkeys(rx.OUTCOMES, 0))
    by_engine: dict[str, dict[str, int]] = field(default_factory=dict)

    def add(self, out: dict[str, Any]) -> None:
        self.by_outcome[out["outcome"]] += 1
        eng = self.by_engine.setdefault(out["engine"], dict.fromkeys(rx.OUTCOMES, 0))
        eng[out["outcome"]] += 1

