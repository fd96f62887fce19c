"""The re-verification job: re-execute the producing engine on each selected result's
stored inputs and compare the fresh result with the stored one (docs/reverify.md).

The job reads the selected entries in seq order, checks each against its hashes
(``core.readcheck``: a re-executor only ever sees payloads that match their
commitments), asks the installed re-executor of the entry's engine for a plan
(``core.reexec``), runs the plans in sandboxed worker processes (``ops.sandbox``) and
compares.  Every entry ends in one outcome: ``agrees``, ``disagrees`` (with the
field-level differences), ``not_reexecutable`` (with its reason) or ``engine_error``;
each names the re-executor and the engine version that produced it.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from ledger.clock import format_us
from ledger.core import reexec as rx
from ledger.core.reverify_run import REPORT_FORMAT
from ledger.core.tenant import check_tenant
from ledger.errors import UsageError
from ledger.ops.audit import require_entries
from ledger.ops.context import LedgerContext
from ledger.ops.redaction_map import load_redaction_map
from ledger.ops.reexec_worker import load_reexecutors
from ledger.ops.reverify.compare import Counts, reverify_entries
from ledger.ops.reverify.options import ReverifyOptions
from ledger.ops.reverify.resume import _check_recordable, _new_run, _resume, record_run
from ledger.ops.reverify.select import Selected, _Memo, _select_page
from ledger.ops.sandbox import Sandbox
from ledger.store import audit_runs as runs
from ledger.store import entries as repo
from ledger.store.db import connect, transaction


@dataclass
class _Run:
    """Where the run this call starts or continues stands: its id and range, the next seq
    to decide, when it started, the outcomes decided so far and the worker restarts."""

    run_id: int
    start: int
    end: int
    pos: int
    started: int
    outcomes: list[dict[str, Any]]
    restarts: int


@dataclass
class _Timing:
    """Where this call's time went (``perf_counter`` seconds), for the report's timing."""

    t_run: float
    select_s: float = 0.0
    workers_start_s: float = 0.0
    workers_started: bool = False
    t_stop: float = 0.0


def _check_options(opts: ReverifyOptions) -> None:
    if opts.workers < 1:
        raise UsageError("--workers must be at least 1", field="workers")
    if opts.time_limit_s <= 0:
        raise UsageError("--time-limit must be positive", field="time_limit")
    if opts.tenant is not None:
        check_tenant(opts.tenant)
    if opts.record:
        _check_recordable(opts)


def _by_engine(opts: ReverifyOptions) -> dict[str, Any]:
    """The re-executor of each engine (the first installed one that names it)."""
    plugins = {name: _Memo(p) for name, p in (
        opts.reexecutors if opts.reexecutors is not None else load_reexecutors()).items()}
    by_engine: dict[str, Any] = {}
    for plugin in plugins.values():
        for eng in plugin.engines:
            by_engine.setdefault(eng, plugin)
    return by_engine


def _open_run(ctx: LedgerContext, opts: ReverifyOptions) -> _Run:
    """The interrupted run ``opts.resume`` continues, or a new run over the range of
    ``opts`` (UsageError when that range is empty or invalid)."""
    if opts.resume:
        run, outcomes, restarts = _resume(ctx, opts)
        return _Run(run.id, run.range_start, run.range_end, run.next_seq, run.started_at,
                    outcomes, restarts)
    started = ctx.clock.now_us()
    with connect(ctx.engine) as conn:
        h = repo.read_head(conn)
        max_seq = repo.max_seq(conn)
    size = max(h.size if h is not None else 0, 0 if max_seq is None else max_seq + 1)
    end = size if opts.end is None else min(opts.end, size)
    start = opts.start
    if start < 0 or start > end:
        raise UsageError(f"empty or invalid range [{start}, {end})", field="from")
    return _Run(_new_run(ctx, opts, start, end), start, end, start, started, [], 0)


def _decide_page(selected: list[Selected], sandbox: Sandbox,
                 record: Callable[[dict[str, Any]], None], timing: _Timing) -> None:
    """Decide the entries of one page: in the sandbox (its workers started the first time
    a page has a plan) or, when nothing is planned, as selected."""
    if any(s.plan is not None for s in selected):
        if not timing.workers_started:
            t1 = time.perf_counter()
            sandbox.start()
            timing.workers_start_s, timing.workers_started = time.perf_counter() - t1, True
        reverify_entries(selected, sandbox, record)
    else:
        for s in selected:
            assert s.outcome is not None
            record(s.outcome)


def _save_page(ctx: LedgerContext, run: _Run, saved: list[dict[str, Any]], counts: Counts,
               restarts: int) -> None:
    """Commit a page's outcomes with the run's checkpoint (``run.pos``, the next seq)."""
    with transaction(ctx.engine) as conn:
        runs.save_reverify_page(
            conn, run.run_id, [(o["seq"], json.dumps(o, sort_keys=True)) for o in saved],
            next_seq=run.pos, state="complete" if run.pos >= run.end else "running",
            counts=json.dumps({"worker_restarts": restarts, "summary": counts.by_outcome}),
            updated_at=ctx.clock.now_us())


def _walk(ctx: LedgerContext, opts: ReverifyOptions, run: _Run, counts: Counts,
          select: Callable[[int], tuple[list[Selected], int]],
          progress: Callable[[int], None] | None) -> _Timing:
    """Decide the run's entries from ``run.pos`` to its end, page by page, each page's
    outcomes added to ``run`` and ``counts`` and committed before the next page's."""
    timing = _Timing(t_run=time.perf_counter())
    # The next page is read, checked and planned in a thread while the workers run this
    # one (only its outcomes wait for this page's commit): the job waits for it only when
    # it is not ready yet, and select_s is that wait.
    with Sandbox(workers=opts.workers, time_limit_s=opts.time_limit_s,
                 memory_mb=opts.memory_mb, hash_seed=opts.hash_seed) as sandbox, \
            ThreadPoolExecutor(max_workers=1, thread_name_prefix="reverify-plan") as ahead:
        upcoming = ahead.submit(select, run.pos)
        page: list[dict[str, Any]] = []

        def record(out: dict[str, Any]) -> None:
            counts.add(out)
            page.append(out)
            if progress:
                progress(1)

        while True:
            t0 = time.perf_counter()
            selected, nxt = upcoming.result()
            timing.select_s += time.perf_counter() - t0
            if nxt < run.end:
                upcoming = ahead.submit(select, nxt)
            page.clear()
            _decide_page(selected, sandbox, record, timing)
            if progress and nxt - run.pos > len(page):
                progress(nxt - run.pos - len(page))
            page.sort(key=lambda o: o["seq"])
            run.outcomes += page
            saved = list(page)
            run.pos = nxt
            _save_page(ctx, run, saved, counts, run.restarts + sandbox.restarts)
            if run.pos >= run.end:
                break
        run.restarts += sandbox.restarts
        timing.t_stop = time.perf_counter()
    return timing


