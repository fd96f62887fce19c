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
from dataclasses import dataclass, field
from typing import Any

from ledger.clock import format_us
from ledger.core import reexec as rx
from ledger.core.canonical import MAX_SAFE_INTEGER, canonical_json
from ledger.core.entry import hash_hex
from ledger.core.readcheck import PAYLOAD_DIGEST_MISMATCH, check_entry
from ledger.core.reverify_run import REPORT_FORMAT, run_document
from ledger.errors import CanonicalizationError, UsageError
from ledger.ops.append import commit_batch, prepare_event
from ledger.ops.context import LedgerContext
from ledger.ops.redaction_map import load_redaction_map
from ledger.ops.reexec_worker import load_reexecutors
from ledger.ops.sandbox import Sandbox
from ledger.store import audit_runs as runs
from ledger.store import entries as repo
from ledger.store.db import connect, transaction

PAGE = 500
PAYLOADS = ("result", "preimage", "query", "meta")


@dataclass
class ReverifyOptions:
    start: int = 0
    end: int | None = None
    seqs: tuple[int, ...] = ()          # only these seqs (within the range)
    engines: tuple[str, ...] = ()       # only these engines
    since_us: int | None = None         # recorded_at >= since
    until_us: int | None = None         # recorded_at < until
    workers: int = 1
    time_limit_s: float = 10.0
    memory_mb: int = 2048
    hash_seed: int = 0
    reexecutors: dict[str, Any] | None = None  # name -> re-executor (None: entry points)
    resume: bool = False  # continue the latest interrupted run (same options)
    record: bool = False  # append a reverify_run entry when the run completes
    producer: str | None = None  # the identity recorded with it


@dataclass
class Selected:
    entry: rx.Stored
    outcome: dict[str, Any] | None = None  # decided without running anything
    plan: rx.Plan | None = None
    plugin: Any = None


def _text(b: bytes | None) -> str | None:
    if b is None:
        return None
    try:
        return b.decode("utf-8")
    except UnicodeDecodeError:
        return None


def stored_entry(row: Any, blobs: Any, ledger_id: str, redactions: Any,
                 ) -> tuple[rx.Stored, list[str]]:
    """The :class:`Stored` view of one result row and the integrity codes it failed."""
    checked = check_entry(row, blobs, ledger_id, redactions=redactions)
    texts = checked.texts
    meta = _text(texts.get("meta"))
    try:
        meta_doc = json.loads(meta) if meta is not None else None
    except ValueError:
        meta_doc = None
    unchecked = frozenset(p.field for p in checked.integrity.problems
                          if p.code == PAYLOAD_DIGEST_MISMATCH)
    v = checked.values
    entry = rx.Stored(seq=checked.seq, engine=str(v.get("engine") or ""),
                      status=v.get("status"), proof_ref=v.get("proof_ref"),
                      result=checked.document, preimage=_text(texts.get("preimage")),
                      query=_text(texts.get("query")), meta=meta_doc,
                      redacted=frozenset(checked.integrity.redacted), unchecked=unchecked)
    return entry, checked.integrity.codes


def _selected(row: Any, opts: ReverifyOptions) -> bool:
    if row.kind != "result":
        return False
    if opts.seqs and row.seq not in opts.seqs:
        return False
    if opts.engines and row.engine not in opts.engines:
        return False
    if opts.since_us is not None and row.recorded_at < opts.since_us:
        return False
    return not (opts.until_us is not None and row.recorded_at >= opts.until_us)


def _decide(entry: rx.Stored, codes: list[str], plugin: Any) -> Selected:
    if codes:
        return Selected(entry, _not(entry, rx.INTEGRITY, "the entry does not check against "
                                    f"its hashes ({', '.join(codes)}): see ledger audit",
                                    plugin))
    if plugin is None:
        return Selected(entry, _not(entry, rx.NO_REEXECUTOR,
                                    f"no installed re-executor handles engine "
                                    f"{entry.engine!r}", None))
    try:
        plan = plugin.plan(entry)
    except Exception as exc:  # noqa: BLE001 -- a plugin's failure is the entry's outcome
        return Selected(entry, _error(entry, plugin, rx.RAISED, type(exc).__name__,
                                      f"plan: {exc}"))
    if isinstance(plan, rx.NotReexecutable):
        return Selected(entry, _not(entry, plan.reason, plan.detail, plugin))
    return Selected(entry, None, plan, plugin)


