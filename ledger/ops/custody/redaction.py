"""Redaction and legal holds: data-subject requests as entries of the chain.

``redact`` resolves the entries (by subject and/or seqs), decides per entry which
payloads are erased (``all``: every payload present; a query takes its attestation
along unless it is kept on purpose), refuses what must not be erased (an entry under a
legal hold, a payload still under its minimum retention without an override), and then
appends the ``redaction`` entries and deletes the payload bytes in ONE transaction
(``ledger.ops.append.commit_redaction``).  ``hold_add`` / ``hold_release`` append
``hold`` entries.  docs/redaction.md has the model.

An ``Ask`` with a ``tenant`` is scoped to it (docs/tenants.md, "Custody per tenant"): only
that tenant's entries are targets (another tenant's seq is answered exactly as a seq that
does not exist, a subject resolves to the tenant's entries only), its redaction and hold
entries join that tenant's chain, and it releases only the holds placed in its tenant.
An ``Ask`` without a tenant is operator-level: every tenant's entries, entries of the
default tenant's chain.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ledger.core.entry import SLOTS
from ledger.core.redaction import (
    MAX_TARGETS,
    ROLES,
    Holds,
    RedactionRequest,
    build_hold,
    build_request,
    check_text,
    fold_hold_entries,
    payload_names,
)
from ledger.core.retention import RetentionPolicy
from ledger.core.tenant import DEFAULT_TENANT, check_tenant
from ledger.crypto.keys import Keyring
from ledger.crypto.redaction_sign import sign_request
from ledger.crypto.tokens import JwtSigner, ledger_signer
from ledger.errors import Forbidden, KeyringError, NotFound, RedactionRefused, UsageError
from ledger.ops.append import (
    Prepared,
    check_producer,
    commit_batch,
    commit_redaction,
    prepare_event,
)
from ledger.ops.context import LedgerContext
from ledger.store import custody, entries
from ledger.store.append import AppendTxn
from ledger.store.db import connect


@dataclass(frozen=True)
class Target:
    """One entry of a redaction: the payloads erased now, and those already gone."""

    seq: int
    erase: tuple[str, ...]
    already: tuple[str, ...] = ()


@dataclass
class RedactionOutcome:
    """What a redaction did (or, ``dry_run``, would do)."""

    dry_run: bool
    targets: list[Target]
    requests: list[RedactionRequest] = field(default_factory=list)
    redaction_seqs: list[int] = field(default_factory=list)
    erased_at_us: int | None = None

    def lines(self) -> list[dict[str, Any]]:
        """One JSON object per entry (the CLI prints one line each)."""
        by_seq = {}
        seqs: Sequence[int | None] = self.redaction_seqs or [None] * len(self.requests)
        for req, rseq in zip(self.requests, seqs, strict=False):
            for seq, _ in req.targets:
                by_seq[seq] = rseq
        return [{"seq": t.seq, "payloads": list(t.erase), "already_erased": list(t.already),
                 "redaction_seq": by_seq.get(t.seq), "dry_run": self.dry_run}
                for t in self.targets]


@dataclass(frozen=True)
class Ask:
    """Who asks, and why (recorded in every redaction or hold entry)."""

    reason: str
    reference: str | None = None
    requested_by: str | None = None
    role: str = "operator"
    producer: str | None = None
    tenant: str | None = None  # None: operator-level (every tenant; default chain)

    @property
    def chain(self) -> str:
        """The tenant whose chain the entries of this ask join."""
        return self.tenant if self.tenant is not None else DEFAULT_TENANT


def _check_ask(ask: Ask, code: str = "bad_redaction") -> None:
    check_text(ask.reason, "reason", required=True, code=code)
    check_text(ask.reference, "reference", required=False, code=code)
    check_text(ask.requested_by, "requested_by", required=False, code=code)
    check_producer(ask.producer)
    if ask.tenant is not None:
        check_tenant(ask.tenant)
    if ask.role not in ROLES:
        raise UsageError(f"role must be one of {', '.join(ROLES)}", code="bad_role",
                         field="role")


def _holds_of(rows: Iterable[tuple[int, bytes, bytes | None]]) -> Holds:
    parsed = []
    for seq, envelope, doc in rows:
        try:
            env = json.loads(envelope)
        except ValueError:
            env = None
        parsed.append((seq, env if isinstance(env, dict) else {}, doc))
    return fold_hold_entries(parsed)


def load_holds(conn: Any) -> Holds:
    """The legal holds in force now (the fold of every hold entry; a hold whose order
    cannot be read holds every entry before it: ``ledger.core.redaction.Holds``)."""
    return _holds_of(custody.documents(conn, "hold"))


def refuse_held(holds: Holds, seqs: Iterable[int]) -> None:
    """Raise RedactionRefused (``entry_on_hold``) for the first of ``seqs`` that a hold in
    force holds."""
    for seq in seqs:
        held = holds.holding(seq)
        if not held:
            continue
        why = holds.unreadable.get(held[0])
        if why is None:
            msg = f"entry {seq} is under legal hold {held[0]}"
        else:
            msg = (f"entry {seq} may be under legal hold {held[0]}, whose order cannot be "
                   f"read ({why}); an unreadable hold holds every earlier entry")
        raise RedactionRefused(f"{msg} (release it with `ledger hold release {held[0]}`)",
                               code="entry_on_hold", field="seq",
                               detail={"seq": seq, "hold_seq": held[0],
                                       "hold_unreadable": why is not None})


def _check_holds_in(txn: AppendTxn, seqs: Sequence[int]) -> None:
    refuse_held(_holds_of(txn.documents("hold")), seqs)


def resolve_seqs(conn: Any, subject: str | None, seqs: Iterable[int],
                 tenant: str | None = None) -> list[int]:
    """The target seqs: every result entry of ``subject`` (of ``tenant`` only, when given)
    and the given ``seqs`` (checked against the tenant by the caller, as a missing seq)."""
    out = set(seqs)
    if subject is not None:
        check_text(subject, "subject", required=True)
        size = entries.read_head(conn).size  # type: ignore[union-attr]
        found = entries.subject_seqs(conn, subject, end=size)
        if tenant is not None:
            mine = custody.tenants_of(conn, found)
            found = [s for s in found if mine.get(s) == tenant]
        out.update(found)
    return sorted(out)


def heads_of(conn: Any, seqs: Sequence[int], tenant: str | None) -> dict[int, Any]:
    """seq -> stored head of the seqs that exist, and are ``tenant``'s when it is given:
    another tenant's entry is left out exactly as a seq that does not exist."""
    heads = custody.entry_heads(conn, seqs)
    if tenant is None:
        return heads
    return {s: h for s, h in heads.items() if h.tenant == tenant}


