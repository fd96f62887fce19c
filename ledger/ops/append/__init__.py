"""Appending: validate outside the lock, link and insert inside one transaction.

``commit_batch`` takes the head lock once per call and commits once: either
every accepted item of the batch is in the ledger, or none is.  Rejected items
are reported per item and written to the quarantine table by the caller, in
their own transaction after the batch; they never enter the chain.

This package is the append family; this module is its face (what callers import).  Its
private modules, each importing only those before it: ``judge`` (the attestation judge)
<- ``prepare`` (receive, validate, seal) <- ``pool`` (validation on worker processes) and
``writer`` (link and insert under the lock); ``rejects`` (the quarantine: rejected
submissions kept for auditors); ``group`` (group commit: concurrent single appends of any
caller batched into one transaction; imports nothing of ``append/``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

from ledger.core.tenant import DEFAULT_TENANT, check_tenant
from ledger.ops.append.group import AppendMany, Finish, GroupCommit, Scope
from ledger.ops.append.group import Stats as GroupStats
from ledger.ops.append.judge import (
    AttestationJudge,
    Judgement,
    default_judge,
    judge_attestation,
    trust_judge,
)
from ledger.ops.append.pool import shutdown_pool, validate_batch
from ledger.ops.append.prepare import (
    AppendResult,
    Prepared,
    Received,
    check_producer,
    prepare_event,
    prepare_result,
    raw_bytes,
    validate_items,
)
from ledger.ops.append.rejects import QUARANTINE_MAX_RAW, quarantine
from ledger.ops.append.rejects import prune as prune_quarantine
from ledger.ops.append.rejects import status as quarantine_status
from ledger.ops.append.writer import (
    BatchWriter,
    commit_batch,
    commit_one_pg,
    commit_redaction,
    trust_recheck,
)
from ledger.ops.context import LedgerContext

__all__ = ["DEFAULT_TENANT", "QUARANTINE_MAX_RAW", "AppendMany", "AppendResult",
           "AttestationJudge", "BatchWriter", "Scope",
           "Finish", "GroupCommit", "GroupStats", "Judgement",
           "Prepared", "Received", "append_many", "check_producer", "commit_batch", "commit_one_pg",
           "commit_redaction", "default_judge", "judge_attestation", "prepare_event",
           "prepare_result", "prune_quarantine", "quarantine", "quarantine_status", "shutdown_pool",
           "validate_batch", "validate_items"]


# -- the use case ------------------------------------------------------------------
def append_many(ctx: LedgerContext, submissions: Sequence[Any], *, producer: str | None = None,
                judge: AttestationJudge | None = None, tenant: str = DEFAULT_TENANT,
                ) -> list[AppendResult]:
    """Append a batch under one lock and one commit; results in input order.

    Rejected items (contract, format, attestation, idempotency conflict) are
    quarantined and reported with ``ok=False``; they do not stop the others.  Once
    the batch has committed, every stored item is reported even when writing the
    quarantine fails (the quarantine is not part of the chain).
    """
    check_producer(producer)
    check_tenant(tenant)
    if judge is None:
        prepared, rejected = validate_batch(submissions, producer, ctx.ledger_id,
                                            trust_judge(ctx))
    else:
        prepared, rejected = validate_items(submissions, producer, ctx.ledger_id, judge)
    for p in prepared:
        p.tenant = tenant
    raws = {p.index: p.raw for p in prepared}
    bad = [(raw_bytes(submissions[r.index]), r.error) for r in rejected]
    results = list(rejected)
    committed: list[AppendResult] = []
    try:
        # one statement for a plain single append; an attested one needs its key
        # events read *after* the lock is taken (one statement sees one snapshot)
        if len(prepared) == 1 and prepared[0].idempotency_key is None and \
                prepared[0].sub is not None and prepared[0].sub.attestation is None and \
                ctx.engine.dialect.name == "postgresql":
            one = commit_one_pg(ctx.engine, ctx.ledger_id, ctx.clock, prepared[0],
                                ctx.tenant_quotas)
            committed = [one] if one is not None else []
        if prepared and not committed:
            committed = commit_batch(ctx.engine, ctx.ledger_id, ctx.clock, prepared,
                                     trust_recheck(ctx), ctx.tenant_quotas)
    finally:  # rejected items are quarantined even if the batch itself failed
        bad.extend((raws[r.index], r.error) for r in committed if not r.ok)
        if bad:
            # every rejected result carries its error (AppendResult(ok=False, error=...))
            quarantine(ctx, cast("list[tuple[bytes, dict[str, Any]]]", bad), producer)
    results.extend(committed)
    results.sort(key=lambda r: r.index)
    return results