class _Memo:
    """A re-executor whose ``version(engine)`` is asked once per run and engine (reading
    package metadata costs about a millisecond: more than some engines' whole run)."""

    def __init__(self, plugin: Any) -> None:
        self._plugin = plugin
        self._versions: dict[str, str] = {}

    def __getattr__(self, name: str) -> Any:
        return getattr(self._plugin, name)

    def version(self, engine: str) -> str:
        if engine not in self._versions:
            try:
                self._versions[engine] = str(self._plugin.version(engine))
            except Exception:  # noqa: BLE001 -- a plugin that cannot say still gets an outcome
                self._versions[engine] = "unknown"
        return self._versions[engine]


def _who(entry: rx.Stored, plugin: Any) -> dict[str, Any]:
    if plugin is None:
        return {"name": None, "engine": entry.engine, "version": None}
    return {"name": plugin.name, "engine": entry.engine, "version": plugin.version(entry.engine)}


def _base(entry: rx.Stored, outcome: str, plugin: Any) -> dict[str, Any]:
    return {"seq": entry.seq, "engine": entry.engine, "outcome": outcome,
            "reexecutor": _who(entry, plugin)}


def _not(entry: rx.Stored, reason: str, detail: str, plugin: Any) -> dict[str, Any]:
    return {**_base(entry, rx.NOT_REEXECUTABLE, plugin), "reason": reason, "detail": detail}


def _error(entry: rx.Stored, plugin: Any, reason: str, error: str, message: str,
           ) -> dict[str, Any]:
    return {**_base(entry, rx.ENGINE_ERROR, plugin), "reason": reason, "error": error,
            "detail": message}


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


# -- recorded, resumable runs (docs/reverify.md#recorded-resumable-runs) ----------------
JOB = "reverify"
# the recorded options a resumed run must be given unchanged: (field, the CLI option)
RECORDED = (("start", "--from"), ("end", "--to"), ("seqs", "--seq"), ("engines", "--engine"),
            ("since_us", "--since"), ("until_us", "--until"), ("time_limit_s", "--time-limit"),
            ("memory_mb", "--memory-limit"), ("hash_seed", "hash_seed"))


def _recorded(opts: ReverifyOptions) -> dict[str, Any]:
    out = {f: getattr(opts, f) for f, _ in RECORDED}
    out["seqs"], out["engines"] = list(opts.seqs), list(opts.engines)
    return out


def _new_run(ctx: LedgerContext, opts: ReverifyOptions, start: int, end: int) -> int:
    with transaction(ctx.engine) as conn:
        return runs.new_run(conn, ctx.clock.now_us(), start, end,
                            json.dumps({"options": _recorded(opts), "workers": opts.workers}),
                            json.dumps({"worker_restarts": 0}), job=JOB)


def _resume(ctx: LedgerContext, opts: ReverifyOptions,
            ) -> tuple[runs.RunRow, list[dict[str, Any]], int]:
    """The interrupted run to continue, its saved outcomes and worker restarts; refuses
    (UsageError naming the option) when ``opts`` differ from the recorded options."""
    with connect(ctx.engine) as conn:
        run = runs.latest_running_reverify(conn)
        if run is None:
            raise UsageError("--resume: no interrupted re-verification run to resume",
                             code="nothing_to_resume", field="resume")
        saved = [json.loads(o) for o in runs.reverify_outcome_rows(conn, run.id)]
    try:
        recorded = json.loads(run.options)["options"]
        restarts = int(json.loads(run.counts).get("worker_restarts", 0))
    except (ValueError, KeyError, TypeError, AttributeError):
        raise UsageError(f"--resume: re-verification run {run.id} has unreadable options; "
                         "start a new run", code="resume_state_invalid",
                         field="resume") from None
    given = _recorded(opts)
    for name, option in RECORDED:
        if recorded.get(name) != given[name]:
            raise UsageError(
                f"--resume: {option} differs from re-verification run {run.id}'s "
                f"({given[name]!r} given, {recorded.get(name)!r} recorded); give the "
                "run's options or start a new run without --resume",
                code="resume_options_differ", field=option.lstrip("-").replace("-", "_"))
    if not run.range_start <= run.next_seq <= run.range_end:
        raise UsageError(f"--resume: re-verification run {run.id}'s checkpoint is outside "
                         "its range; start a new run", code="resume_state_invalid",
                         field="resume")
    return run, saved, restarts