def plan(ctx: LedgerContext, conn: Any, seqs: Sequence[int], names: tuple[str, ...] | None,
         *, keep_attestation: bool = False, retention: RetentionPolicy | None = None,
         override_minimum: str | None = None, holds: Holds | None = None,
         tenant: str | None = None) -> list[Target]:
    """The erasures a redaction of ``seqs`` (``names``: None = all) performs.  Raises
    NotFound (no such entry, or one not of ``tenant`` when it is given), UsageError (not a
    result entry; a named payload that no target commits to), RedactionRefused (a legal
    hold; a minimum retention without override)."""
    heads = heads_of(conn, seqs, tenant)
    present = custody.present_slots(conn, seqs)
    holds = holds if holds is not None else load_holds(conn)
    now = ctx.clock.now_us()
    slot_name = {s: n for n, s in SLOTS.items()}
    out = []
    named: set[str] = set()  # payload names some target commits to
    for seq in seqs:
        h = heads.get(seq)
        if h is None:
            raise NotFound(f"no entry with seq {seq}", code="no_such_entry", field="seq")
        if h.kind != "result":
            raise UsageError(f"entry {seq} is a {h.kind} entry; only result entries are "
                             "redacted", code="not_redactable", field="seq")
        refuse_held(holds, [seq])
        committed = committed_names(h.envelope)
        wanted = committed if names is None else committed & set(names)
        if "query" in wanted and not keep_attestation and "attestation" in committed:
            wanted.add("attestation")  # the token binds the query's unsalted hash
        stored = {slot_name[s] for s in present.get(seq, ()) if s in slot_name}
        erase = sorted(wanted & stored)
        if retention is not None and override_minimum is None:
            _check_minimum(retention, seq, h, erase, now)
        if erase or wanted:
            out.append(Target(seq, tuple(erase), tuple(sorted(wanted - stored))))
        named.update(committed)
    unknown = sorted(set(names or ()) - named)
    if unknown and seqs:
        which = f"entry {seqs[0]}" if len(seqs) == 1 else f"any of the {len(seqs)} entries"
        kind = "evidence" if unknown[0] == "preimage" else unknown[0]
        raise UsageError(f"payload {kind} names nothing: {which} has no {kind} payload",
                         code="no_such_payload", field="payload",
                         detail={"payload": kind, "seqs": list(seqs)[:MAX_TARGETS]})
    return out


def committed_names(envelope: bytes) -> set[str]:
    """The payload names an envelope commits to (non-null)."""
    try:
        payloads = json.loads(envelope).get("payloads") or {}
    except (ValueError, AttributeError):
        return set()
    return {n for n, c in payloads.items() if c is not None and n in SLOTS}


