"""``retention apply``: erase what a ``ledger-retention/1`` policy says has expired.

The walk reads the result entries older than the shortest erase-after of the policy in
keyset pages, plans each page like a redaction (held entries and payloads already erased
are skipped, never refused), and commits each page's erasures as redaction entries in
one transaction.  It is resumable by construction: a rerun after an interruption finds
the payloads already erased and goes on with the rest.

With a ``tenant`` the walk reads that tenant's result entries only and its redaction
entries join that tenant's chain (docs/tenants.md, "Custody per tenant"); without one it
walks every tenant's entries and its redaction entries join the default chain.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ledger.core.digest import digest_text
from ledger.core.entry import SLOTS
from ledger.core.retention import DAY_US, RetentionPolicy, parse_retention
from ledger.core.tenant import check_tenant
from ledger.crypto.keys import Keyring
from ledger.crypto.tokens import JwtSigner
from ledger.errors import RedactionRefused, UsageError
from ledger.ops.context import LedgerContext
from ledger.ops.custody.redaction import (
    Ask,
    Target,
    commit_requests,
    load_holds,
    redaction_signer,
    requests_for,
)
from ledger.store import custody
from ledger.store.db import connect

PAGE = 1000
RACE_RETRIES = 3  # re-plans of a page whose commit a newly appended hold refused


def load_retention(path: str | Path | None) -> RetentionPolicy | None:
    """The policy in the file at ``path`` (None: no policy).  Raises UsageError."""
    if path is None:
        return None
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise UsageError(f"cannot read retention policy {path}: {exc.strerror}",
                         code="bad_retention", field="policy") from None
    return parse_retention(data, source=f"{Path(path).name} {digest_text(data)}")


@dataclass
class RetentionRun:
    """What ``retention apply`` did (or would do, ``dry_run``)."""

    dry_run: bool
    scanned: int = 0
    entries: int = 0
    payloads: int = 0
    held: int = 0
    redaction_seqs: list[int] = field(default_factory=list)
    lines: list[dict[str, Any]] = field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        return {"dry_run": self.dry_run, "scanned": self.scanned, "entries": self.entries,
                "payloads": self.payloads, "skipped_held": self.held,
                "redaction_seqs": self.redaction_seqs}


def apply_retention(ctx: LedgerContext, policy: RetentionPolicy, *, dry_run: bool = False,
                    producer: str | None = None, role: str = "operator",
                    progress: Callable[[int, int], None] | None = None,
                    keyring: Keyring | None = None, tenant: str | None = None,
                    ) -> RetentionRun:
    """Erase every payload whose erase-after has passed (see the module docstring), of the
    entries of ``tenant`` only when it is given.  ``progress(done, total)`` after each
    page.  The redaction entries are signed by the ledger key of ``keyring`` (required
    unless ``dry_run``)."""
    if tenant is not None:
        check_tenant(tenant)
    signer = None if dry_run else redaction_signer(ctx, keyring)
    now = ctx.clock.now_us()
    run = RetentionRun(dry_run)
    days = [r.erase_after_days for r in policy.rules if r.erase_after_days is not None]
    if not days:
        return run
    cutoff = now - min(days) * DAY_US
    ask = Ask(f"retention policy ({policy.source}): erase after the retention period",
              "ledger-retention/1", None, role, producer, tenant)
    with connect(ctx.engine) as conn:
        total = custody.count_results_before(conn, cutoff, tenant)
    after = -1
    while True:
        for attempt in range(RACE_RETRIES + 1):
            with connect(ctx.engine) as conn:
                heads = custody.result_heads_before(conn, cutoff, after, PAGE, tenant)
                if not heads:
                    return run
                seqs = [h.seq for h in heads]
                present = custody.present_slots(conn, seqs)
                holds = load_holds(conn)
            held_before = run.held
            targets = _page_targets(policy, heads, present, holds, now, run)
            try:
                if targets:
                    _commit_page(ctx, targets, ask, run, signer)
                break
            except RedactionRefused as exc:
                # a hold appended since the page was planned (the check under the lock
                # refused the whole page): plan the page again with the holds now in force
                run.held = held_before
                if exc.code != "entry_on_hold" or attempt == RACE_RETRIES:
                    raise
        run.scanned += len(heads)
        after = heads[-1].seq
        if progress:
            progress(run.scanned, total)


def _page_targets(policy: RetentionPolicy, heads: list[Any], present: dict[int, set[int]],
                  holds: Any, now: int, run: RetentionRun) -> list[Target]:
    slot_name = {s: n for n, s in SLOTS.items()}
    out = []
    for h in heads:
        stored = [slot_name[s] for s in present.get(h.seq, ()) if s in slot_name]
        due = policy.expired(h.engine, stored, h.recorded_at, now)
        if not due:
            continue
        if holds.holding(h.seq):
            run.held += 1
            continue
        out.append(Target(h.seq, tuple(due)))
    return out


def _commit_page(ctx: LedgerContext, targets: list[Target], ask: Ask, run: RetentionRun,
                 signer: JwtSigner | None) -> None:
    reqs = requests_for(targets, ask, keep_attestation=True, override_minimum=None)
    seqs: list[int | None] = [None] * len(reqs)
    if signer is not None:
        seqs = list(commit_requests(ctx, reqs, ask, signer))
        run.redaction_seqs += [s for s in seqs if s is not None]
    for req, rseq in zip(reqs, seqs, strict=False):
        for seq, names in req.targets:
            run.entries += 1
            run.payloads += len(names)
            run.lines.append({"seq": seq, "payloads": list(names), "redaction_seq": rseq,
                              "dry_run": run.dry_run})
