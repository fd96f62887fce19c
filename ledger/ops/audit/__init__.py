"""The re-verification job: stream a range of entries through the pure checks.

Constant memory (keyset pages of entries and their payloads), a range split
across worker processes, resumable progress in ``audit_runs``, ``since_last``
from the last recorded ``audit_run`` entry, and ``record`` to append the run's
summary to the chain itself.  See docs/audit.md.

This package is the audit family; this module is its face (``run_audit``,
``AuditOptions``).  Its private modules, each importing only those before it: ``tally``
(the running counts) <- ``runs`` (options, saved progress, resume, since-last, record)
<- ``parallel`` (splitting a range, joining the parts' gaps) <- ``walk`` (the walk of a
range, in one process or in parts); ``checkpoints`` and ``custody`` add the findings
of the auditor's checkpoints and of the custody entries.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from sqlalchemy import Connection

from ledger.clock import format_us
from ledger.core.audit import EXIT_CODES, Finding
from ledger.core.audit_report import REPORT_FORMAT, AuditRange, AuditReport, report_outcome
from ledger.core.finding import summary_line
from ledger.core.policy import Policy, load_policy
from ledger.crypto.keys import PublicKeyRef, load_public_keys
from ledger.errors import UsageError
from ledger.ops.audit.custody import add_custody_findings
from ledger.ops.audit.parallel import auto_workers, join_gaps, split
from ledger.ops.audit.runs import (
    AuditOptions,
    new_run,
    record_run,
    resume,
    save_aggregates,
    since_last,
)
from ledger.ops.audit.tally import Tally
from ledger.ops.audit.tenant import (
    audit_tenant,
    record_tenant_run,
    refuse_on_replica,
    require_entries,
    tenant_hash_before,
)
from ledger.ops.audit.walk import check_head, run_parts, run_whole
from ledger.ops.context import LedgerContext
from ledger.ops.trust_store import load_trust_store
from ledger.store import entries as repo
from ledger.store import standby
from ledger.store.db import connect

__all__ = ["EXIT_CODES", "REPORT_FORMAT", "AuditOptions", "AuditReport", "audit_tenant",
           "auto_workers", "join_gaps", "load_policy", "record_run", "record_tenant_run",
           "refuse_on_replica", "require_entries", "run_audit", "split", "summary_line",
           "tenant_hash_before"]



def _ledger_keys(paths: tuple[str, ...]) -> list[PublicKeyRef] | None:
    """The ledger public keys of ``--key`` (None: none given).  Raises KeyringError."""
    return [ref for p in paths for ref in load_public_keys(p)] if paths else None


def _range(conn: Connection, ctx: LedgerContext, opts: AuditOptions,
           ) -> tuple[bool, int, int, list[Finding], list[Finding]]:
    """Whether the database is a read-only replica, the range to walk, and the ledger-level
    findings of ``--since-last`` and of the head row."""
    # a hot standby takes no writes: the run is audited as it would be on the primary,
    # but not saved in audit_runs (so not resumable) and never recorded
    read_only = standby.is_standby(conn)
    if read_only and (opts.record or opts.resume):
        flag = "record" if opts.record else "resume"
        raise UsageError(f"--{flag} writes to the ledger, and this database is a "
                         "read-only replica (hot standby); run it against the primary",
                         code="read_only_replica", field=flag)
    h = repo.read_head(conn)
    max_seq = repo.max_seq(conn)
    # a deleted head row is a finding, and the entries that exist are still audited
    size = h.size if h is not None else (0 if max_seq is None else max_seq + 1)
    pre: list[Finding] = []
    start = opts.start
    if opts.since_last:
        start, pre = since_last(conn, ctx)
    end = min(opts.end, size) if opts.end is not None else max(
        size, 0 if max_seq is None else max_seq + 1)
    head_findings = check_head(conn, h) if opts.end is None else []
    return read_only, start, end, pre, head_findings


def _report(ctx: LedgerContext, opts: AuditOptions, tally: Tally, policy: Policy, start: int,
            end: int, workers: int, started: int, run_id: int | None,
            read_only: bool) -> AuditReport:
    """The report of a walked run (docs/audit.md), with the checkpoints' findings and its
    outcome; not yet recorded."""
    # (every finding of the walk, a row's or the ledger's, has a seq)
    findings = sorted(tally.findings, key=lambda f: f.seq or 0)
    abstentions = list(tally.abstentions)
    checkpoints: tuple[str, ...] | None = None
    anchors: tuple[dict[str, Any], ...] | None = None
    if opts.checkpoints:
        from ledger.ops.audit.checkpoints import check_checkpoints

        found, abstained = check_checkpoints(ctx, opts.checkpoints, opts.keys)
        findings += found
        abstentions += abstained
        checkpoints = tuple(opts.checkpoints)
        if opts.anchor_policy is not None:
            from ledger.ops.checkpoint import apply_anchor_policy

            found, judged = apply_anchor_policy(ctx, opts.checkpoints, opts.anchor_policy)
            findings += found
            anchors = tuple(judged)
        findings.sort(key=lambda f: (f.seq is None, f.seq or 0))
    summary = tally.row_counts()
    return AuditReport(
        ctx.meta.ledger_id, ctx.meta.origin, AuditRange(start, end), summary,
        tuple(findings), tuple(abstentions), policy.source, opts.check_attestations,
        workers, format_us(started), format_us(ctx.clock.now_us()), run_id,
        report_outcome(summary, tuple(findings), tuple(abstentions)),
        read_only_replica=read_only, checkpoints=checkpoints, anchors=anchors)


def run_audit(ctx: LedgerContext, opts: AuditOptions,
              progress: Callable[[int], None] | None = None) -> AuditReport:
    """Run an audit and return its report (see docs/audit.md for the format)."""
    policy = load_policy(opts.policy_path)
    started = ctx.clock.now_us()
    engine = ctx.engine
    with connect(engine) as conn:
        read_only, start, end, pre, head_findings = _range(conn, ctx, opts)
    if start < 0 or start > end:
        raise UsageError(f"empty or invalid range [{start}, {end})", field="from")
    store = load_trust_store(engine) if opts.check_attestations else None
    state: dict[str, Any]
    run_id: int | None
    tally, state, parts = Tally(), {}, None
    if opts.resume:
        opts, run_id, start, tally, state, parts = resume(engine, opts)
        end = opts.end if opts.end is not None else end
        policy = load_policy(opts.policy_path)
        store = load_trust_store(engine) if opts.check_attestations else None
    else:
        if opts.workers > 1 and end - start > opts.workers:
            parts = split(start, end, opts.workers)
        run_id = None if read_only else new_run(engine, ctx, opts, start, end, parts)
    if parts:
        tally = run_parts(engine, ctx.meta.ledger_id, run_id, parts, tally, opts, progress,
                          ctx.clock)
    else:
        run_whole(engine, ctx.meta.ledger_id, run_id, start, end, policy, store, tally,
                  progress, state, ctx.clock)
    if tally.agg is not None and run_id is not None:  # (an unrecorded run stores nothing)
        save_aggregates(engine, run_id, tally.agg)
    add_custody_findings(tally, engine, opts.start if not opts.since_last else start, end,
                         ctx.meta.ledger_id, _ledger_keys(opts.keys))
    tally.findings += [f.reported() for f in pre + head_findings]  # ledger-level, not rows
    report = _report(ctx, opts, tally, policy, opts.start if not opts.since_last else start,
                     end, len(parts) if parts else opts.workers, started, run_id, read_only)
    if opts.record:
        report = replace(report, recorded_seq=record_run(ctx, report, opts.producer))
    return report
