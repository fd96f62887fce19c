"""``ledger audit --tenant T``: one tenant's chain, and its place in the global tree.

The tenant's entries are read by the ``(tenant, seq)`` index (nothing of the other tenants
is read but the tree's leaves at the tenant's seqs) and walked as one chain from the tenant's
genesis with every per-entry check of the whole audit.  Then:

- each entry's leaf hash must be the stored tree's leaf at its seq (``tenant_not_in_tree``:
  the entry changed since the tree was built, or the tree was rewritten), for the seqs the
  stored tree covers;
- the latest stored checkpoint's ``tenants`` line must commit to the heads the entries give
  at its size (``tenant_heads_mismatch``), so the tenant's head is the one witnesses and
  timestamps cover;
- the tenant's ``tenant_heads`` row must equal its last entry (``tenant_head_mismatch``).

Recorded (``ledger audit --tenant T --record``, :func:`record_tenant_run`): the run is an
``audit_runs`` row of job ``tenant_audit`` (its options name the tenant; the whole-ledger
readers -- ``--resume``, ``--since-last``, the findings attached to reads, the monitor --
never take it for an audit of the ledger), with its findings, and an ``audit_run`` entry
in T's own chain whose ``ledger-audit-run/3`` document names T and binds T's last entry
below the audited size (docs/format.md §10.2).  The findings name T's seqs only, but
``tenant_heads_mismatch``, which names the last seq of the checkpoint (its size - 1, public).
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from ledger.clock import format_us
from ledger.core.audit import FORKED, ChainAuditor, Finding
from ledger.core.audit_report import AuditRange, AuditReport, report_outcome
from ledger.core.entry import hash_hex
from ledger.core.merkle import leaf_hash
from ledger.core.note import parse_checkpoint_body, parse_note
from ledger.core.policy import Policy, load_policy
from ledger.core.tenant import (
    TenantHead,
    check_tenant,
    heads_root,
    parse_extension,
    sorted_heads,
    tenant_genesis,
)
from ledger.crypto.trust import row_judge
from ledger.errors import UsageError
from ledger.ops.append import commit_batch, prepare_event
from ledger.ops.audit.runs import TENANT_JOB, run_document
from ledger.ops.audit.tally import Tally, tally_row
from ledger.ops.audit.walk import HeadPair, head_finding
from ledger.ops.context import LedgerContext
from ledger.ops.filters import make_filters
from ledger.ops.query import iter_pages
from ledger.ops.redaction_map import load_redaction_map
from ledger.ops.trust_store import load_trust_store
from ledger.store import audit_runs as runs
from ledger.store import entries as repo
from ledger.store import standby
from ledger.store.db import connect, transaction
from ledger.store.tenants import heads_at
from ledger.store.tree import read_store


def audit_tenant(ctx: LedgerContext, tenant: str, *, policy_path: str | None = None,
                 check_attestations: bool = True) -> AuditReport:
    """Audit ``tenant``'s chain (the report of ``ledger audit``, with ``tenant`` and the
    tenant's rows only).  Raises TenantError for a bad id."""
    check_tenant(tenant)
    started = ctx.clock.now_us()
    policy = load_policy(policy_path)
    store = load_trust_store(ctx.engine) if check_attestations else None
    with connect(ctx.engine) as conn:
        head = repo.read_head(conn)
        end = head.size if head is not None else 0
        tally, leaves, last = _walk(conn, ctx.meta.ledger_id, tenant, end, policy, store)
        recorded = repo.read_tenant_heads(conn).get(tenant)
    extra = _head_findings(tenant, recorded, last) + _tree_findings(ctx, tenant, leaves)
    findings = tuple(sorted([*tally.findings, *(f.reported() for f in extra)],
                            key=lambda f: (f.seq is None, f.seq or 0)))
    abstentions = tuple(tally.abstentions)
    summary = tally.row_counts()
    return AuditReport(
        ctx.meta.ledger_id, ctx.meta.origin, AuditRange(0, end), summary, findings,
        abstentions, policy.source, check_attestations, 1, format_us(started),
        format_us(ctx.clock.now_us()), None, report_outcome(summary, findings, abstentions),
        tenant=tenant)


def _walk(conn: Any, ledger_id: str, tenant: str, end: int, policy: Policy, store: Any,
          ) -> tuple[Tally, dict[int, bytes], tuple[int, int, bytes] | None]:
    """The tenant's rows through the checks: (tally, the leaf of each seq, (seq, tseq,
    hash) of its last entry)."""
    tally, leaves = Tally(), {}
    genesis = tenant_genesis(ledger_id, tenant)
    auditor = ChainAuditor(ledger_id, 0, genesis, 0, policy,
                           row_judge(store) if store is not None else None,
                           redactions=load_redaction_map(conn),
                           anchors=lambda t: (tenant_genesis(ledger_id, t), 0))
    auditor.sparse = True
    last = None
    for page in iter_pages(conn, make_filters(tenant=tenant, end=end)):
        for r, blobs in page:
            tally_row(tally, auditor.check_row(r, blobs), r)
            eh = bytes(r.entry_hash)
            leaves[r.seq] = leaf_hash(eh) if len(eh) == 32 else b""
            last = (r.seq, r.seq if r.tseq is None else r.tseq, eh)
    return tally, leaves, last


