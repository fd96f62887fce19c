"""Recorded, resumable runs (docs/reverify.md#recorded-resumable-runs): the run's row in
``audit_runs`` and its recorded options, resuming an interrupted run, and the
``reverify_run`` entry a complete run may append."""

from __future__ import annotations

import json
from typing import Any

from ledger.core.canonical import MAX_SAFE_INTEGER, canonical_json
from ledger.core.reverify_run import run_document
from ledger.errors import CanonicalizationError, UsageError
from ledger.ops.append import commit_batch, prepare_event
from ledger.ops.audit import tenant_hash_before
from ledger.ops.context import LedgerContext
from ledger.ops.read import hash_before
from ledger.ops.reverify.options import ReverifyOptions
from ledger.store import audit_runs as runs
from ledger.store.db import connect, transaction

JOB = "reverify"
# the recorded options a resumed run must be given unchanged: (field, the CLI option)
RECORDED = (("start", "--from"), ("end", "--to"), ("seqs", "--seq"), ("engines", "--engine"),
            ("since_us", "--since"), ("until_us", "--until"), ("time_limit_s", "--time-limit"),
            ("memory_mb", "--memory-limit"), ("hash_seed", "hash_seed"),
            ("tenant", "--tenant"))


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
    or ``/2`` document: the report without its outcomes, plus their digest; docs/format.md
    section 10.4) and return its seq.  ``report`` must not carry ``recorded_seq`` yet.  The run of
    one tenant's entries (``report["tenant"]``) is recorded in that tenant's chain, its
    ``ledger-reverify-run/2`` document bound to the tenant's last entry below its end."""
    tenant = report.get("tenant")
    end = report["range"]["end"]
    head_hash = hash_before(ctx, end) if tenant is None \
        else tenant_hash_before(ctx, tenant, end)
    ev = prepare_event("reverify_run", {"outcome": report["outcome"], "producer": producer},
                       "report", run_document(report, head_hash))
    if tenant is not None:
        ev.tenant = tenant
    res = commit_batch(ctx.engine, ctx.meta.ledger_id, ctx.clock, [ev])
    return int(res[0].seq)  # type: ignore[arg-type]
