"""A sandboxed re-execution worker: ``python -m ledger.ops.reexec_worker --memory-mb N``.

Runs re-executors' ``execute`` on plans it reads from stdin, one JSON object a line
(``{"id", "reexecutor", "plan"}``), and answers on stdout one line each
(``{"id", "result", "preimage", "engine_seconds"}`` or
``{"id", "error", "reason", "message"}``).  Its address space is limited
(``RLIMIT_AS``) before it reads anything, so an input that allocates without bound
ends in ``MemoryError`` (reason ``memory_limit``; so does any other error raised once the
address space came within 10 % of the limit) or in the worker's death; the job
kills a worker that runs past the per-entry time limit and starts another
(docs/reverify.md).  Nothing of the ledger's database is open here.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

from ledger.core.reexec import GROUP, MEMORY_LIMIT, RAISED, Plan, Reexecutor


def load_reexecutors() -> dict[str, Reexecutor]:
    """The installed re-executors (entry-point group ``ledger.reexecutors``), by name; a
    plugin that does not load is left out (its engines are then not re-executable)."""
    from importlib.metadata import entry_points

    out: dict[str, Reexecutor] = {}
    for ep in entry_points(group=GROUP):
        try:
            obj = ep.load()()
        except Exception:  # noqa: BLE001 -- a broken plugin must not stop the job
            continue
        out[str(getattr(obj, "name", ep.name))] = obj
    return out


_LIMIT = {"bytes": 0}  # the address-space limit set by _limit_memory (0: none)


def _limit_memory(mb: int) -> None:
    if mb <= 0:
        return
    import resource

    limit = mb * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    _LIMIT["bytes"] = limit


def _peak_address_space() -> int:
    """The worker's peak address space in bytes (Linux ``VmPeak``); 0 when unknown."""
    try:
        with open("/proc/self/status", "rb") as f:
            for line in f:
                if line.startswith(b"VmPeak:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0


def _hit_memory_limit() -> bool:
    """Whether the worker's address space came within 10 % of its limit.  A C extension
    whose allocation fails under the limit often reports it as another error (CPython's
    ``SystemError: error return without exception set``), not ``MemoryError``; an error
    raised that close to the limit is counted as the limit's."""
    limit = _LIMIT["bytes"]
    return limit > 0 and _peak_address_space() >= limit * 0.9


def _answer(msg: dict[str, Any], plugins: dict[str, Reexecutor]) -> dict[str, Any]:
    rid = msg.get("id")
    plugin = plugins.get(msg.get("reexecutor", ""))
    if plugin is None:
        return {"id": rid, "error": "LookupError", "reason": RAISED,
                "message": f"no re-executor {msg.get('reexecutor')!r} in this worker"}
    p = msg["plan"]
    plan = Plan(p["engine"], p["call"], p["inputs"], p.get("source", {}))
    try:
        t0 = time.perf_counter()
        fresh = plugin.execute(plan)
        took = time.perf_counter() - t0
        # the answer is built here, so a result JSON cannot carry fails here too
        return {"id": rid, "result": fresh.result, "preimage": fresh.preimage,
                "engine_seconds": took}
    except MemoryError:
        return {"id": rid, "error": "MemoryError", "reason": MEMORY_LIMIT,
                "message": "the engine ran out of its memory limit"}
    except RecursionError as exc:
        return {"id": rid, "error": "RecursionError", "reason": RAISED, "message": str(exc)}
    except Exception as exc:  # noqa: BLE001 -- any engine failure is the entry's outcome
        reason = MEMORY_LIMIT if _hit_memory_limit() else RAISED
        return {"id": rid, "error": type(exc).__name__, "reason": reason,
                "message": str(exc)[:500]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="reexec_worker")
    ap.add_argument("--memory-mb", type=int, default=0)
    args = ap.parse_args(argv)
    plugins = load_reexecutors()
    _limit_memory(args.memory_mb)
    for plugin in plugins.values():
        prepare = getattr(plugin, "prepare", None)
        if callable(prepare):
            try:  # imports the engines before any plan's time limit runs
                prepare()
            except Exception:  # noqa: BLE001 -- execute reports what is wrong
                pass
    out = sys.stdout
    print(json.dumps({"ready": sorted(plugins)}), file=out, flush=True)
    for line in sys.stdin:
        if not line.strip():
            continue
        ans = _answer(json.loads(line), plugins)
        try:
            text = json.dumps(ans)
        except (TypeError, ValueError) as exc:
            text = json.dumps({"id": ans.get("id"), "error": type(exc).__name__,
                               "reason": RAISED, "message": "the result is not JSON"})
        except MemoryError:
            text = json.dumps({"id": ans.get("id"), "error": "MemoryError",
                               "reason": MEMORY_LIMIT, "message": "out of memory"})
        print(text, file=out, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