def _head_findings(tenant: str, recorded: tuple[int, bytes] | None,
                   last: tuple[int, int, bytes] | None) -> list[Finding]:
    want: HeadPair = (0, None) if last is None else (last[1] + 1, last[2])
    got: HeadPair = recorded or (0, None)
    if (got[0] or want[0]) and got != want:
        return [head_finding(tenant, last[0] if last else 0, got, want, recorded is not None)]
    return []


def _tree_findings(ctx: LedgerContext, tenant: str, leaves: dict[int, bytes]) -> list[Finding]:
    out: list[Finding] = []
    with read_store(ctx.engine) as store:
        size = store.tree_size()
        seqs = [s for s in sorted(leaves) if s < size]
        for i in range(0, len(seqs), 500):
            chunk = seqs[i:i + 500]
            nodes = store.get_nodes([(0, s) for s in chunk])
            for s in chunk:
                stored = nodes.get((0, s))
                if stored != leaves[s]:
                    out.append(Finding(
                        "tenant_not_in_tree", s, FORKED,
                        "the entry is not the leaf the stored tree holds at its seq",
                        None if stored is None else stored.hex(), leaves[s].hex()))
        latest = store.latest_checkpoint()
        if latest is None:
            return out
        cp = parse_checkpoint_body(parse_note(latest.note).text)
        heads = sorted_heads(TenantHead(t, n, h)
                             for t, n, h in heads_at(store.cur, store.pg, cp.size))
        line = parse_extension(cp.extensions)
        mine = any(h.tenant == tenant for h in heads)
        if mine and line is not None and line != (len(heads), heads_root(heads)):
            out.append(Finding("tenant_heads_mismatch", max(cp.size - 1, 0), FORKED,
                               f"the latest checkpoint (size {cp.size}) commits to other tenant "
                               "heads than the entries give",
                               {"tenants": line[0], "root": line[1].hex()},
                               {"tenants": len(heads), "root": heads_root(heads).hex()}))
    return out


def tenant_hash_before(ctx: LedgerContext, tenant: str, end: int) -> str | None:
    """``sha256:<hex>`` of the stored hash of ``tenant``'s last entry with seq < ``end``
    (the head a tenant run over ``[0, end)`` covered); None when it has none."""
    with connect(ctx.engine) as conn:
        last = repo.tenant_last_before(conn, tenant, end)
    return hash_hex(last[2]) if last is not None else None


def require_entries(ctx: LedgerContext, tenant: str) -> None:
    """A run recorded for ``tenant`` joins its chain: refused (UsageError ``no_such_tenant``,
    field ``tenant``) when the tenant has no entry, so that a mistyped id never creates a
    chain whose first entry is a run (and a leaf in the heads tree)."""
    with connect(ctx.engine) as conn:
        has = repo.tenant_head(conn, tenant)
    if has is None or has[0] == 0:
        raise UsageError(f"tenant {tenant!r} has no entry: a run recorded for it would "
                         "start its chain", code="no_such_tenant", field="tenant")


def refuse_on_replica(ctx: LedgerContext) -> None:
    """``--record`` writes: refused on a hot standby (exit 2 ``read_only_replica``)."""
    with connect(ctx.engine) as conn:
        if standby.is_standby(conn):
            raise UsageError("--record writes to the ledger, and this database is a "
                             "read-only replica (hot standby); run it against the primary",
                             code="read_only_replica", field="record")


def record_tenant_run(ctx: LedgerContext, report: AuditReport, producer: str | None, *,
                      command: str | None = None, actor: str | None = None) -> AuditReport:
    """Keep a tenant audit's ``report`` as a run: its ``audit_runs`` row (job
    ``tenant_audit``, complete, with its findings and abstentions), then its ``audit_run``
    entry in the tenant's chain.  Returns the report with ``run_id`` and ``recorded_seq``
    (the digest is of the report with ``run_id``, without ``recorded_seq``)."""
    tenant = report.tenant
    if tenant is None:
        raise ValueError("not the report of a tenant audit")
    refuse_on_replica(ctx)
    require_entries(ctx, tenant)
    now = ctx.clock.now_us()
    options: dict[str, Any] = {
        "tenant": tenant, "policy": report.policy, "attestations": report.attestations_checked,
        "command": command, "actor": actor, "since_last": False, "whole": False,
        "checkpoints": [], "state": {}}
    rows = [{"seq": f.seq, "kind": "finding", "body": json.dumps(f.to_json())}
            for f in report.findings]
    rows += [{"seq": a.seq, "kind": "abstention", "body": json.dumps(a.to_json())}
             for a in report.abstentions]
    end = report.range.end
    with transaction(ctx.engine) as conn:
        run_id = runs.new_run(conn, now, report.range.start, end, json.dumps(options),
                              json.dumps(report.summary.to_json()), job=TENANT_JOB)
        runs.add_findings(conn, [{"run_id": run_id, **r} for r in rows])
        runs.update_run(conn, run_id, next_seq=end, counts=json.dumps(report.summary.to_json()),
                        state="complete", options=json.dumps(options), updated_at=now)
    report = replace(report, run_id=run_id)
    doc = run_document(report, tenant_hash_before(ctx, tenant, end))
    ev = prepare_event("audit_run", {"outcome": report.outcome, "producer": producer},
                       "report", doc)
    ev.tenant = tenant
    res = commit_batch(ctx.engine, ctx.meta.ledger_id, ctx.clock, [ev])
    return replace(report, recorded_seq=int(res[0].seq))  # type: ignore[arg-type]
