"""The public Python API: ``Ledger.open(url)`` and its use cases.

``Ledger`` owns one ``LedgerContext`` and delegates every method to a use case
of ``ledger.ops`` (one line each); it holds no policy of its own.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any, Unpack

from ledger.clock import Clock
from ledger.ops import aggregates as aggregates_ops
from ledger.ops import append as append_ops
from ledger.ops import audit as audit_ops
from ledger.ops import backup as backup_ops
from ledger.ops import checkpoint as checkpoint_ops
from ledger.ops import (
    custody,
    history,
    lifecycle,
    qwed_import,
    read,
    reverify_history,
    tiles,
    trust,
)
from ledger.ops import export as export_ops
from ledger.ops import monitor as monitor_ops
from ledger.ops import query as query_ops
from ledger.ops import replica as replica_ops
from ledger.ops import report as report_ops
from ledger.ops import reverify as reverify_ops
from ledger.ops.append import AppendResult
from ledger.ops.context import (
    Engine,
    Keyring,
    LedgerContext,
    LedgerMeta,
    QuarantineLimits,
    TenantQuotas,
    TrustStore,
)
from ledger.ops.filters import TimeBound

DEFAULT_TENANT = append_ops.DEFAULT_TENANT


class Ledger:
    """One ledger in one database (SQLite file or PostgreSQL database/schema)."""

    def __init__(self, ctx: LedgerContext) -> None:
        self.ctx = ctx
        # ``append`` from several threads: one group commit (the append path's), committed
        # by the callers themselves; no queue bound beyond the callers' own threads
        self._appends = append_ops.GroupCommit(self._append_alone, isolate=True,
                                               max_queue=2**31)

    @property
    def engine(self) -> Engine:
        return self.ctx.engine

    @property
    def meta(self) -> LedgerMeta:
        return self.ctx.meta

    @property
    def clock(self) -> Clock:
        return self.ctx.clock

    # -- lifecycle --------------------------------------------------------
    @classmethod
    def init(cls, url: str | None = None, *, origin: str | None = None,
             clock: Clock | None = None, quarantine: QuarantineLimits | None = None,
             quotas: TenantQuotas | None = None) -> Ledger:
        """Create the schema (migrations) and the ledger identity if absent; idempotent.
        ``quarantine``: its bounds (default: ``QuarantineLimits.from_env()``); ``quotas``:
        the tenants' entry quotas (default: ``TenantQuotas.from_env()``)."""
        return cls._with(lifecycle.init_ledger(url, origin=origin, clock=clock), quarantine,
                         quotas)

    @classmethod
    def open(cls, url: str | None = None, *, clock: Clock | None = None,
             quarantine: QuarantineLimits | None = None,
             quotas: TenantQuotas | None = None) -> Ledger:
        """Open an initialized ledger.  Raises NotInitialized or StoreUnavailable.
        ``quarantine``: its bounds (default: ``QuarantineLimits.from_env()``); ``quotas``:
        the tenants' entry quotas (default: ``TenantQuotas.from_env()``)."""
        return cls._with(lifecycle.open_ledger(url, clock=clock), quarantine, quotas)

    @classmethod
    def _with(cls, ctx: LedgerContext, quarantine: QuarantineLimits | None,
              quotas: TenantQuotas | None = None) -> Ledger:
        if quarantine is not None:
            ctx.quarantine_limits = quarantine
        if quotas is not None:
            ctx.tenant_quotas = quotas
        return cls(ctx)

    def close(self) -> None:
        self.ctx.close()

    def __enter__(self) -> Ledger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- appends and the trust store ---------------------------------------
    def append(self, submission: Any, *, producer: str | None = None,
               tenant: str = DEFAULT_TENANT) -> AppendResult:
        """Append one submission (bytes, JSON text or a parsed object) to ``tenant``'s
        chain; returned once its transaction committed.  Calls from several threads at once
        share transactions (group commit, ``ledger.ops.append.GroupCommit``); each gets its
        own result, the one it would get alone; a lone call commits its item at once, in
        its own thread."""
        scope = producer if tenant == DEFAULT_TENANT else (producer, tenant)
        result: AppendResult = self._appends.append(submission, scope)
        return result

    def _append_alone(self, submissions: Sequence[Any], scope: append_ops.Scope,
                      ) -> list[AppendResult]:
        """One group of ``append`` calls in one transaction; each result as a lone call's."""
        if not isinstance(scope, tuple):  # the default tenant: the call it always was
            return [replace(r, index=0) for r in self.append_many(submissions, producer=scope)]
        producer, tenant = scope
        return [replace(r, index=0)
                for r in self.append_many(submissions, producer=producer, tenant=tenant)]

    def append_many(self, submissions: Sequence[Any], *, producer: str | None = None,
                    tenant: str = DEFAULT_TENANT) -> list[AppendResult]:
        """Append a batch to ``tenant``'s chain under one lock and one commit; results in
        input order (see ``ledger.ops.append.append_many``)."""
        return append_ops.append_many(self.ctx, submissions, producer=producer, tenant=tenant)

    def quarantine_status(self) -> dict[str, Any]:
        """Quarantine rows, bounds and counters (``ledger.ops.append.quarantine_status``)."""
        return append_ops.quarantine_status(self.ctx)

    def prune_quarantine(self, before_us: int, producer: str | None = None) -> int:
        """Delete quarantine rows received before ``before_us``; returns how many."""
        return append_ops.prune_quarantine(self.ctx, before_us, producer)

    def trust_store(self, refresh: bool = True) -> TrustStore:
        """The attestation trust store folded from key_event entries (cached)."""
        return self.ctx.trust_store(refresh)

    def trust_issuer(self, issuer: str, jwks: dict[str, Any], *, reason: str | None = None,
                     producer: str | None = None) -> list[AppendResult]:
        """Append one ``trust`` key event per new key of ``jwks``."""
        return trust.trust_issuer(self.ctx, issuer, jwks, reason=reason, producer=producer)

    def end_key(self, action: str, kid: str, *, reason: str | None = None,
                producer: str | None = None, compromised_since_us: int | None = None,
                thumbprint: str | None = None) -> list[AppendResult]:
        """Append a ``retire`` or ``revoke`` key event for an active key."""
        return trust.end_key(self.ctx, action, kid, reason=reason, producer=producer,
                             compromised_since_us=compromised_since_us, thumbprint=thumbprint)

    # -- reads ------------------------------------------------------------
    def head(self) -> dict[str, Any]:
        return read.head(self.ctx)

    def get(self, seq: int) -> dict[str, Any]:
        """One entry with its payloads.  Raises NotFound."""
        return read.get_entry(self.ctx, seq)

    def iter_entries(self, start: int = 0, end: int | None = None) -> Iterable[Any]:
        return read.iter_entries(self.ctx, start, end)

    def query(self, **args: Unpack[query_ops.QueryArgs]) -> query_ops.QueryPage:
        """One keyset page (``QueryPage``: ``rows``, ``next_after``) of the entries matching
        the filters of ``args`` (``ledger.ops.query.QueryArgs``: the keywords of
        ``make_filters``), with ``after=``, ``limit=``, ``layer=`` (agent, developer,
        auditor; default agent), ``order=`` and ``before=``.  Raises UsageError."""
        return query_ops.query_filtered(self.ctx, **args)

    def iter_query(self, f: query_ops.Filters, *, after: int = -1, layer: str = "agent",
                   page: int = 1000, tenant: str | None = None) -> Iterable[dict[str, Any]]:
        """Every entry matching ``f`` as views of ``layer`` (streaming; ``tenant``: of that
        tenant only)."""
        return query_ops.iter_query(self.ctx, f, after=after, layer=layer, page=page,
                                    tenant=tenant)

    def query_page(self, f: query_ops.Filters, *, after: int = -1, limit: int = 100,
                   layer: str = "agent", order: str = "asc", before: int | None = None,
                   tenant: str | None = None) -> query_ops.QueryPage:
        """One keyset page of the entries matching ``f`` (``tenant``: of that tenant only)."""
        return query_ops.query(self.ctx, f, after=after, limit=limit, layer=layer,
                               order=order, before=before, tenant=tenant)

    def aggregates(self, layer: str, *, since: TimeBound = None, until: TimeBound = None,
                   bucket: str = "auto", engines: Iterable[str] = (),
                   producers: Iterable[str] = (), tenant: str | None = None,
                   ) -> dict[str, Any]:
        """Bucketed counts over the whole ledger (``tenant``: over that tenant's entries
        only) for charts (``ledger.ops.aggregates``)."""
        return aggregates_ops.aggregates(self.ctx, layer, since=since, until=until,
                                         bucket=bucket, engines=engines, producers=producers,
                                         tenant=tenant)

    def count_index_matches(self, f: query_ops.Filters, tenant: str | None = None) -> int:
        """How many entries (of ``tenant``, when given) the indexed columns select for
        ``f`` (candidates, unchecked)."""
        return query_ops.count_index_matches(self.ctx, f, tenant)

    def filter_values(self, name: str, layer: str, tenant: str | None = None,
                      ) -> dict[str, Any]:
        """The pick-list of the filter ``name``: the values the index holds (for
        ``tenant``'s entries only, when given)."""
        return query_ops.filter_values(self.ctx, name, layer, tenant)

    def seq_of_entry_hash(self, text: str, tenant: str | None = None) -> int | None:
        """The seq whose stored entry hash is ``text`` (hex), or None (also when that entry
        is not ``tenant``'s, when given)."""
        return query_ops.seq_of_entry_hash(self.ctx, text, tenant)

    def explain(self, f: query_ops.Filters, *, after: int = -1, limit: int = 100,
                layer: str = "agent") -> list[str]:
        """The database's plan for a query."""
        return query_ops.explain(self.ctx.engine, f, after=after, limit=limit, layer=layer)

    # -- checkpoints, proofs, audits and exports ---------------------------------
    def checkpoint(self, keyring: Keyring) -> str:
        """Sign and store a checkpoint of the whole ledger; return the signed note."""
        return checkpoint_ops.make_checkpoint(self.ctx, keyring)

    def checkpoint_bounded(self, keyring: Keyring, min_interval_us: int) -> str | None:
        """``checkpoint``, unless the latest stored one is younger than the interval
        (then None; judged under the append lock, for every process)."""
        return checkpoint_ops.make_checkpoint_bounded(self.ctx, keyring, min_interval_us)

    def latest_checkpoint(self) -> checkpoint_ops.CheckpointRow | None:
        return checkpoint_ops.latest_checkpoint(self.ctx)

    def checkpoint_at(self, size: int) -> checkpoint_ops.CheckpointRow | None:
        return checkpoint_ops.checkpoint_at(self.ctx, size)

    # -- anchoring: witness cosignatures and timestamps (docs/anchoring.md) --------------
    def anchored_checkpoint(self, keyring: Keyring, config: checkpoint_ops.AnchorConfig,
                            ) -> checkpoint_ops.AnchorReport:
        """``checkpoint``, then cosigned by the witnesses and time-stamped by the TSA of
        ``config``; what each witness or the TSA did is in the report."""
        return checkpoint_ops.make_anchored_checkpoint(self.ctx, keyring, config)

    def latest_cosigned_note(self) -> str | None:
        """The latest checkpoint's note with the witness cosignatures stored for it."""
        return checkpoint_ops.latest_cosigned_note(self.ctx)

    def timestamps(self, size: int) -> list[dict[str, str | None]]:
        """The RFC 3161 timestamps stored for the checkpoint of ``size``."""
        return checkpoint_ops.timestamps_of(self.ctx, size)

    def write_timestamp_sidecar(self, out: str, size: int) -> None:
        """``<out>.tsr``: the first stored token of the checkpoint of ``size``, if any."""
        checkpoint_ops.write_timestamp_sidecar(self.ctx, out, size)

    def checkpoints(self, after: int = -1, limit: int = 100,
                    consistency: bool = False) -> dict[str, Any]:
        """Stored checkpoints with ``size > after`` (cosigners, timestamps), smallest first;
        ``consistency``: with the proof from the checkpoint before each."""
        return history.checkpoints(self.ctx, after, limit, consistency)

    def audit_runs(self, before: int | None = None, limit: int = 100,
                   tenant: str | None = None) -> dict[str, Any]:
        """Recorded audit runs, newest first (``tenant``: only that tenant's recorded audits)."""
        return history.audit_runs(self.ctx, before, limit, tenant)

    def audit_run(self, run_id: int, sel: history.FindingSelection | None = None,
                  tenant: str | None = None) -> dict[str, Any]:
        """One recorded audit run with its incidents and (``sel``) its findings (``tenant``:
        any other run than that tenant's is NotFound)."""
        return history.audit_run(self.ctx, run_id, sel, tenant)

    def prove(self, seq: int, checkpoint: str | None = None,
              keyring: Keyring | None = None) -> dict[str, Any]:
        """The inclusion-proof bundle of the entry at ``seq``."""
        return checkpoint_ops.inclusion_bundle(self.ctx, seq, checkpoint, keyring)

    def prove_consistency(self, old: str, new: str) -> dict[str, Any]:
        """The consistency-proof bundle between two signed checkpoints of this ledger."""
        return checkpoint_ops.consistency_bundle(self.ctx, old, new)

    def audit(self, opts: audit_ops.AuditOptions | None = None, *,
              progress: Callable[[int], None] | None = None) -> audit_ops.AuditReport:
        """Run an audit and return its report (``progress``: called with the seqs walked)."""
        return audit_ops.run_audit(self.ctx, opts or audit_ops.AuditOptions(), progress)

    def audit_tenant(self, tenant: str, *, policy_path: str | None = None,
                     check_attestations: bool = True, record: bool = False,
                     producer: str | None = None, command: str | None = None,
                     actor: str | None = None) -> audit_ops.AuditReport:
        """Audit one tenant's chain and its place in the global tree (docs/tenants.md);
        ``record``: keep it as a run, its ``audit_run`` entry in the tenant's chain."""
        if record:  # refused on a replica before the walk, as ``ledger audit --record``
            audit_ops.refuse_on_replica(self.ctx)
        report = audit_ops.audit_tenant(self.ctx, tenant, policy_path=policy_path,
                                        check_attestations=check_attestations)
        if record:
            report = audit_ops.record_tenant_run(self.ctx, report, producer, command=command,
                                                 actor=actor)
        return report

    def reverify(self, opts: reverify_ops.ReverifyOptions | None = None, *,
                 progress: Callable[[int], None] | None = None,
                 total: Callable[[int], None] | None = None) -> dict[str, Any]:
        """Re-execute the selected results' engines on their stored inputs and compare
        (docs/reverify.md); ``total`` is told how many seqs the run walks, ``progress``
        advanced by the seqs passed."""
        return reverify_ops.run_reverify(self.ctx, opts or reverify_ops.ReverifyOptions(),
                                         progress, total)

    def reverify_runs(self, before: int | None = None, limit: int = 20,
                      tenant: str | None = None) -> dict[str, Any]:
        """The recorded re-verification runs (``reverify_run`` entries), newest first, each
        checked, with its outcomes and whether their recorded digest proves them
        (``tenant``: only the runs recorded for that tenant)."""
        return reverify_history.recorded_runs(self.ctx, before, limit, tenant)

    def reverify_run(self, seq: int | None = None) -> dict[str, Any]:
        """The ``reverify_run`` entry at ``seq`` (None: the latest), checked, with its
        outcomes.  Raises NotFound or UsageError (not a reverify_run entry)."""
        return reverify_history.recorded_run(self.ctx, seq)

    def report_data(self, audit: audit_ops.AuditReport, *, title: str, since: str | None = None,
                    until: str | None = None, command: str = "ledger audit",
                    ) -> dict[str, Any]:
        """The figures of an HTML report over the range of the audit report ``audit``."""
        return report_ops.report_data(self.ctx, audit, title=title, since=since, until=until,
                                      command=command)

    def period_report(self, since: str | None, until: str | None, *,
                      check_attestations: bool = True) -> dict[str, Any]:
        """Audit the entries recorded in ``[since, until)`` and gather the report figures."""
        return report_ops.period_report(self.ctx, since, until,
                                        check_attestations=check_attestations)

    def export(self, out_dir: str | os.PathLike[str],
               opts: export_ops.ExportOptions | None = None, *,
               progress: Callable[[int], None] | None = None) -> dict[str, Any]:
        """Write a verifiable export bundle to ``out_dir`` and return its manifest; ``opts``
        (``ledger.ops.export.ExportOptions``): the filters, the proofs and the signer;
        ``progress``: called with the entries written."""
        return export_ops.export_filtered(self.ctx, out_dir, opts, progress=progress)

    def import_qwed(self, rows: Iterable[dict[str, Any]], *, source: str,
                    secret: bytes | None = None, namespace: str = "default",
                    dry_run: bool = False, label: str | None = None,
                    tenants: Mapping[str, str] | None = None, tenant: str | None = None,
                    ) -> qwed_import.ImportReport:
        """Import QWED ``VerificationLog`` rows (see ``ledger.ops.qwed_import``); ``tenants``
        maps an upstream organisation to a tenant, ``tenant`` takes the others."""
        return qwed_import.import_qwed(self.ctx, rows, source=source, secret=secret,
                                       namespace=namespace, dry_run=dry_run, label=label,
                                       tenants=tenants, tenant=tenant)

    def export_zip(self, keys: Any, f: query_ops.Filters, work_dir: Any,
                   tenant: str | None = None, absence_proof: bool = True) -> Any:
        """The signed export bundle of ``f`` (or ``tenant``'s complete export) packed as a zip
        under ``work_dir``: (path, manifest)."""
        return export_ops.export_zip(self.ctx, keys, f, work_dir, tenant, absence_proof)

    def export_records(self, f: query_ops.Filters) -> Iterable[bytes]:
        """The export record line of every entry matching ``f`` (streaming)."""
        return export_ops.iter_records(self.ctx, f)

    # -- C2SP tlog-tiles (docs/tiles.md) -------------------------------------------------
    def tiles_size(self) -> int:
        """Tree size of the latest stored checkpoint, which bounds every tile served."""
        return tiles.published_size(self.ctx)

    def tile(self, tile: Any, size: int | None = None) -> bytes:
        """The bytes of a Merkle tile (``ledger.core.tiles.Tile``) or, for level None,
        of an entry bundle, within the latest checkpoint (or ``size``)."""
        if tile.level is None:
            return tiles.entry_bundle(self.ctx, tile, size)
        return tiles.tile_bytes(self.ctx, tile, size)

    def write_tiles(self, out_dir: Any) -> tiles.TilesReport:
        """Publish the tiles of the latest checkpoint under ``out_dir``, incrementally."""
        return tiles.write_tiles(self.ctx, out_dir)

    # -- redaction, legal holds and retention (docs/redaction.md) -----------------------
    def redact(self, ask: custody.Ask, *, subject: str | None = None,
               seqs: Iterable[int] = (), payloads: Iterable[str] = ("all",),
               keep_attestation: bool = False, override_minimum: str | None = None,
               retention: custody.RetentionPolicy | None = None, dry_run: bool = False,
               keyring: Keyring | None = None) -> custody.RedactionOutcome:
        """Erase payloads of the entries of ``subject`` and/or ``seqs`` through redaction
        entries signed with ``keyring`` (``ledger.ops.custody.redact``)."""
        return custody.redact(self.ctx, ask, subject=subject, seqs=seqs, payloads=payloads,
                              keep_attestation=keep_attestation,
                              override_minimum=override_minimum, retention=retention,
                              dry_run=dry_run, keyring=keyring)

    def erasure_report(self, outcome: custody.RedactionOutcome, ask: custody.Ask,
                       keyring: Keyring, *, keep_attestation: bool = False,
                       override_minimum: str | None = None) -> dict[str, Any]:
        """The signed erasure report of ``outcome`` (checkpoint signed after it)."""
        return custody.erasure_report(self.ctx, outcome, ask, keyring,
                                      keep_attestation=keep_attestation,
                                      override_minimum=override_minimum)

    def hold_add(self, ask: custody.Ask, *, subject: str | None = None,
                 seqs: Iterable[int] = ()) -> int:
        """Put the entries of ``subject`` and/or ``seqs`` under a legal hold; the hold
        entry's seq."""
        return custody.hold_add(self.ctx, ask, subject=subject, seqs=seqs)

    def hold_release(self, ask: custody.Ask, hold_seq: int) -> int:
        """Release the hold ``hold_seq``; the release entry's seq."""
        return custody.hold_release(self.ctx, ask, hold_seq)

    def holds(self, tenant: str | None = None) -> dict[int, list[int]]:
        """hold seq -> held entries, for every hold in force (``tenant``: those it sees)."""
        return custody.holds_in_force(self.ctx, tenant)

    def apply_retention(self, policy: custody.RetentionPolicy, *, dry_run: bool = False,
                        producer: str | None = None, role: str = "operator",
                        progress: Callable[[int, int], None] | None = None,
                        keyring: Keyring | None = None,
                        tenant: str | None = None) -> custody.RetentionRun:
        """Erase what ``policy`` says has expired (of ``tenant``'s entries only, when
        given), signed with ``keyring`` (unless ``dry_run``); ``progress(done, total)``
        after each page."""
        return custody.apply_retention(self.ctx, policy, dry_run=dry_run, producer=producer,
                                       role=role, progress=progress, keyring=keyring,
                                       tenant=tenant)

    # -- operations: monitoring and backups (docs/operations.md) ----------------------
    def monitor_status(self, findings: bool = True) -> monitor_ops.Status:
        """Sizes, checkpoint, witnesses and the last audit, for metrics and alerts
        (``findings=False``: without the last run's findings by class)."""
        return monitor_ops.status(self.ctx, findings=findings)

    # -- a read replica of this ledger (ledger serve --read-db) ----------------
    def check_replica(self, replica: Ledger) -> None:
        """UsageError ``not_a_replica`` when ``replica`` holds another ledger."""
        replica_ops.check_same_ledger(self.ctx, replica.ctx)

    def replica_behind(self, replica: Ledger) -> bool:
        """This ledger holds entries or a checkpoint ``replica`` has not replayed yet."""
        return replica_ops.is_behind(self.ctx, replica.ctx)

    def replica_status(self, replica: Ledger) -> dict[str, Any]:
        """Position and lag of ``replica`` (``ledger.ops.replica.status``)."""
        return replica_ops.status(self.ctx, replica.ctx)

    def readiness(self, *, key_loaded: bool, pending: int, queue_max: int,
                  ) -> monitor_ops.Readiness:
        """Store, key, queue and schema checks."""
        return monitor_ops.readiness(self.ctx, key_loaded=key_loaded, pending=pending,
                                     queue_max=queue_max)

    def backup(self, out: Any) -> dict[str, Any]:
        """A consistent copy of a SQLite ledger (the online backup API) at ``out``."""
        return backup_ops.backup(self.ctx, out)
