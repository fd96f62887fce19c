"""What operators watch, read from the database: the use cases behind ``/metrics``,
``/v1/health/ready`` and the service's alerts (docs/operations.md#monitoring).

Everything here is counts, sizes, times and hashes -- never entry contents: the only
document read is the summary the ledger recorded for its latest ``audit_run`` entry.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from ledger.core.alert import findings_by_class
from ledger.core.digest import digest_text
from ledger.core.entry import hash_hex
from ledger.core.tenant import DEFAULT_TENANT
from ledger.errors import LedgerError
from ledger.ops.append import quarantine_status
from ledger.ops.context import LedgerContext
from ledger.store import entries as repo
from ledger.store import monitor as mon
from ledger.store.db import connect
from ledger.store.tree import CheckpointRow

# recorded audits of the default tenant alone looked past for the ledger's last audit (the
# whole ledger's runs are in the default chain, so other tenants' runs are never read)
TENANT_RUNS_SKIPPED = 100


@dataclass
class LastAudit:
    """The latest recorded audit (``audit_run`` entry) and the latest complete run."""

    seq: int | None = None
    outcome: str | None = None
    finished_at: str | None = None
    findings: int | None = None
    range: dict[str, int] | None = None
    by_class: dict[str, int] = field(default_factory=dict)  # of the latest complete run
    run_id: int | None = None
    run_finished_us: int | None = None


@dataclass
class Status:
    """A snapshot for metrics and alerts; ``*_us`` are microseconds since the epoch."""

    size: int
    head_hash: str
    quarantine_rows: int
    quarantine_dropped: int  # rejects only counted: the quarantine was full
    checkpoint_size: int | None
    checkpoint_created_us: int | None
    checkpoint_note: str | None
    witnesses: dict[str, int]  # witness name -> last cosigned checkpoint size
    last_audit: LastAudit


def status(ctx: LedgerContext, *, findings: bool = True) -> Status:
    """The snapshot.  ``findings=False`` skips reading the latest complete audit run's
    findings (by class).  Raises StoreUnavailable."""
    from ledger.ops.checkpoint import latest_checkpoint

    with connect(ctx.engine) as conn:
        h = repo.read_head(conn)
        witnesses = mon.cosigned_sizes(conn)
        last = _last_audit(conn, findings)
    cp: CheckpointRow | None = latest_checkpoint(ctx)
    q = quarantine_status(ctx)
    return Status(
        size=h.size if h is not None else 0,
        head_hash=hash_hex(h.head_hash) if h is not None else "",
        quarantine_rows=int(q["rows"]), quarantine_dropped=int(q["dropped"]),
        checkpoint_size=cp.size if cp else None,
        checkpoint_created_us=cp.created_at if cp else None,
        checkpoint_note=cp.note if cp else None,
        witnesses=witnesses, last_audit=last)


def _last_audit(conn: Any, findings: bool) -> LastAudit:
    out = LastAudit()
    ref = mon.last_doc_of_kind(conn, "audit_run", tenant=DEFAULT_TENANT)
    doc = None
    for _ in range(TENANT_RUNS_SKIPPED):  # the audit of one tenant is not the ledger's
        if ref is None or ref.data is None:
            break
        try:
            want = (json.loads(ref.envelope).get("payloads") or {}).get("report")
            doc = json.loads(ref.data) if digest_text(ref.data) == want else None
        except (ValueError, AttributeError):
            doc = None
        if not (isinstance(doc, dict) and "tenant" in doc):
            break
        doc, ref = None, mon.last_doc_of_kind(conn, "audit_run", ref.seq, DEFAULT_TENANT)
    if ref is not None and isinstance(doc, dict):
        out.seq = ref.seq
        out.outcome = str(doc.get("outcome"))
        out.finished_at = doc.get("finished_at")
        out.findings = doc.get("findings") if isinstance(doc.get("findings"), int) else None
        out.range = doc.get("range") if isinstance(doc.get("range"), dict) else None
    run = mon.latest_complete_run(conn)
    if run is not None:
        out.run_id, out.run_finished_us = run.id, run.updated_at
        if not findings:
            return out
        bodies = []
        for body in mon.run_finding_bodies(conn, run.id):
            try:
                bodies.append(json.loads(body))
            except ValueError:
                continue
        out.by_class = findings_by_class(bodies)
    return out


@dataclass
class Readiness:
    ok: bool
    checks: dict[str, dict[str, Any]]


def readiness(ctx: LedgerContext, *, key_loaded: bool, pending: int, queue_max: int,
              ) -> Readiness:
    """Store reachable, key loaded, queue below its limit, schema at the packaged head."""
    checks: dict[str, dict[str, Any]] = {}
    try:
        mon.ping(ctx.engine)
        checks["store"] = {"ok": True}
    except LedgerError as exc:
        checks["store"] = {"ok": False, "code": exc.code}
    checks["key"] = {"ok": key_loaded}
    checks["queue"] = {"ok": pending < queue_max, "pending": pending, "max": queue_max}
    if checks["store"]["ok"]:
        try:
            current, heads = mon.schema_state(ctx.engine)
            checks["schema"] = {"ok": current in heads, "current": current,
                                "head": heads[0] if len(heads) == 1 else list(heads)}
        except LedgerError as exc:
            checks["schema"] = {"ok": False, "code": exc.code}
    else:
        checks["schema"] = {"ok": False, "code": "store_unavailable"}
    return Readiness(all(c["ok"] for c in checks.values()), checks)
