"""The re-verification job: stream a range of entries through the pure checks.

Constant memory (keyset pages of entries and their payloads), a range split
across worker processes, resumable progress in ``audit_runs``, ``since_last``
from the last recorded ``audit_run`` entry, and ``record`` to append the run's
summary to the chain itself.  See docs/audit.md.
"""

from __future__ import annotations

import json
import multiprocessing as mp
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any

from sqlalchemy import Connection

from ledger.clock import format_us
from ledger.core.audit import (
    DELETED,
    EXIT_CODES,  # noqa: F401 -- re-exported: ledger.cli.audit and tests import it here
    FORKED,
    TRUNCATED,
    ChainAuditor,
    Finding,
    outcome,
)
from ledger.core.digest import digest_text
from ledger.core.entry import genesis_hash, hash_hex, parse_hash_hex
from ledger.core.finding import LEDGER_LEVEL_CODES, REDACTED, summary_line  # noqa: F401 -- re-exported
from ledger.core.policy import Policy, load_policy
from ledger.crypto.keys import PublicKeyRef, load_public_keys
from ledger.crypto.trust import TrustStore, row_judge
from ledger.errors import LedgerError, UsageError
from ledger.ops.append import commit_batch, prepare_event
from ledger.ops.audit.custody import add_custody_findings
from ledger.ops.context import LedgerContext
from ledger.ops.redaction_map import documents, load_redaction_map
from ledger.ops.trust_store import load_trust_store
from ledger.store import audit_runs as runs
from ledger.store import entries as repo
from ledger.store import standby
from ledger.store.db import connect, transaction

PAGE = 1000
PROGRESS_EVERY = 20_000
REPORT_FORMAT = "ledger-audit-report/1"


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


@dataclass
class Tally:
    rows: int = 0
    verified: int = 0
    failed: int = 0
    unverified: int = 0
    findings: list[dict[str, Any]] = field(default_factory=list)
    abstentions: list[dict[str, Any]] = field(default_factory=list)
    # row counts by (hour, kind, status, engine, producer, att_verdict, disposition): see
    # _count; None when this session did not walk the whole range (a resumed run)
    agg: dict[tuple[Any, ...], int] | None = field(default_factory=dict)

    def add(self, other: Tally) -> None:
        self.rows += other.rows
        self.verified += other.verified
        self.failed += other.failed
        self.unverified += other.unverified
        self.findings += other.findings
        self.abstentions += other.abstentions
        if self.agg is not None and other.agg is not None:
            for k, n in other.agg.items():
                self.agg[k] = self.agg.get(k, 0) + n
        else:
            self.agg = None

    def counts(self) -> dict[str, int]:
        return {"rows": self.rows, "verified": self.verified, "failed": self.failed,
                "unverified": self.unverified}


_policy = load_policy


def _anchor(conn: Connection, ledger_id: str, start: int) -> tuple[bytes | None, int]:
    """The hash the first row must link to; None when the predecessor is itself
    missing (the range before reports that gap; there is nothing to link to)."""
    if start == 0:
        return genesis_hash(ledger_id), 0
    link = repo.link_at(conn, start - 1)
    if link is None:
        return None, 0
    return link.entry_hash, link.recorded_at