def _check_minimum(policy: RetentionPolicy, seq: int, h: Any, names: list[str],
                   now: int) -> None:
    for name in names:
        days = policy.under_minimum(h.engine, name, h.recorded_at, now)
        if days is not None:
            raise RedactionRefused(
                f"payload {name} of entry {seq} is under its minimum retention of {days} "
                "days; give --override-minimum REASON to erase it anyway",
                code="minimum_retention", field="seq",
                detail={"seq": seq, "payload": name, "minimum_days": days})


def requests_for(targets: Sequence[Target], ask: Ask, *, keep_attestation: bool,
                 override_minimum: str | None) -> list[RedactionRequest]:
    """The unsigned request documents of ``targets`` (at most MAX_TARGETS each)."""
    todo = [t for t in targets if t.erase]
    return [build_request({t.seq: t.erase for t in todo[i:i + MAX_TARGETS]}, ask.reason,
                          reference=ask.reference, requested_by=ask.requested_by,
                          keep_attestation=keep_attestation,
                          override_minimum=override_minimum)
            for i in range(0, len(todo), MAX_TARGETS)]


def redaction_signer(ctx: LedgerContext, keyring: Keyring | None) -> JwtSigner:
    """The signer of redaction requests: the ledger's active key.  Raises KeyringError
    (exit 2 / 400) when no keyring is given or it has no active key for this ledger."""
    if keyring is None:
        raise KeyringError("a redaction is signed by the ledger key: give the keyring "
                           "(--keys DIR)", code="no_signing_key", field="keys")
    return ledger_signer(keyring, ctx.origin)


def prepare_redaction(req: RedactionRequest, ask: Ask) -> tuple[Prepared, list[tuple[int, str]]]:
    """The redaction entry of ``req`` (in the chain of ``ask.chain``) and its erasures
    ((seq, payload name) pairs)."""
    p = prepare_event("redaction", {"producer": ask.producer, "role": ask.role}, "request",
                      req.to_doc())
    p.tenant = ask.chain
    return p, req.pairs()


def commit_requests(ctx: LedgerContext, reqs: Sequence[RedactionRequest], ask: Ask,
                    signer: JwtSigner) -> list[int]:
    """Sign the requests ``reqs`` (``ledger-redaction/2``, by the ledger key of
    ``signer``), append their redaction entries and erase their payloads in one
    transaction; their seqs.  The legal holds are read again under the append lock, so
    that the check and the erasure are one serialised decision (also across processes):
    raises RedactionRefused (``entry_on_hold``) when a hold appended since the plan holds
    a target, and nothing is written."""
    reqs = [sign_request(signer, ctx.ledger_id, r) for r in reqs]
    pairs = [prepare_redaction(r, ask) for r in reqs]
    seqs = sorted({s for r in reqs for s, _ in r.targets})
    commits = commit_redaction(ctx, [p for p, _ in pairs], [e for _, e in pairs],
                               under_lock=lambda txn: _check_holds_in(txn, seqs))
    return [c.result.seq for c in commits]  # type: ignore[misc]


def redact(ctx: LedgerContext, ask: Ask, *, subject: str | None = None,
           seqs: Iterable[int] = (), payloads: Iterable[str] = ("all",),
           keep_attestation: bool = False, override_minimum: str | None = None,
           retention: RetentionPolicy | None = None, dry_run: bool = False,
           keyring: Keyring | None = None) -> RedactionOutcome:
    """Erase payloads of the entries of ``subject`` and/or ``seqs`` (see the module
    docstring).  Nothing is written when ``dry_run`` or when any target is refused.  The
    redaction entries are signed by the ledger key of ``keyring`` (required unless
    ``dry_run``)."""
    _check_ask(ask)
    signer = None if dry_run else redaction_signer(ctx, keyring)
    check_text(override_minimum, "override_minimum", required=False)
    names = payload_names(payloads)
    with connect(ctx.engine) as conn:
        seqs = resolve_seqs(conn, subject, seqs, ask.tenant)
        if not seqs:
            raise _nothing_matched(subject, "erase")
        targets = plan(ctx, conn, seqs, names, keep_attestation=keep_attestation,
                       retention=retention, override_minimum=override_minimum,
                       tenant=ask.tenant)
    reqs = requests_for(targets, ask, keep_attestation=keep_attestation,
                        override_minimum=override_minimum)
    out = RedactionOutcome(dry_run, targets, reqs)
    if signer is None or not reqs:
        return out
    out.redaction_seqs = commit_requests(ctx, reqs, ask, signer)
    out.erased_at_us = ctx.clock.now_us()
    return out


def _nothing_matched(subject: str | None, what: str) -> UsageError:
    """A redaction or hold that names no entry: refused, nothing written (an erasure report
    of nothing would certify an erasure that did not happen)."""
    if subject is None:
        return UsageError(f"no entries to {what}: give a subject or seqs",
                          code="nothing_matched", field="seq")
    return UsageError(f"no result entry has the subject {subject[:200]!r}: nothing to "
                      f"{what}, nothing was written", code="nothing_matched", field="subject")