def _select_page(ctx: LedgerContext, opts: ReverifyOptions, pos: int, end: int,
                 by_engine: dict[str, Any], redactions: Any) -> tuple[list[Selected], int]:
    """The selected entries of the first page of ``[pos, end)``, each planned or decided,
    and the seq after the page."""
    with connect(ctx.engine) as conn:
        for page in repo.iter_entry_pages(conn, pos, end, PAGE):
            out = []
            for row, blobs in page:
                if _selected(row, opts):
                    entry, codes = stored_entry(row, blobs, ctx.meta.ledger_id, redactions)
                    out.append(_decide(entry, codes, by_engine.get(entry.engine)))
            return out, max(page.next_seq, pos + 1)
    return [], end


def run_reverify(ctx: LedgerContext, opts: ReverifyOptions,
                 progress: Callable[[int], None] | None = None,
                 total: Callable[[int], None] | None = None) -> dict[str, Any]:
    """Re-verify the selected entries and return the report (docs/reverify.md).

    The run is recorded in ``audit_runs`` (``job = 'reverify'``): page by page, the
    outcomes decided are committed with the run's checkpoint, so ``opts.resume``
    continues the latest interrupted run from there (the same options required).
    ``total`` is told once how many seqs this call walks; ``progress`` is advanced by the
    seqs passed (one per decided outcome, the unselected ones at the end of a page)."""
    if opts.workers < 1:
        raise UsageError("--workers must be at least 1", field="workers")
    if opts.time_limit_s <= 0:
        raise UsageError("--time-limit must be positive", field="time_limit")
    if opts.record:
        _check_recordable(opts)
    plugins = {name: _Memo(p) for name, p in (
        opts.reexecutors if opts.reexecutors is not None else load_reexecutors()).items()}
    by_engine: dict[str, Any] = {}
    for plugin in plugins.values():
        for eng in plugin.engines:
            by_engine.setdefault(eng, plugin)
    outcomes: list[dict[str, Any]] = []
    restarts = 0
    if opts.resume:
        run, outcomes, restarts = _resume(ctx, opts)
        run_id, start, end, pos = run.id, run.range_start, run.range_end, run.next_seq
        started = run.started_at
    else:
        started = ctx.clock.now_us()
        with connect(ctx.engine) as conn:
            h = repo.read_head(conn)
            max_seq = repo.max_seq(conn)
        size = max(h.size if h is not None else 0, 0 if max_seq is None else max_seq + 1)
        end = size if opts.end is None else min(opts.end, size)
        start = opts.start
        if start < 0 or start > end:
            raise UsageError(f"empty or invalid range [{start}, {end})", field="from")
        run_id, pos = _new_run(ctx, opts, start, end), start
    counts = Counts()
    for out in outcomes:
        counts.add(out)
    if total:
        total(end - pos)
    with connect(ctx.engine) as conn:
        redactions = load_redaction_map(conn)
    select_s = workers_start_s = 0.0
    t_run = time.perf_counter()

    def select(at: int) -> tuple[list[Selected], int]:
        return _select_page(ctx, opts, at, end, by_engine, redactions) if at < end \
            else ([], end)

    # The next page is read, checked and planned in a thread while the workers run this
    # one (only its outcomes wait for this page's commit): the job waits for it only when
    # it is not ready yet, and select_s is that wait.
    with Sandbox(workers=opts.workers, time_limit_s=opts.time_limit_s,
                 memory_mb=opts.memory_mb, hash_seed=opts.hash_seed) as sandbox, \
            ThreadPoolExecutor(max_workers=1, thread_name_prefix="reverify-plan") as ahead:
        upcoming = ahead.submit(select, pos)
        started_sandbox = False
        page: list[dict[str, Any]] = []

        def record(out: dict[str, Any]) -> None:
            counts.add(out)
            page.append(out)
            if progress:
                progress(1)

        while True:
            t0 = time.perf_counter()
            selected, nxt = upcoming.result()
            select_s += time.perf_counter() - t0
            if nxt < end:
                upcoming = ahead.submit(select, nxt)
            page.clear()
            if any(s.plan is not None for s in selected):
                if not started_sandbox:
                    t1 = time.perf_counter()
                    sandbox.start()
                    workers_start_s, started_sandbox = time.perf_counter() - t1, True
                reverify_entries(selected, sandbox, record)
            else:
                for s in selected:
                    assert s.outcome is not None
                    record(s.outcome)
            if progress and nxt - pos > len(page):
                progress(nxt - pos - len(page))
            page.sort(key=lambda o: o["seq"])
            outcomes += page
            saved = list(page)
            pos = nxt
            with transaction(ctx.engine) as conn:
                runs.save_reverify_page(
                    conn, run_id, [(o["seq"], json.dumps(o, sort_keys=True)) for o in saved],
                    next_seq=pos, state="complete" if pos >= end else "running",
                    counts=json.dumps({"worker_restarts": restarts + sandbox.restarts,
                                       "summary": counts.by_outcome}),
                    updated_at=ctx.clock.now_us())
            if pos >= end:
                break
        restarts += sandbox.restarts
        t3 = time.perf_counter()
    outcomes.sort(key=lambda o: o["seq"])
    versions = sorted({(o["reexecutor"]["name"], o["reexecutor"]["version"])
                       for o in outcomes if o["reexecutor"]["name"]})
    report = {
        "format": REPORT_FORMAT, "ledger_id": ctx.meta.ledger_id, "origin": ctx.meta.origin,
        "run_id": run_id, "resumed": opts.resume,
        "range": {"start": start, "end": end},
        "filters": {"seqs": list(opts.seqs), "engines": list(opts.engines),
                    "since_us": opts.since_us, "until_us": opts.until_us},
        "limits": {"time_limit_s": opts.time_limit_s, "memory_mb": opts.memory_mb,
                   "hash_seed": opts.hash_seed},
        "summary": {"entries": sum(counts.by_outcome.values()), **counts.by_outcome},
        "by_engine": counts.by_engine,
        "outcomes": outcomes,
        "reexecutors": [{"name": n, "version": v} for n, v in versions],
        "workers": opts.workers, "worker_restarts": restarts,
        "timing": {"select_s": round(select_s, 6), "workers_start_s": round(workers_start_s, 6),
                   "reexecute_s": round(max(0.0, t3 - t_run - select_s - workers_start_s), 6),
                   "stop_s": round(time.perf_counter() - t3, 6)},
        "started_at": format_us(started), "finished_at": format_us(ctx.clock.now_us()),
    }
    report["outcome"] = rx.run_outcome(counts.by_outcome)
    if opts.record:
        report["recorded_seq"] = record_run(ctx, report, opts.producer)
    return report


