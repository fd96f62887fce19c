"""Walking a range of entries through the pure checks, in one process or in parts on
worker processes: constant memory (keyset pages of entries and their payloads), progress
saved every ``PROGRESS_EVERY`` rows (``ledger.ops.audit.runs``)."""

from __future__ import annotations

import multiprocessing as mp
from collections.abc import Callable
from typing import Any

from sqlalchemy import Connection

from ledger.clock import Clock
from ledger.core.audit import DELETED, FORKED, TRUNCATED, Anchors, ChainAuditor, Finding
from ledger.core.audit_report import RowCounts
from ledger.core.entry import genesis_hash, hash_hex
from ledger.core.finding import Abstention
from ledger.core.policy import Policy, load_policy
from ledger.core.tenant import DEFAULT_TENANT, tenant_genesis
from ledger.crypto.trust import TrustStore, row_judge
from ledger.errors import TenantError
from ledger.ops.audit.parallel import join_gaps
from ledger.ops.audit.runs import AuditOptions, Unsaved, finish_run, save_parts, save_progress
from ledger.ops.audit.tally import HOUR_US, Tally, tally_row
from ledger.ops.redaction_map import load_redaction_map
from ledger.ops.trust_store import load_trust_store
from ledger.store import entries as repo
from ledger.store.db import connect, is_pg
from ledger.store.tenants import all_heads_at

PAGE = 1000
PROGRESS_EVERY = 20_000


def _anchor(conn: Connection, ledger_id: str, start: int,
            ) -> tuple[bytes | None, int | None, int]:
    """The hash the first default-tenant row must link to, its tseq, and the recorded
    time of the entry before ``start``; no hash when that entry is itself missing (the
    range before reports that gap; there is nothing to link to)."""
    if start == 0:
        return genesis_hash(ledger_id), 0, 0
    link = repo.link_at(conn, start - 1)
    if link is None:
        return None, None, 0
    prev, tseq = tenant_anchors(conn, ledger_id, start)(DEFAULT_TENANT)
    return prev, tseq, link.recorded_at


def tenant_anchors(conn: Connection, ledger_id: str, start: int) -> Anchors:
    """Where each tenant's chain stands before ``start``: the hash of its last entry
    below it and the next tseq (its genesis and 0 when it has none)."""
    def anchor(tenant: str) -> tuple[bytes | None, int | None]:
        last = repo.tenant_last_before(conn, tenant, start) if start else None
        if last is None:
            try:
                return tenant_genesis(ledger_id, tenant), 0
            except TenantError:
                return None, None  # the row's own check reports the tenant
        return last[2], last[1] + 1
    return anchor


def audit_range(engine: Any, ledger_id: str, start: int, end: int, policy: Policy,
                store: TrustStore | None, progress: Callable[[int], None] | None = None,
                on_page: Callable[[int, Tally, ChainAuditor], None] | None = None,
                state: dict[str, Any] | None = None) -> Tally:
    """Audit ``[start, end)`` (the caller checks the head).  Never raises for bad data."""
    tally = Tally()
    with connect(engine) as conn:
        anchor, tseq, last_time = _anchor(conn, ledger_id, start)
        auditor = ChainAuditor(ledger_id, start, anchor, last_time, policy,
                               row_judge(store) if store is not None else None,
                               redactions=load_redaction_map(conn),
                               anchors=tenant_anchors(conn, ledger_id, start))
        auditor.default_tseq = tseq
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
                tally_row(tally, plain(r, blobs), r)
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
                auditor.expected_seq, None).reported())
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
    tenants = check_tenant_heads(conn, h.size)
    if out and {t for t, _ in tenants} | set(repo.read_tenant_heads(conn)) <= {DEFAULT_TENANT}:
        tenants = []  # one tenant: its head is the ledger's head, already reported
    return out + [f for _, f in tenants]


# a tenant's head: (count of its entries, the last one's hash; None when it has none)
HeadPair = tuple[int, "bytes | None"]


def check_tenant_heads(conn: Connection, size: int) -> list[tuple[str, Finding]]:
    """Each ``tenant_heads`` row against its tenant's last entry: a rolled-back or forged
    tenant head would make the next append of that tenant fork its chain.  (tenant,
    finding) pairs."""
    out: list[tuple[str, Finding]] = []
    recorded = repo.read_tenant_heads(conn)
    cur = conn.connection.cursor()
    try:
        actual = {t: (n, h) for t, n, h in all_heads_at(cur, is_pg(conn.engine), size)}
    finally:
        cur.close()
    for tenant in sorted(recorded.keys() | actual.keys()):
        got: HeadPair = recorded.get(tenant, (0, None))
        want: HeadPair = actual.get(tenant, (0, None))
        if (got[0] or want[0]) and got != want:
            last = repo.tenant_last_before(conn, tenant, size)
            out.append((tenant, head_finding(tenant, last[0] if last else 0, got, want,
                                             tenant in recorded)))
    return out


def head_finding(tenant: str, at: int, recorded: HeadPair, actual: HeadPair,
                 has_row: bool = True) -> Finding:
    """``tenant_head_mismatch``: the head ``tenant_heads`` records is not the one its
    entries give (``count hash`` of each)."""
    def text(pair: HeadPair) -> str:
        return f"{pair[0]} {hash_hex(pair[1]) if pair[1] else None}"
    return Finding("tenant_head_mismatch", at, FORKED,
                   f"the head of tenant {tenant} is not its last entry"
                   + ("" if has_row else " (the tenant has no head row)"),
                   text(recorded), text(actual))


