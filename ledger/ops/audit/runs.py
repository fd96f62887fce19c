"""An audit run's options and its records: the progress saved in ``audit_runs`` (so a run
is resumable), ``since_last`` from the last recorded ``audit_run`` entry, and ``record``
(the run's summary appended to the chain itself).  See docs/audit.md."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, replace
from typing import Any

from sqlalchemy import Connection

from ledger.clock import Clock
from ledger.core.audit import FORKED, ChainAuditor
from ledger.core.audit_report import AuditReport
from ledger.core.digest import digest_text
from ledger.core.entry import hash_hex, parse_hash_hex
from ledger.core.finding import REDACTED, Abstention, Finding
from ledger.errors import LedgerError, UsageError
from ledger.ops.append import commit_batch, prepare_event
from ledger.ops.audit.tally import Tally
from ledger.ops.context import LedgerContext
from ledger.ops.read import hash_before
from ledger.ops.redaction_map import documents
from ledger.store import audit_runs as runs
from ledger.store import entries as repo
from ledger.store.db import connect, transaction


@dataclass
class AuditOptions:
    start: int = 0
    end: int | None = None
    workers: int = 1
    policy_path: str | None = None
    check_attestations: bool = True
    since_last: bool = False
    resume: bool = False
    record: bool = False
    producer: str | None = None
    checkpoints: tuple[str, ...] = ()  # signed checkpoint files kept by the auditor
    keys: tuple[str, ...] = ()  # ledger public keys (PEM/JWKS) to verify them
    anchor_policy: Any = None  # ledger.verify.anchor.AnchorPolicy for the checkpoints
    # the run's label in ``audit_runs`` (docs/audit.md, "Recorded runs"): the command that
    # made it ("ledger audit", "ledger report", ...; None: a library call) and who ran it
    command: str | None = None
    actor: str | None = None


# -- since-last, resume, record -------------------------------------------------
AUDIT_RUN_V1 = "ledger-audit-run/1"
AUDIT_RUN_V2 = "ledger-audit-run/2"  # /1 plus the abstention counts (docs/format.md §10.2)
# /2 plus ``tenant``: the audit of one tenant's chain (``ledger audit --tenant T --record``)
AUDIT_RUN_V3 = "ledger-audit-run/3"
TENANT_JOB = "tenant_audit"  # the ``audit_runs.job`` of a recorded tenant audit


def is_baseline(doc: dict[str, Any]) -> bool:
    """Whether a recorded audit run sets a ``--since-last`` baseline: it passed, or (a
    ``ledger-audit-run/2`` document) it had no finding and every abstention was a payload
    erased by a redaction (:func:`ledger.core.finding.only_redactions`).  The audit of one
    tenant (``ledger-audit-run/3``) verified one chain, not the ledger: never a baseline."""
    if doc.get("format") not in (None, AUDIT_RUN_V1, AUDIT_RUN_V2) or "tenant" in doc:
        return False
    if doc.get("outcome") == "passed":
        return True
    counts: tuple[Any, ...] = (doc.get("findings"), doc.get("abstentions"), doc.get("redacted"))
    return doc.get("format") == AUDIT_RUN_V2 and doc.get("outcome") == "unverified" \
        and all(type(c) is int for c in counts) and counts[0] == 0 \
        and counts[1] == counts[2] and counts[1] > 0


def since_last(conn: Connection, ctx: LedgerContext) -> tuple[int, list[Finding]]:
    """Where verified history ends: baseline audits (:func:`is_baseline`) whose ranges
    chain contiguously from seq 0 (a partial, failed or needs-review audit establishes no
    baseline)."""
    covered, anchor = 0, None
    for seq, data in documents(conn, "audit_run"):
        try:
            doc = json.loads(data)
            start, end = int(doc["range"]["start"]), int(doc["range"]["end"])
        except (ValueError, KeyError, TypeError):
            continue  # unreadable: not a baseline (the walk reports the modified row)
        if not is_baseline(doc):
            continue
        if start <= covered < end:
            covered, anchor = end, (seq, doc)
    if anchor is None:
        return 0, []
    seq, doc = anchor
    try:
        want = parse_hash_hex(doc["head_hash"]) if doc.get("head_hash") else None
    except ValueError:
        want = None
    got = repo.entry_hash_at(conn, covered - 1)
    findings = []
    if want is not None and (got is None or got != want):
        findings.append(Finding("rewritten_since_audit", covered - 1, FORKED,
                                f"entry {covered - 1} differs from the one audit {seq} verified",
                                hash_hex(want), hash_hex(got) if got else None))
    return covered, findings


def new_run(engine: Any, ctx: LedgerContext, opts: AuditOptions, start: int, end: int,
             parts: list[dict[str, Any]] | None = None) -> int:
    now = ctx.clock.now_us()
    options: dict[str, Any] = {"policy": opts.policy_path,
                               "attestations": opts.check_attestations, "state": {},
                               "command": opts.command, "actor": opts.actor,
                               "since_last": opts.since_last,
                               "whole": start == 0 and opts.end is None,
                               "checkpoints": [os.path.basename(c) for c in opts.checkpoints]}
    if parts:
        options["parts"] = parts
    with transaction(engine) as conn:
        return runs.new_run(conn, now, start, end, json.dumps(options),
                            json.dumps(Tally().counts()))


def save_progress(engine: Any, run_id: int, pos: int, tally: Tally, auditor: ChainAuditor | None,
          saved: dict[str, int], state: str = "running", *, clock: Clock) -> None:
    rows = [{"run_id": run_id, "seq": f.seq, "kind": "finding",
             "body": json.dumps(f.to_json())} for f in tally.findings[saved["findings"]:]]
    rows += [{"run_id": run_id, "seq": a.seq, "kind": "abstention",
              "body": json.dumps(a.to_json())} for a in tally.abstentions[saved["abstentions"]:]]
    st = {"prev_failed_hash": bool(auditor and auditor.prev_failed_hash)}
    with transaction(engine) as conn:
        runs.add_findings(conn, rows)
        opts = json.loads(runs.run_options(conn, run_id))
        opts["state"] = st
        runs.update_run(conn, run_id, next_seq=pos, counts=json.dumps(tally.counts()),
                        state=state, options=json.dumps(opts), updated_at=clock.now_us())
    saved.update(findings=len(tally.findings), abstentions=len(tally.abstentions),
                 at=tally.rows)


def save_aggregates(engine: Any, run_id: int, agg: dict[tuple[Any, ...], int]) -> None:
    """Store the run's counts (``audit_aggregates``); once, after the run is complete.  A
    database that refuses them (a role without INSERT on the table) costs the charts these
    counts, not the audit its report."""
    try:
        with transaction(engine) as conn:
            runs.add_aggregates(conn, run_id, agg)
    except LedgerError:
        return


def finish_run(engine: Any, run_id: int, end: int, tally: Tally, clock: Clock) -> None:
    with connect(engine) as conn:
        saved = runs.count_findings(conn, run_id, "finding")
        saved_a = runs.count_findings(conn, run_id, "abstention")
    save_progress(engine, run_id, end, tally, None, {"findings": saved, "abstentions": saved_a,
                                             "at": 0}, state="complete", clock=clock)


Unsaved = list[Finding | Abstention]  # found since the last save, in order


def save_parts(engine: Any, run_id: int, parts: list[dict[str, Any]], tally: Tally,
               unsaved: Unsaved | None, clock: Clock) -> None:
    """Save a parallel run: each part's position and walk state, the whole run's counts,
    and the findings and abstentions in ``unsaved``; ``unsaved`` None: the run is complete
    and ``tally`` holds all of them (gaps joined), which replace what was saved."""
    done = unsaved is None
    if unsaved is None:
        unsaved = [*tally.findings, *tally.abstentions]
    rows = [{"run_id": run_id, "seq": x.seq,
             "kind": "finding" if isinstance(x, Finding) else "abstention",
             "body": json.dumps(x.to_json())} for x in unsaved]
    with transaction(engine) as conn:
        if done:
            runs.delete_findings(conn, run_id)
        runs.add_findings(conn, rows)
        opts = json.loads(runs.run_options(conn, run_id))
        opts["parts"] = parts
        # the run's next_seq: the first seq not yet audited (its end once complete)
        runs.update_run(conn, run_id, next_seq=min([p["next_seq"] for p in parts if p[
                            "next_seq"] < p["end"]] or [parts[-1]["end"]]),
                        counts=json.dumps(tally.counts()),
                        state="complete" if done else "running", options=json.dumps(opts),
                        updated_at=clock.now_us())


def resume(engine: Any, opts: AuditOptions,
           ) -> tuple[AuditOptions, int, int, Tally, dict[str, Any], list[dict[str, Any]] | None]:
    """The interrupted run to continue: ``opts`` with the run's range, policy and
    attestation setting (a new AuditOptions; ``opts`` is not changed), its id, the seq to
    continue from, what it saved, its walk state and its parts (None: sequential)."""
    with connect(engine) as conn:
        run = runs.latest_running(conn)
        if run is None:
            raise UsageError("no interrupted audit run to resume", code="nothing_to_resume",
                             field="resume")
        tally = Tally(**json.loads(run.counts), agg=None)  # walked in part before
        for kind, body in runs.run_findings(conn, run.id):
            if kind == "finding":
                tally.findings.append(Finding.from_json(json.loads(body)))
            else:
                tally.abstentions.append(Abstention.from_json(json.loads(body)))
    saved = json.loads(run.options)
    opts = replace(opts, start=run.range_start, end=run.range_end,
                   policy_path=saved.get("policy"),
                   check_attestations=saved.get("attestations", True))
    state = saved.get("state", {})
    parts = saved.get("parts")
    if parts is not None and not _parts_ok(parts, run.range_start, run.range_end):
        raise UsageError(f"audit run {run.id} cannot be resumed: its saved parts are not "
                         "contiguous ranges that cover the run's range; start a new audit",
                         code="resume_state_invalid", field="resume")
    return opts, int(run.id), int(run.next_seq), tally, state, parts


def _parts_ok(parts: Any, start: int, end: int) -> bool:
    """Whether a parallel run's saved ``parts`` (operational state, written by this module;
    checked because nothing stops an operator editing it) are contiguous ranges covering
    ``[start, end)``, each with its position inside it."""
    if not isinstance(parts, list) or not parts:
        return False
    at = start
    for p in parts:
        if not isinstance(p, dict) or not isinstance(p.get("state", {}), dict) or not all(
                type(p.get(k)) is int for k in ("start", "end", "next_seq")):
            return False
        if p["start"] != at or not p["start"] <= p["next_seq"] <= p["end"]:
            return False
        at = p["end"]
    return at == end


def run_document(report: AuditReport, head_hash: str | None) -> dict[str, Any]:
    """The ``audit_run`` document of ``report`` (docs/format.md §10.2): ``ledger-audit-run/2``,
    or ``/3`` with ``tenant`` for the audit of one tenant (``report.tenant``)."""
    body = json.dumps(report.to_json(), sort_keys=True, separators=(",", ":")).encode()
    abstentions = report.abstentions
    doc: dict[str, Any] = {"format": AUDIT_RUN_V2, "range": report.range.to_json(),
           "summary": report.summary.to_json(), "findings": len(report.findings),
           "abstentions": len(abstentions),
           "redacted": sum(1 for a in abstentions if a.reason == REDACTED),
           "outcome": report.outcome, "head_hash": head_hash,
           "report_digest": digest_text(body),
           "finished_at": report.finished_at}
    if report.tenant is not None:
        doc.update(format=AUDIT_RUN_V3, tenant=report.tenant)
    return doc


def record_run(ctx: LedgerContext, report: AuditReport, producer: str | None) -> int:
    """Append an ``audit_run`` entry: the summary, the range, and the report digest (of
    the report without ``recorded_seq``)."""
    doc = run_document(report, hash_before(ctx, report.range.end))
    ev = prepare_event("audit_run", {"outcome": report.outcome, "producer": producer},
                       "report", doc)
    res = commit_batch(ctx.engine, ctx.meta.ledger_id, ctx.clock, [ev])
    return int(res[0].seq)  # type: ignore[arg-type]
