"""The last step of a bundle verification: the manifest's counts, the ``entries.csv``
view, the file digests, and the report (``ledger-export-verification/1``, docs/export.md;
outcome and exit codes as ``ledger audit``)."""

from __future__ import annotations

from typing import Any

from ledger.core.bundle import CSV_VIEW, ENTRIES, KEY_EVENTS
from ledger.core.finding import Disposition, FindingClass, outcome
from ledger.verify.bundle.context import BundleContext, RowCounts
from ledger.verify.bundle.files import BAD_FILE_CODES
from ledger.verify.bundle.rows import Entries
from ledger.verify.bundle.sink import FindingSink

REPORT_FORMAT = "ledger-export-verification/1"


def check_csv(ctx: BundleContext, sink: FindingSink, entries: Entries) -> None:
    """entries.csv must be, byte for byte, the view of the entries walked."""
    expected = entries.csv_digest()
    got = ctx.files.digest(CSV_VIEW, sink)
    if got is not None and got != expected:
        sink.fail("csv_view_mismatch", FindingClass.PAYLOAD_MODIFIED, "entries.csv is not "
                  "the view of entries.jsonl", CSV_VIEW)


def check_counts(ctx: BundleContext, sink: FindingSink, entries: RowCounts,
                 key_events: RowCounts, visited: Entries) -> None:
    """The manifest's counts must be the bundle's."""
    want = ctx.manifest.get("counts")
    if not isinstance(want, dict):
        return
    got = {"entries": entries.rows, "key_events": key_events.rows,
           "by_status": dict(visited.by_status), "by_kind": dict(visited.by_kind)}
    for key, value in got.items():
        if want.get(key) != value:
            sink.fail("count_mismatch", FindingClass.DELETED, f"the manifest counts {key} "
                      f"{want.get(key)}, the bundle has {value}",
                      KEY_EVENTS if key == "key_events" else ENTRIES, None, want.get(key),
                      value)


def build_report(ctx: BundleContext, sink: FindingSink, entries: RowCounts,
                 key_events: RowCounts, chain_complete: bool | None = None) -> dict[str, Any]:
    """The report: summary, signatures, findings (a disagreement named after the file whose
    digest is bad), abstentions and outcome."""
    m = ctx.manifest
    summary: dict[str, Any] = dict(entries.to_json())
    summary["key_events"] = key_events.rows
    report = {
        "format": REPORT_FORMAT, "bundle": str(ctx.dir), "ledger_id": m.get("ledger_id"),
        "origin": m.get("origin"), "range": m.get("range"), "summary": summary,
        "signatures": {k: v.value for k, v in ctx.signatures.items()},
        "trusted_keys": ctx.trusted is not None,
        "attestations_checked": ctx.check_attestations,
        "findings": sink.finding_dicts(sink.files_with(BAD_FILE_CODES)),
        "abstentions": sink.abstention_dicts(),
    }
    report["outcome"] = outcome(report)
    # complete: the bundle proves it holds every entry of what it exports -- a tenant's whole
    # chain (a tenant export), or every seq of its range (a contiguous, unfiltered export) --
    # with no finding and both signatures verified by trusted keys (an abstention on a
    # payload, e.g. one lawfully redacted, does not make an entry missing)
    whole = chain_complete if chain_complete is not None else bool(
        m.get("contiguous") is True and not m.get("filters"))
    signed = all(ctx.signatures.get(k) == Disposition.VERIFIED for k in ("manifest", "checkpoint"))
    report["complete"] = bool(whole and signed and not report["findings"])
    if "tenant" in m and isinstance(m["tenant"], dict):
        report["tenant"] = m["tenant"].get("id")
    return report