# -- legal holds -------------------------------------------------------------------------
def hold_add(ctx: LedgerContext, ask: Ask, *, subject: str | None = None,
             seqs: Iterable[int] = ()) -> int:
    """Put the result entries of ``subject`` and/or ``seqs`` under a legal hold; returns
    the hold entry's seq.  The subject is resolved to the seqs existing now (its text is
    not stored).  With ``ask.tenant``, only that tenant's entries (another tenant's seq is
    answered as a missing one).  Raises UsageError / NotFound."""
    _check_ask(ask, "bad_hold")
    with connect(ctx.engine) as conn:
        targets = resolve_seqs(conn, subject, seqs, ask.tenant)
        if not targets:
            raise _nothing_matched(subject, "hold")
        heads = heads_of(conn, targets, ask.tenant)
    for seq in targets:
        if seq not in heads:
            raise NotFound(f"no entry with seq {seq}", code="no_such_entry", field="seq")
        if heads[seq].kind != "result":
            raise UsageError(f"entry {seq} is a {heads[seq].kind} entry; holds apply to "
                             "result entries", code="bad_hold", field="seq")
    order = build_hold("add", ask.reason, reference=ask.reference, targets=targets)
    return _append_hold(ctx, order, ask)


def hold_release(ctx: LedgerContext, ask: Ask, hold_seq: int) -> int:
    """Release the hold entry ``hold_seq``; returns the release entry's seq.  Raises
    NotFound when ``hold_seq`` is not a hold in force.  With ``ask.tenant``, only a hold
    placed in that tenant is released: another tenant's hold is answered as "not a hold
    entry"; an operator-level hold over the tenant's entries (which the tenant sees in its
    list) is refused with Forbidden ``tenant_scope``."""
    _check_ask(ask, "bad_hold")
    with connect(ctx.engine) as conn:
        holds = load_holds(conn)
        placed = custody.tenants_of(conn, [hold_seq]).get(hold_seq)
        if ask.tenant is not None and placed != ask.tenant:
            visible = placed is not None and holds.in_force(hold_seq) and \
                hold_seq in _visible(conn, holds, ask.tenant)
            if visible:
                raise Forbidden(f"hold {hold_seq} was placed by an operator-level custodian: "
                                "only an operator-level token releases it",
                                code="tenant_scope", field="hold_seq",
                                detail={"rule": "a token with a tenant releases only the "
                                                "holds placed in its tenant"})
            raise NotFound(f"entry {hold_seq} is not a hold entry", code="no_such_hold",
                           field="hold_seq")
    if not holds.in_force(hold_seq):
        why = f"already released by {holds.released[hold_seq]}" \
            if hold_seq in holds.released else "not a hold entry"
        raise NotFound(f"entry {hold_seq} is {why}", code="no_such_hold", field="hold_seq")
    order = build_hold("release", ask.reason, reference=ask.reference, hold_seq=hold_seq)
    return _append_hold(ctx, order, ask)


def _append_hold(ctx: LedgerContext, order: Any, ask: Ask) -> int:
    p = prepare_event("hold", {"action": order.action, "producer": ask.producer,
                               "role": ask.role}, "order", order.to_doc())
    p.tenant = ask.chain
    res = commit_batch(ctx.engine, ctx.ledger_id, ctx.clock, [p])[0]
    if not res.ok:
        raise UsageError(str((res.error or {}).get("message")), code="hold_refused")
    return res.seq  # type: ignore[return-value]


def holds_in_force(ctx: LedgerContext, tenant: str | None = None) -> dict[int, list[int]]:
    """hold seq -> the entries it holds, for every hold in force.  With ``tenant``: the
    holds placed in that tenant or holding any of its entries, each with the tenant's
    entries only (nothing of another tenant: not its holds, not its held entries)."""
    with connect(ctx.engine) as conn:
        holds = load_holds(conn)
        if tenant is None:
            return {h: list(t) for h, t in sorted(holds.active.items())}
        return _visible(conn, holds, tenant)


def _visible(conn: Any, holds: Holds, tenant: str) -> dict[int, list[int]]:
    """The holds in force that ``tenant`` sees (see ``holds_in_force``)."""
    seqs = {s for h, t in holds.active.items() for s in (h, *t)}
    of = custody.tenants_of(conn, sorted(seqs))
    out: dict[int, list[int]] = {}
    for h, targets in sorted(holds.active.items()):
        mine = [s for s in targets if of.get(s) == tenant]
        if mine or of.get(h) == tenant:
            out[h] = mine
    return out