def run_whole(engine: Any, ledger_id: str, run_id: int | None, start: int, end: int,
              policy: Policy, store: TrustStore | None, tally: Tally,
              progress: Callable[[int], None] | None, state: dict[str, Any], clock: Clock) -> None:
    """Audit ``[start, end)`` in this process into ``tally`` (which holds what a resumed
    run saved before), saving progress and completing the run ``run_id`` (None: a
    read-only replica, nothing saved)."""
    saver = None if run_id is None else progress_saver(engine, run_id, tally, clock)
    tally.add(audit_range(engine, ledger_id, start, end, policy, store, progress, saver, state))
    if run_id is not None:
        finish_run(engine, run_id, end, tally, clock)


def progress_saver(engine: Any, run_id: int, base: Tally, clock: Clock,
                   ) -> Callable[[int, Tally, ChainAuditor], None]:
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
        save_progress(engine, run_id, pos, whole, auditor, saved, clock=clock)
    return save


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


def _worker(args: tuple[Any, ...]) -> Tally:
    part, url, ledger_id, start, end, policy_path, check_att, state = args
    from ledger.store.db import make_engine

    sent = [0, 0]  # findings, abstentions already sent

    def on_page(pos: int, tally: Tally, auditor: ChainAuditor) -> None:
        if _PROGRESS is None:
            return
        _PROGRESS.put((part, pos, tally.row_counts(), tally.findings[sent[0]:],
                       tally.abstentions[sent[1]:], bool(auditor.prev_failed_hash)))
        sent[:] = [len(tally.findings), len(tally.abstentions)]

    engine = make_engine(url)
    try:
        store = load_trust_store(engine) if check_att else None
        return audit_range(engine, ledger_id, start, end, load_policy(policy_path), store,
                           on_page=on_page, state=state)
    finally:
        engine.dispose()


def _whole(base: Tally, live: dict[int, Tally], fresh: bool) -> Tally:
    """The run's tally: what it saved before (``base``) and every part's in this session;
    aggregates only when ``fresh`` (every part walked whole in this session)."""
    t = Tally(agg={} if fresh else None)
    t.add(base)
    for part in live.values():
        t.add(part)
    return t


def _submit(pool: Any, pipe: Any, i: int, url: str, ledger_id: str, part: dict[str, Any],
            opts: AuditOptions) -> Any:
    """Start part ``i`` on ``pool``; when it ends, well or not, it says so on ``pipe``
    (each call's own ``i`` is what the callbacks close over)."""
    return pool.apply_async(
        _worker, ((i, url, ledger_id, part["next_seq"], part["end"],
                   opts.policy_path, opts.check_attestations, part["state"]),),
        callback=lambda _r: pipe.put((_DONE, i)),
        error_callback=lambda _e: pipe.put((_DONE, i)),
    )


def run_parts(engine: Any, ledger_id: str, run_id: int | None, parts: list[dict[str, Any]],
               base: Tally, opts: AuditOptions, progress: Callable[[int], None] | None,
               clock: Clock) -> Tally:
    """Audit every part of ``parts`` not yet done, one process each; ``base`` is what the
    run saved before (a resumed run).  Returns the whole run's tally, gaps joined, and
    leaves the run complete."""
    todo = [i for i, p in enumerate(parts) if p["next_seq"] < p["end"]]
    # aggregates only when every part is walked whole in this session
    parts_fresh = all(p["next_seq"] == p["start"] for p in parts) and base.agg is not None
    live = {i: Tally() for i in todo}  # each part's counts and findings in this session
    unsaved: Unsaved = []
    since_save = 0
    url = engine.url.render_as_string(hide_password=False)
    method = "fork" if "fork" in mp.get_all_start_methods() else "spawn"
    mpc = mp.get_context(method)
    pipe = mpc.Queue()

    def moved(i: int, pos: int, counts: RowCounts, found: list[Finding],
              abst: list[Abstention], failed_hash: bool) -> None:
        nonlocal since_save
        t = live[i]
        delta = counts.rows - t.rows
        t.rows, t.verified = counts.rows, counts.verified
        t.failed, t.unverified = counts.failed, counts.unverified
        t.findings += found
        t.abstentions += abst
        unsaved.extend([*found, *abst])
        parts[i]["next_seq"] = pos
        parts[i]["state"] = {"prev_failed_hash": failed_hash}
        since_save += delta
        if progress and delta:
            progress(delta)

    with mpc.Pool(max(1, len(todo)), initializer=_init_worker, initargs=(pipe,)) as pool:
        # a finished part says so through the same queue (the pool's result thread runs the
        # callbacks), so the loop below blocks on one queue and wakes for either
        running = {i: _submit(pool, pipe, i, url, ledger_id, parts[i], opts) for i in todo}
        while running:
            msg = pipe.get()
            if msg[0] == _DONE:
                i = msg[1]
                final = running.pop(i).get()  # a worker's error is raised here
                t = live[i]
                t.agg = final.agg
                moved(i, parts[i]["end"], final.row_counts(), final.findings[len(t.findings):],
                      final.abstentions[len(t.abstentions):], False)
            elif msg[0] in running:  # (a late message of a finished part: the result has it)
                moved(*msg)
            if since_save >= PROGRESS_EVERY and running and run_id is not None:
                save_parts(engine, run_id, parts, _whole(base, live, parts_fresh), unsaved, clock)
                unsaved, since_save = [], 0
    tally = _whole(base, live, parts_fresh)
    join_gaps(tally.findings, [p["start"] for p in parts] + [parts[-1]["end"]])
    if run_id is not None:  # (None: a read-only replica, nothing saved)
        save_parts(engine, run_id, parts, tally, None, clock)
    return tally