def audit_range(engine: Any, ledger_id: str, start: int, end: int, policy: Policy,
                store: TrustStore | None, progress: Callable[[int], None] | None = None,
                on_page: Callable[[int, Tally, ChainAuditor], None] | None = None,
                state: dict[str, Any] | None = None) -> Tally:
    """Audit ``[start, end)`` (the caller checks the head).  Never raises for bad data."""
    tally = Tally()
    with connect(engine) as conn:
        anchor, last_time = _anchor(conn, ledger_id, start)
        auditor = ChainAuditor(ledger_id, start, anchor, last_time, policy,
                               row_judge(store) if store is not None else None,
                               redactions=load_redaction_map(conn))
        if state:
            auditor.prev_failed_hash = state.get("prev_failed_hash", False)
        # the fused pass first: a row that passes it is only counted, with no RowOutcome;
        # any other row takes the plain checks
        clean = auditor.clean_checks if auditor.fast else None
        plain = auditor.check_plain
        agg: dict[tuple[Any, ...], int] = tally.agg  # type: ignore[assignment]
        get = agg.get
        for page in repo.iter_entry_pages(conn, start, end, PAGE):
            n_clean = 0
            for r, blobs in page:
                if clean is not None and clean(r, blobs):
                    n_clean += 1
                    # a verified row's columns equal its envelope (the fused pass compared
                    # them): they are the envelope's values
                    k = (r.recorded_at - r.recorded_at % HOUR_US, r.kind, r.status, r.engine,
                         r.producer, r.att_verdict, "verified")
                    agg[k] = get(k, 0) + 1
                    continue
                _tally(tally, plain(r, blobs), r)
            tally.rows += n_clean
            tally.verified += n_clean
            if progress:
                progress(len(page))
            if on_page:
                on_page(page.next_seq, tally, auditor)
        if auditor.expected_seq < end:  # rows missing at the end of the range
            tally.findings.append(Finding(
                "seq_gap", auditor.expected_seq, DELETED,
                f"entries {auditor.expected_seq}..{end - 1} are missing",
                auditor.expected_seq, None).to_dict())
    return tally


HOUR_US = 3_600_000_000


def _count(t: Tally, r: Any, disposition: str) -> None:
    """Count row ``r`` in ``t.agg``: under its values when the audit verified it or only
    abstained on it (then every column equals its envelope field, else column_mismatch would
    have failed it), by hour only when it failed (``flagged``: never under the values it
    shows).  The hour is the stored ``recorded_at`` (0 when unreadable)."""
    at = r.recorded_at if type(r.recorded_at) is int else 0
    hour = at - at % HOUR_US
    k = (hour, None, None, None, None, None, "flagged") if disposition == "flagged" else (
        hour, r.kind, r.status, r.engine, r.producer, r.att_verdict, disposition)
    agg = t.agg
    if agg is not None:
        agg[k] = agg.get(k, 0) + 1


def _tally(t: Tally, outcome: Any, r: Any = None) -> None:
    t.rows += 1
    t.findings += [x.to_dict() for x in outcome.gap_findings]
    if not outcome.findings and not outcome.abstentions:
        t.verified += 1
        if r is not None:
            _count(t, r, "verified")
        return
    if outcome.disposition == "failed":
        t.failed += 1
        if r is not None:
            _count(t, r, "flagged")
    else:  # abstained: a row with findings or abstentions is never verified
        t.unverified += 1
        if r is not None:
            _count(t, r, "unverified")
    t.findings += [x.to_dict() for x in outcome.findings]
    t.abstentions += [x.to_dict() for x in outcome.abstentions]


def join_gaps(findings: list[dict[str, Any]], bounds: list[int]) -> None:
    """Make the findings of a range audited in parts ``[bounds[i], bounds[i + 1])`` read as
    one worker reports them: a run of deleted rows that crosses a part boundary is one
    ``seq_gap``, and a gap that ends a part ends where the next part's first row stands.

    A part reports the gap at its end with ``actual`` None (no row after it in its range)
    and the gap at its start with ``seq`` = its first seq.  Changes ``findings`` in place."""
    gaps = [f for f in findings if f["code"] == "seq_gap"]
    open_gap: dict[str, Any] | None = None  # the gap open up to the boundary ahead
    for lo, hi in pairwise(bounds):
        if lo == hi:  # an empty part reports nothing
            continue
        if open_gap is not None:
            head = next((f for f in gaps if f["seq"] == lo and f is not open_gap), None)
            if head is None:  # the part's first row stands at lo
                open_gap["actual"] = lo
                open_gap = None
            else:
                findings.remove(head)
                gaps.remove(head)
                upto = head["actual"] if head["actual"] is not None else hi
                open_gap["actual"] = head["actual"]
                open_gap["message"] = f"entries {open_gap['seq']}..{upto - 1} are missing"
                if head["actual"] is not None:
                    open_gap = None
        if open_gap is None:
            open_gap = next((f for f in gaps if f["actual"] is None and lo <= f["seq"] < hi),
                            None)