def _report(ctx: LedgerContext, opts: ReverifyOptions, run: _Run, counts: Counts,
            timing: _Timing) -> dict[str, Any]:
    """The run's ``ledger-reverify-report/1`` document (without ``recorded_seq``)."""
    outcomes = run.outcomes
    outcomes.sort(key=lambda o: o["seq"])
    versions = sorted({(o["reexecutor"]["name"], o["reexecutor"]["version"])
                       for o in outcomes if o["reexecutor"]["name"]})
    select_s, workers_start_s = timing.select_s, timing.workers_start_s
    report = {
        "format": REPORT_FORMAT, "ledger_id": ctx.meta.ledger_id, "origin": ctx.meta.origin,
        "run_id": run.run_id, "resumed": opts.resume,
        "range": {"start": run.start, "end": run.end},
        "filters": {"seqs": list(opts.seqs), "engines": list(opts.engines),
                    "since_us": opts.since_us, "until_us": opts.until_us},
        "limits": {"time_limit_s": opts.time_limit_s, "memory_mb": opts.memory_mb,
                   "hash_seed": opts.hash_seed},
        "summary": {"entries": sum(counts.by_outcome.values()), **counts.by_outcome},
        "by_engine": counts.by_engine,
        "outcomes": outcomes,
        "reexecutors": [{"name": n, "version": v} for n, v in versions],
        "workers": opts.workers, "worker_restarts": run.restarts,
        "timing": {"select_s": round(select_s, 6), "workers_start_s": round(workers_start_s, 6),
                   "reexecute_s": round(max(0.0, timing.t_stop - timing.t_run - select_s
                                            - workers_start_s), 6),
                   "stop_s": round(time.perf_counter() - timing.t_stop, 6)},
        "started_at": format_us(run.started), "finished_at": format_us(ctx.clock.now_us()),
    }
    report["outcome"] = rx.run_outcome(counts.by_outcome)
    if opts.tenant is not None:  # only that tenant's entries (docs/reverify.md)
        report["tenant"] = opts.tenant
    return report


def run_reverify(ctx: LedgerContext, opts: ReverifyOptions,
                 progress: Callable[[int], None] | None = None,
                 total: Callable[[int], None] | None = None) -> dict[str, Any]:
    """Re-verify the selected entries and return the report (docs/reverify.md).

    The run is recorded in ``audit_runs`` (``job = 'reverify'``): page by page, the
    outcomes decided are committed with the run's checkpoint, so ``opts.resume``
    continues the latest interrupted run from there (the same options required).
    ``total`` is told once how many seqs this call walks; ``progress`` is advanced by the
    seqs passed (one per decided outcome, the unselected ones at the end of a page)."""
    _check_options(opts)
    if opts.record and opts.tenant is not None:
        require_entries(ctx, opts.tenant)  # before anything runs
    by_engine = _by_engine(opts)
    run = _open_run(ctx, opts)
    counts = Counts()
    for out in run.outcomes:
        counts.add(out)
    if total:
        total(run.end - run.pos)
    with connect(ctx.engine) as conn:
        redactions = load_redaction_map(conn)
    end = run.end

    def select(at: int) -> tuple[list[Selected], int]:
        return _select_page(ctx, opts, at, end, by_engine, redactions) if at < end \
            else ([], end)

    report = _report(ctx, opts, run, counts, _walk(ctx, opts, run, counts, select, progress))
    if opts.record:
        report["recorded_seq"] = record_run(ctx, report, opts.producer)
    return report