def _check_recordable(opts: ReverifyOptions) -> None:
    """Refuse, before anything runs, options the recorded document cannot hold (its
    canonical JSON has integers within ±(2**53-1) and valid Unicode only)."""
    for name, value in (("since", opts.since_us), ("until", opts.until_us)):
        if value is not None and abs(value) > MAX_SAFE_INTEGER:
            raise UsageError(f"--{name}: a recorded run's times must be within ±(2**53-1) "
                             "µs of the epoch (years 1685 to 2255)", field=name)
    for name, texts in (("engine", opts.engines), ("producer", (opts.producer or "",))):
        try:
            canonical_json(list(texts))
        except (CanonicalizationError, UnicodeEncodeError):
            raise UsageError(f"--{name}: not valid Unicode text (a recorded run's document "
                             "is UTF-8)", field=name) from None


def record_run(ctx: LedgerContext, report: dict[str, Any], producer: str | None) -> int:
    """Append a ``reverify_run`` entry for a complete ``report`` (its ``ledger-reverify-run/1``
    document: the report without its outcomes, plus their digest; docs/format.md section
    10.4) and return its seq.  ``report`` must not carry ``recorded_seq`` yet."""
    end = report["range"]["end"]
    head_hash = None
    if end:
        with connect(ctx.engine) as conn:
            h = repo.entry_hash_at(conn, end - 1)
            head_hash = hash_hex(h) if h is not None else None
    ev = prepare_event("reverify_run", {"outcome": report["outcome"], "producer": producer},
                       "report", run_document(report, head_hash))
    res = commit_batch(ctx.engine, ctx.meta.ledger_id, ctx.clock, [ev])
    return int(res[0].seq)  # type: ignore[arg-type]
