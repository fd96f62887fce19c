"""The audit's checks of redaction and hold entries themselves (docs/audit.md).

A walk over the redaction and hold entries in seq order: each document must parse
(``ledger-redaction/2`` or ``/1``, ``ledger-hold/1``), be asked for by an allowed role, name only
result entries earlier than itself -- of its own tenant, when it is in the chain of a tenant
other than ``default`` (a tenant's custodian acts on its tenant's entries only; the operator's
custody entries are in the default chain and may name any) -- and a redaction must not name an
entry under a legal hold in force at its seq.  Whether the erased bytes are really gone (or
still there) is the per-row payload check's business (``redacted`` /
``redaction_not_applied``).  Pure.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from ledger.core.finding import FINDING_CODES, Finding, FindingClass
from ledger.core.redaction import ROLES, Holds, parse_hold, parse_request, read_order
from ledger.core.tenant import DEFAULT_TENANT
from ledger.errors import UsageError

# the codes of this walk, each with its class from the registry (ledger.core.finding)
CODES: dict[str, FindingClass] = {c: FINDING_CODES[c].cls for c in (
    "redaction_invalid", "redaction_role_invalid", "redaction_target_invalid",
    "redaction_of_held_entry", "redaction_under_unreadable_hold", "hold_invalid",
    "hold_role_invalid", "hold_target_invalid")}


@dataclass(frozen=True)
class CustodyEntry:
    """One redaction or hold entry as the walk needs it: its seq, kind, envelope
    (parsed) and its document's bytes (None: not stored or not read)."""

    seq: int
    kind: str
    envelope: dict[str, Any]
    document: bytes | None
    tenant: str = DEFAULT_TENANT  # the chain the entry is in


TenantOf = Callable[[int], "str | None"]  # seq -> the tenant of that entry (None: no entry)
Target = Callable[[int, str], "Finding | None"]  # (target seq, code) -> its finding


def _f(code: str, seq: int, message: str, expected: Any = None, actual: Any = None) -> Finding:
    return Finding(code, seq, CODES[code], message, expected, actual)


def check_custody(entries: Iterable[CustodyEntry], kind_of: Callable[[int], str | None],
                  tenant_of: TenantOf | None = None) -> list[Finding]:
    """Findings about the redaction and hold entries of ``entries`` (seq order).
    ``kind_of(seq)`` is the stored kind of an entry (None: no such entry).  A document
    that is not stored is the payload check's finding, not one of these.  ``tenant_of(seq)``
    is the tenant of an entry (None: not checked)."""
    holds = Holds()
    out: list[Finding] = []
    for e in entries:
        def target(seq: int, code: str, e: CustodyEntry = e) -> Finding | None:
            return _target(e, seq, kind_of, code, tenant_of)
        if e.kind == "hold":
            out += _check_hold(e, holds, target)
        elif e.kind == "redaction":
            out += _check_redaction(e, holds, target)
    return out


def _role(e: CustodyEntry, code: str) -> list[Finding]:
    role = e.envelope.get("role")
    if role not in ROLES:
        return [_f(code, e.seq, f"asked for by role {role!r}, not one of {', '.join(ROLES)}",
                   list(ROLES), role)]
    return []


def _target(e: CustodyEntry, seq: int, kind_of: Callable[[int], str | None],
            code: str, tenant_of: TenantOf | None) -> Finding | None:
    if seq >= e.seq:
        return _f(code, e.seq, f"target {seq} is not earlier than the entry itself",
                  f"< {e.seq}", seq)
    kind = kind_of(seq)
    if kind != "result":
        what = "does not exist" if kind is None else f"is a {kind} entry, not a result"
        return _f(code, e.seq, f"target {seq} {what}", "result", kind)
    if e.tenant != DEFAULT_TENANT and tenant_of is not None and tenant_of(seq) != e.tenant:
        # the other tenant is not named: a tenant's own audit must not learn of it
        return _f(code, e.seq, f"target {seq} is not an entry of tenant {e.tenant!r}, whose "
                  "chain this entry is in", e.tenant, "another tenant")
    return None


def _check_redaction(e: CustodyEntry, holds: Holds, target: Target) -> list[Finding]:
    out = _role(e, "redaction_role_invalid")
    if e.document is None:
        return out
    try:
        req = parse_request(e.document)
    except UsageError as exc:
        return out + [_f("redaction_invalid", e.seq, f"the request document: {exc.message}")]
    for seq, _names in req.targets:
        bad = target(seq, "redaction_target_invalid")
        if bad is not None:
            out.append(bad)
            continue
        held = holds.holding(seq)
        broken = [h for h in held if h in holds.unreadable]
        if broken:
            out.append(_f("redaction_under_unreadable_hold", e.seq,
                          f"target {seq} was erased while legal hold {broken[0]}, which may "
                          f"hold it, could not be read ({holds.unreadable[broken[0]]})",
                          None, broken))
        if len(broken) < len(held):
            out.append(_f("redaction_of_held_entry", e.seq,
                          f"target {seq} is under legal hold "
                          f"{[h for h in held if h not in broken][0]}", None,
                          [h for h in held if h not in broken]))
    return out


def _check_hold(e: CustodyEntry, holds: Holds, target: Target) -> list[Finding]:
    out = _role(e, "hold_role_invalid")
    order_or_why = read_order(e.envelope, e.document)
    if isinstance(order_or_why, str):
        # unreadable: it holds every earlier entry until released (fail closed, as the
        # redaction itself decides); a missing or modified document is the payload
        # check's finding, an invalid one is reported here
        holds.apply_unreadable(e.seq, e.envelope.get("action"), order_or_why)
        if e.document is None:
            return out
        try:
            order = parse_hold(e.document)
        except UsageError as exc:
            return out + [_f("hold_invalid", e.seq, f"the order document: {exc.message}")]
        if order.action != e.envelope.get("action"):
            out.append(_f("hold_invalid", e.seq, "order.action differs from the envelope",
                          e.envelope.get("action"), order.action))
        return out
    order = order_or_why
    if order.action == "add":
        for seq in order.targets:
            bad = target(seq, "hold_target_invalid")
            if bad is not None:
                out.append(bad)
    problem = holds.apply(e.seq, order)
    if problem is not None:
        out.append(_f("hold_target_invalid", e.seq, problem))
    return out


def custody_entry(seq: int, kind: str, envelope: bytes, document: bytes | None,
                  tenant: str = DEFAULT_TENANT) -> CustodyEntry:
    """A :class:`CustodyEntry` from stored bytes (an unreadable envelope: ``{}``; the
    per-row checks report it)."""
    try:
        env = json.loads(envelope)
    except ValueError:
        env = {}
    return CustodyEntry(seq, kind, env if isinstance(env, dict) else {}, document, tenant)