# -- parallel parts ---------------------------------------------------------------
# A parallel audit splits its range into parts, one worker process each.  A worker sends
# its progress after every page through one queue (part, next seq, counts so far, the
# findings and abstentions new since its last message, its walk's state); the parent is
# the only writer of the run's row, saves every PROGRESS_EVERY rows, and so a parallel run
# is resumable part by part like a sequential one (docs/audit.md).
_PROGRESS: Any = None  # the queue, in a worker process
_DONE = "done"  # the message that a part's worker has returned (or raised)


def _init_worker(progress: Any) -> None:
    global _PROGRESS
    _PROGRESS = progress


def auto_workers() -> int:
    """The processors this process may run on (``--workers auto``), at most 64."""
    try:
        n = len(os.sched_getaffinity(0))
    except AttributeError:  # not on every platform
        n = os.cpu_count() or 1
    return max(1, min(64, n))


def _worker(args: tuple[Any, ...]) -> Tally:
    part, url, ledger_id, start, end, policy_path, check_att, state = args
    from ledger.store.db import make_engine

    sent = [0, 0]  # findings, abstentions already sent

    def on_page(pos: int, tally: Tally, auditor: ChainAuditor) -> None:
        if _PROGRESS is None:
            return
        _PROGRESS.put((part, pos, tally.counts(), tally.findings[sent[0]:],
                       tally.abstentions[sent[1]:], bool(auditor.prev_failed_hash)))
        sent[:] = [len(tally.findings), len(tally.abstentions)]

    engine = make_engine(url)
    try:
        store = load_trust_store(engine) if check_att else None
        return audit_range(engine, ledger_id, start, end, _policy(policy_path), store,
                           on_page=on_page, state=state)
    finally:
        engine.dispose()


