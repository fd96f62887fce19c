"""Re-verification rate against the engine alone, measured in the same run
(docs/performance.md, docs/reverify.md).

For each backend and each re-executable QWED engine (math, logic, sql, schema, code) the
real upstream engines produce ``N`` results (200 per engine at ``--scale 1``, inputs
varied), which are appended; then:

* **baseline**: the same upstream engine calls in this process, nothing of the ledger
  around them (entries/s of the engine alone, measured while producing);
* **ours**: ``ledger reverify --engine E`` on one worker and on two: entries/s over the
  report's ``timing`` (``select_s`` -- reading, checking, planning -- plus
  ``reexecute_s``); the workers' start (an interpreter and the engines' imports each,
  once per run) is printed below the table;
* **ledger share**: the part of the time per entry spent outside the engine call --
  reading, checking the entry against its hashes, planning, the pipe to the worker,
  comparing -- ``1 - sum(engine_seconds) / (workers * elapsed)``, where ``engine_seconds``
  is timed inside the worker around the re-executor's ``execute`` (target <= 10 % on one
  worker; on two, a worker waiting for the job counts against the ledger).
"""

from __future__ import annotations

import json
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.common import available, pg_url, print_table, sqlite_url
from ledger import Ledger
from ledger.ops.reverify import ReverifyOptions

ENGINES = ("math", "logic", "sql", "schema", "code")
DDL = "CREATE TABLE users (id INT, name TEXT, email TEXT)"
SCHEMA = {"type": "object", "properties": {"n": {"type": "integer", "minimum": 0},
                                           "name": {"type": "string"}},
          "required": ["n", "name"]}


def _producers() -> dict[str, Callable[[int], tuple[Any, str]]]:
    """engine -> ``i -> (upstream result, query)``: the upstream calls, inputs varied."""
    from qwed_new.core.code_verifier import CodeVerifier
    from qwed_new.core.logic_verifier import LogicVerifier
    from qwed_new.core.schema_verifier import SchemaVerifier
    from qwed_new.core.sql_verifier import SQLVerifier

    from ledger.integrations.qwed_reexec import _math_route

    def math(i: int) -> tuple[Any, str]:  # the /verify/math route's identity decision
        q = f"(x + {i + 1})**2 = x**2 + {2 * (i + 1)}*x + {(i + 1) ** 2}"
        return _math_route(q), q

    def logic(i: int) -> tuple[Any, str]:
        cons = [f"x > {i}", "y < 10", f"x + y == {i + 9}", f"x - y != {i % 7}"]
        return LogicVerifier().verify_logic({"x": "Int", "y": "Int"}, cons), ", ".join(cons)

    def sql(i: int) -> tuple[Any, str]:
        q = f"SELECT name, email FROM users WHERE id = {i} AND name <> 'u{i}'"
        return SQLVerifier().verify_sql(q, DDL), q

    def schema(i: int) -> tuple[Any, str]:
        return SchemaVerifier().verify({"n": i, "name": f"user {i}"}, SCHEMA), f"n = {i}"

    def code(i: int) -> tuple[Any, str]:
        q = f"def f_{i}(a, b):\n    c = a * {i} + b\n    return [c for _ in range(3)]\n"
        return CodeVerifier().verify_code(q), q

    return {"math": math, "logic": logic, "sql": sql, "schema": schema, "code": code}


def produce(n: int) -> tuple[list[dict[str, Any]], dict[str, float]]:
    """``n`` submissions per engine and the engine-alone rate (entries/s) of each."""
    from ledger.integrations.qwed import EvidenceRecorder, submission

    subs: list[dict[str, Any]] = []
    alone: dict[str, float] = {}
    for eng, fn in _producers().items():
        fn(10_000)  # imports and first-call set-up are not the engine's rate
        recorder = EvidenceRecorder(max_items=2 * n + 16)
        made = []
        t0 = time.perf_counter()
        with recorder:
            for i in range(n):
                made.append(fn(i))
        alone[eng] = n / (time.perf_counter() - t0)
        subs += [submission(r, engine=eng, query=q, recorder=recorder) for r, q in made]
    return subs, alone


def reverify(url: str, eng: str, workers: int,
             ) -> tuple[float, float, float, float, float]:
    """(entries/s, ledger share, workers' start s, select ms/entry, engine ms/entry) of
    ``reverify --engine eng``.

    The rate is over the report's ``timing``: selecting (reading, checking, planning)
    plus re-executing; the workers' start (an interpreter and the engines' imports each,
    once per run) and stop are reported on their own."""
    with Ledger.open(url) as led:
        rep = led.reverify(ReverifyOptions(engines=(eng,), workers=workers))
    n = rep["summary"]["entries"]
    assert n > 0 and rep["summary"]["agrees"] == n, json.dumps(
        [o for o in rep["outcomes"] if o["outcome"] != "agrees"][:3])
    t = rep["timing"]
    dt = t["select_s"] + t["reexecute_s"]
    engine = sum(o.get("engine_seconds", 0.0) for o in rep["outcomes"])
    return (n / dt, max(0.0, 1.0 - engine / (workers * dt)), t["workers_start_s"],
            1000 * t["select_s"] / n, 1000 * engine / n)


def run(backends: list[str], scale: float = 1.0) -> list[list[Any]]:
    n = max(int(200 * scale), 5)
    subs, alone = produce(n)
    rows: list[list[Any]] = []
    starts: dict[int, list[float]] = {1: [], 2: []}
    with tempfile.TemporaryDirectory() as tmpdir:
        for kind in available(backends):
            ctx = sqlite_url(Path(tmpdir)) if kind == "sqlite" else pg_url()
            with ctx as url:
                with Ledger.init(url, origin="bench.example/reverify") as led:
                    res = led.append_many(subs)
                assert all(r.ok for r in res), [r.error for r in res if not r.ok][:3]
                for eng in ENGINES:
                    for w in (1, 2):
                        ours, share, st, sel_ms, eng_ms = reverify(url, eng, w)
                        starts[w].append(st)
                        rows.append([kind, eng, w, ours, alone[eng], ours / alone[eng],
                                     f"{eng_ms:.2f}", f"{sel_ms:.2f}",
                                     f"{100 * share:.1f} %", "<= 10 %" if w == 1 else "-"])
    print_table(f"reverify, {n:,} results per engine (entries/s; ratio = ours / the engine "
                "alone in-process)",
                ["backend", "engine", "workers", "ours", "engine alone", "ratio",
                 "engine ms", "select ms", "ledger share", "target"], rows)
    print("workers' start (an interpreter and the engines' imports), once per run, not in "
          "the rates: median " + ", ".join(
              f"{w} worker{'s' if w > 1 else ''} {sorted(s)[len(s) // 2]:.2f} s"
              for w, s in starts.items() if s))
    return rows
