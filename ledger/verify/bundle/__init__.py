"""Offline verification of an export bundle (format ``ledger-export/1``, docs/export.md);
no database.

One run is a sequence of steps, each handed the frozen :class:`BundleContext` and the
run's :class:`FindingSink`, each returning what it established:

1. :func:`~ledger.verify.bundle.header.read_header`: the manifest JWT and the checkpoint
   note against the verifier's trusted keys; the context gains manifest and checkpoint;
2. :func:`~ledger.verify.bundle.rows.walk` over ``key_events.jsonl``, then
   ``redactions.jsonl`` when the manifest lists it, then ``entries.jsonl``: the audit's
   per-row checks, each run of rows proven against the checkpoint by its interval's
   inclusion proof (:mod:`~ledger.verify.bundle.proofs`);
   each walk returns its row counts;
3. leftover proofs, the ``entries.csv`` view, the file digests
   (:mod:`~ledger.verify.bundle.files`), the counts, and the report of ``ledger audit``'s
   shape (:mod:`~ledger.verify.bundle.report`).

Every finding names the bundle file and, where there is one, the seq.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ledger.core.bundle import REDACTIONS
from ledger.core.policy import Policy
from ledger.crypto.keys import PublicKeyRef
from ledger.crypto.trust import TrustStore
from ledger.errors import UsageError
from ledger.verify.bundle.context import BundleContext, RowCounts
from ledger.verify.bundle.files import BundleFiles, check_digests
from ledger.verify.bundle.header import read_header
from ledger.verify.bundle.proofs import ProofCursor
from ledger.verify.bundle.report import REPORT_FORMAT, build_report, check_counts, check_csv
from ledger.verify.bundle.rows import (
    Entries,
    KeyEvents,
    Redactions,
    bundle_redactions,
    judge_with,
    report_signatures,
    walk,
)
from ledger.verify.bundle.sink import FindingSink
from ledger.verify.bundle.tenant import TenantCheck

__all__ = ["REPORT_FORMAT", "BundleContext", "FindingSink", "RowCounts", "verify_bundle_dir"]


def verify_bundle_dir(directory: str | Path, trusted: list[PublicKeyRef] | None,
                      policy: Policy, check_attestations: bool = True) -> dict[str, Any]:
    """Verify the bundle in ``directory`` and return the report.  ``trusted``: the
    verifier's keys (None: only the bundle's own, so signatures abstain at best).  Raises
    UsageError if ``directory`` is not a directory; never raises for bad bundle content."""
    path = Path(directory)
    if not path.is_dir():
        raise UsageError(f"{path} is not a directory", code="no_bundle", field="dir")
    sink = FindingSink()
    ctx = read_header(BundleContext(BundleFiles(path), trusted, policy, check_attestations),
                      sink)
    cursor = ProofCursor(ctx, sink)
    store = TrustStore()
    key_events = KeyEvents(sink, store)
    event_counts = walk(ctx, sink, key_events, cursor, None)
    carried = Redactions(sink)
    if REDACTIONS in (ctx.manifest.get("files") or {}):
        walk(ctx, sink, carried, cursor, None)  # its rows' findings fail the bundle
    entries = Entries(ctx, sink, key_events.hashes)
    tenant = TenantCheck(ctx, sink) if "tenant" in ctx.manifest else None
    entries.tenant_check = tenant
    judge = judge_with(store) if check_attestations else None
    redactions, signatures = bundle_redactions(ctx, carried.docs)
    report_signatures(sink, REDACTIONS, carried.docs, signatures)
    entry_counts = walk(ctx, sink, entries, cursor, judge, redactions,
                        {s: c for s, c in signatures.items() if s not in carried.docs})
    cursor.drain()
    check_csv(ctx, sink, entries)
    check_digests(ctx.files, ctx.manifest, sink)
    check_counts(ctx, sink, entry_counts, event_counts, entries)
    chain_complete = tenant.finish() if tenant is not None else None
    return build_report(ctx, sink, entry_counts, event_counts, chain_complete)