def split(start: int, end: int, workers: int) -> list[dict[str, Any]]:
    """The parts of a new parallel run over ``[start, end)``."""
    bounds = [start + (end - start) * i // workers for i in range(workers + 1)]
    return [{"start": lo, "end": hi, "next_seq": lo, "state": {}}
            for lo, hi in pairwise(bounds)]


def _run_parts(engine: Any, ledger_id: str, run_id: int | None, parts: list[dict[str, Any]],
               base: Tally, opts: AuditOptions, progress: Callable[[int], None] | None,
               ) -> Tally:
    """Audit every part of ``parts`` not yet done, one process each; ``base`` is what the
    run saved before (a resumed run).  Returns the whole run's tally, gaps joined, and
    leaves the run complete."""
    todo = [i for i, p in enumerate(parts) if p["next_seq"] < p["end"]]
    # aggregates only when every part is walked whole in this session
    parts_fresh = all(p["next_seq"] == p["start"] for p in parts) and base.agg is not None
    live = {i: Tally() for i in todo}  # each part's counts and findings in this session
    unsaved: list[tuple[str, dict[str, Any]]] = []
    since_save = 0
    url = engine.url.render_as_string(hide_password=False)
    method = "fork" if "fork" in mp.get_all_start_methods() else "spawn"
    mpc = mp.get_context(method)
    pipe = mpc.Queue()

    def moved(i: int, pos: int, counts: dict[str, int], found: list[dict[str, Any]],
              abst: list[dict[str, Any]], failed_hash: bool) -> None:
        nonlocal since_save
        t = live[i]
        delta = counts["rows"] - t.rows
        t.rows, t.verified = counts["rows"], counts["verified"]
        t.failed, t.unverified = counts["failed"], counts["unverified"]
        t.findings += found
        t.abstentions += abst
        unsaved.extend([("finding", f) for f in found] + [("abstention", a) for a in abst])
        parts[i]["next_seq"] = pos
        parts[i]["state"] = {"prev_failed_hash": failed_hash}
        since_save += delta
        if progress and delta:
            progress(delta)

    def whole() -> Tally:
        t = Tally(agg={} if parts_fresh else None)
        t.add(base)
        for part in live.values():
            t.add(part)
        return t

    with mpc.Pool(max(1, len(todo)), initializer=_init_worker, initargs=(pipe,)) as pool:
        # a finished part says so through the same queue (the pool's result thread runs the
        # callbacks), so the loop below blocks on one queue and wakes for either
        running = {i: pool.apply_async(
            _worker, ((i, url, ledger_id, parts[i]["next_seq"], parts[i]["end"],
                       opts.policy_path, opts.check_attestations, parts[i]["state"]),),
            callback=lambda _r, i=i: pipe.put((_DONE, i)),
            error_callback=lambda _e, i=i: pipe.put((_DONE, i))) for i in todo}
        while running:
            msg = pipe.get()
            if msg[0] == _DONE:
                i = msg[1]
                final = running.pop(i).get()  # a worker's error is raised here
                t = live[i]
                t.agg = final.agg
                moved(i, parts[i]["end"], final.counts(), final.findings[len(t.findings):],
                      final.abstentions[len(t.abstentions):], False)
            elif msg[0] in running:  # (a late message of a finished part: the result has it)
                moved(*msg)
            if since_save >= PROGRESS_EVERY and running and run_id is not None:
                _save_parts(engine, run_id, parts, whole(), unsaved)
                unsaved, since_save = [], 0
    tally = whole()
    join_gaps(tally.findings, [p["start"] for p in parts] + [parts[-1]["end"]])
    if run_id is not None:  # (None: a read-only replica, nothing saved)
        _save_parts(engine, run_id, parts, tally, None)
    return tally


def check_head(conn: Connection, h: repo.Head | None) -> list[Finding]:
    """The head row ``h`` (as the audit read it; None when it is gone) against the
    entries: catches a deleted head, a lone head edit or rows past it."""
    if h is None:
        return [Finding("head_missing", 0, TRUNCATED, "the head row is missing")]
    out: list[Finding] = []
    max_seq = repo.max_seq(conn)
    rows = 0 if max_seq is None else max_seq + 1
    if rows > h.size:
        out.append(Finding("entries_beyond_head", h.size, FORKED,
                           "entries exist past the recorded head (inserted behind the "
                           "append path)", h.size, rows))
    elif rows < h.size:
        out.append(Finding("head_beyond_entries", rows, TRUNCATED,
                           "the head records more entries than exist", h.size, rows))
    elif rows:
        last = repo.entry_hash_at(conn, rows - 1)
        if last != h.head_hash:
            out.append(Finding("head_hash_mismatch", rows - 1, FORKED,
                               "the head hash is not the last entry's hash",
                               hash_hex(h.head_hash), hash_hex(last) if last else None))
    return out


def _ledger_keys(paths: tuple[str, ...]) -> list[PublicKeyRef] | None:
    """The ledger public keys of ``--key`` (None: none given).  Raises KeyringError."""
    return [ref for p in paths for ref in load_public_keys(p)] if paths else None


def run_audit(ctx: LedgerContext, opts: AuditOptions,
              progress: Callable[[int], None] | None = None) -> dict[str, Any]:
    """Run an audit and return its report (see docs/audit.md for the format)."""
    policy = _policy(opts.policy_path)
    started = ctx.clock.now_us()
    engine = ctx.engine
    with connect(engine) as conn:
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
            start, pre = _since_last(conn, ctx)
        end = min(opts.end, size) if opts.end is not None else max(
            size, 0 if max_seq is None else max_seq + 1)
        head_findings = check_head(conn, h) if opts.end is None else []
    if start < 0 or start > end:
        raise UsageError(f"empty or invalid range [{start}, {end})", field="from")
    store = load_trust_store(engine) if opts.check_attestations else None
    tally, state, parts = Tally(), {}, None
    if opts.resume:
        run_id, start, tally, state, parts = _resume(engine, opts)
        end = opts.end if opts.end is not None else end
        policy = _policy(opts.policy_path)
        store = load_trust_store(engine) if opts.check_attestations else None
    else:
        if opts.workers > 1 and end - start > opts.workers:
            parts = split(start, end, opts.workers)
        run_id = None if read_only else _new_run(engine, ctx, opts, start, end, parts)
    if parts:
        tally = _run_parts(engine, ctx.meta.ledger_id, run_id, parts, tally, opts, progress)
    else:
        saver = None if run_id is None else _saver(engine, run_id, tally)
        tally.add(audit_range(engine, ctx.meta.ledger_id, start, end, policy, store,
                              progress, saver, state))
        if run_id is not None:
            _finish_run(engine, run_id, end, tally)
    if tally.agg is not None and run_id is not None:  # (an unrecorded run stores nothing)
        _save_aggregates(engine, run_id, tally.agg)
    add_custody_findings(tally, engine, opts.start if not opts.since_last else start, end,
                         ctx.meta.ledger_id, _ledger_keys(opts.keys))
    tally.findings += [f.to_dict() for f in pre + head_findings]  # ledger-level, not rows
    report = {
        "format": REPORT_FORMAT, "ledger_id": ctx.meta.ledger_id, "origin": ctx.meta.origin,
        "range": {"start": opts.start if not opts.since_last else start, "end": end},
        "summary": tally.counts(), "findings": sorted(tally.findings, key=lambda f: f["seq"]),
        "abstentions": tally.abstentions, "policy": policy.source,
        "attestations_checked": opts.check_attestations,
        "workers": len(parts) if parts else opts.workers,
        "started_at": format_us(started), "finished_at": format_us(ctx.clock.now_us()),
        "run_id": run_id,
    }
    if read_only:
        report["read_only_replica"] = True
    if opts.checkpoints:
        from ledger.ops.audit.checkpoints import apply_checkpoints

        apply_checkpoints(ctx, report, opts.checkpoints, opts.keys)
        if opts.anchor_policy is not None:
            from ledger.ops.checkpoint import apply_anchor_policy

            apply_anchor_policy(ctx, report, opts.checkpoints, opts.anchor_policy)
    report["outcome"] = outcome(report)
    if opts.record:
        report["recorded_seq"] = record_run(ctx, report, opts.producer)
    return report


# -- since-last, resume, record -------------------------------------------------
AUDIT_RUN_V1 = "ledger-audit-run/1"
AUDIT_RUN_V2 = "ledger-audit-run/2"  # /1 plus the abstention counts (docs/format.md §10.2)


def is_baseline(doc: dict[str, Any]) -> bool:
    """Whether a recorded audit run sets a ``--since-last`` baseline: it passed, or (a
    ``ledger-audit-run/2`` document) it had no finding and every abstention was a payload
    erased by a redaction (:func:`ledger.core.finding.only_redactions`)."""
    if doc.get("outcome") == "passed":
        return True
    counts = (doc.get("findings"), doc.get("abstentions"), doc.get("redacted"))
    return doc.get("format") == AUDIT_RUN_V2 and doc.get("outcome") == "unverified" \
        and all(type(c) is int for c in counts) and counts[0] == 0 \
        and counts[1] == counts[2] and counts[1] > 0


def _since_last(conn: Connection, ctx: LedgerContext) -> tuple[int, list[Finding]]:
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


def _new_run(engine: Any, ctx: LedgerContext, opts: AuditOptions, start: int, end: int,
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


def _saver(engine: Any, run_id: int, base: Tally) -> Callable[[int, Tally, ChainAuditor], None]:
    """Progress saver for one segment; ``base`` is what earlier segments (a resumed
    run) already saved, so the stored counts always cover the whole run."""
    saved = {"findings": len(base.findings), "abstentions": len(base.abstentions),
             "at": base.rows}

    def save(pos: int, segment: Tally, auditor: ChainAuditor) -> None:
        if base.rows + segment.rows - saved["at"] < PROGRESS_EVERY:
            return
        whole = Tally(agg=None)  # progress only: the counts are saved once, at the end
        whole.add(base)
        whole.add(segment)
        _save(engine, run_id, pos, whole, auditor, saved)
    return save


def _save(engine: Any, run_id: int, pos: int, tally: Tally, auditor: ChainAuditor | None,
          saved: dict[str, int], state: str = "running") -> None:
    rows = [{"run_id": run_id, "seq": f["seq"], "kind": "finding", "body": json.dumps(f)}
            for f in tally.findings[saved["findings"]:]]
    rows += [{"run_id": run_id, "seq": a["seq"], "kind": "abstention", "body": json.dumps(a)}
             for a in tally.abstentions[saved["abstentions"]:]]
    st = {"prev_failed_hash": bool(auditor and auditor.prev_failed_hash)}
    with transaction(engine) as conn:
        runs.add_findings(conn, rows)
        opts = json.loads(runs.run_options(conn, run_id))
        opts["state"] = st
        runs.update_run(conn, run_id, next_seq=pos, counts=json.dumps(tally.counts()),
                        state=state, options=json.dumps(opts), updated_at=_now_us())
    saved.update(findings=len(tally.findings), abstentions=len(tally.abstentions),
                 at=tally.rows)


def _save_aggregates(engine: Any, run_id: int, agg: dict[tuple[Any, ...], int]) -> None:
    """Store the run's counts (``audit_aggregates``); once, after the run is complete.  A
    database that refuses them (a role without INSERT on the table) costs the charts these
    counts, not the audit its report."""
    try:
        with transaction(engine) as conn:
            runs.add_aggregates(conn, run_id, agg)
    except LedgerError:
        return


def _now_us() -> int:
    from ledger.clock import SystemClock

    return SystemClock().now_us()


def _finish_run(engine: Any, run_id: int, end: int, tally: Tally) -> None:
    with connect(engine) as conn:
        saved = runs.count_findings(conn, run_id, "finding")
        saved_a = runs.count_findings(conn, run_id, "abstention")
    _save(engine, run_id, end, tally, None, {"findings": saved, "abstentions": saved_a,
                                             "at": 0}, state="complete")


def _save_parts(engine: Any, run_id: int, parts: list[dict[str, Any]], tally: Tally,
                unsaved: list[tuple[str, dict[str, Any]]] | None) -> None:
    """Save a parallel run: each part's position and walk state, the whole run's counts,
    and the findings and abstentions in ``unsaved``; ``unsaved`` None: the run is complete
    and ``tally`` holds all of them (gaps joined), which replace what was saved."""
    done = unsaved is None
    if unsaved is None:
        unsaved = [("finding", f) for f in tally.findings]
        unsaved += [("abstention", a) for a in tally.abstentions]
    rows = [{"run_id": run_id, "seq": body["seq"], "kind": kind, "body": json.dumps(body)}
            for kind, body in unsaved]
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
                        updated_at=_now_us())


def _resume(engine: Any, opts: AuditOptions,
            ) -> tuple[int, int, Tally, dict[str, Any], list[dict[str, Any]] | None]:
    with connect(engine) as conn:
        run = runs.latest_running(conn)
        if run is None:
            raise UsageError("no interrupted audit run to resume", code="nothing_to_resume",
                             field="resume")
        tally = Tally(**json.loads(run.counts), agg=None)  # walked in part before
        for kind, body in runs.run_findings(conn, run.id):
            (tally.findings if kind == "finding" else tally.abstentions).append(json.loads(body))
    saved = json.loads(run.options)
    opts.start, opts.end = run.range_start, run.range_end
    opts.policy_path, opts.check_attestations = saved.get("policy"), saved.get(
        "attestations", True)
    state = saved.get("state", {})
    parts = saved.get("parts")
    if parts is not None and not _parts_ok(parts, run.range_start, run.range_end):
        raise UsageError(f"audit run {run.id} cannot be resumed: its saved parts are not "
                         "contiguous ranges that cover the run's range; start a new audit",
                         code="resume_state_invalid", field="resume")
    return int(run.id), int(run.next_seq), tally, state, parts


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


def record_run(ctx: LedgerContext, report: dict[str, Any], producer: str | None) -> int:
    """Append an ``audit_run`` entry: the summary, the range, and the report digest."""
    body = json.dumps(report, sort_keys=True, separators=(",", ":")).encode()
    end = report["range"]["end"]
    head_hash = None
    if end:
        with connect(ctx.engine) as conn:
            h = repo.entry_hash_at(conn, end - 1)
            head_hash = hash_hex(h) if h is not None else None
    abstentions = report["abstentions"]
    doc = {"format": AUDIT_RUN_V2, "range": report["range"],
           "summary": report["summary"], "findings": len(report["findings"]),
           "abstentions": len(abstentions),
           "redacted": sum(1 for a in abstentions if a.get("reason") == REDACTED),
           "outcome": report["outcome"], "head_hash": head_hash,
           "report_digest": digest_text(body),
           "finished_at": report["finished_at"]}
    ev = prepare_event("audit_run", {"outcome": report["outcome"], "producer": producer},
                       "report", doc)
    res = commit_batch(ctx.engine, ctx.meta.ledger_id, ctx.clock, [ev])
    return int(res[0].seq)  # type: ignore[arg-type]
