"""The audit pass over redaction and hold entries (``ledger.core.redaction_audit``).

Run once per audit after the row walk (also after a parallel one): it reads the
redaction and hold entries of the range with their documents, the kinds of the entries
they name, and the hold entries before the range (the holds in force at its start), and
adds the findings to the tally.  A row that the walk counted verified and that has such
a finding is moved to failed (with only an abstention, such as an unverified redaction
signature, to unverified), so the counts stay one disposition per row.
"""

from __future__ import annotations

from typing import Any

from ledger.core.digest import digest_text
from ledger.core.finding import Abstention, Disposition, Finding, FindingClass
from ledger.core.redaction import RedactionRequest, parse_request
from ledger.core.redaction_audit import check_custody, custody_entry
from ledger.crypto.keys import PublicKeyRef
from ledger.crypto.redaction_sign import judge_redactions
from ledger.errors import UsageError
from ledger.ops.audit.tally import Tally
from ledger.store import custody
from ledger.store.db import connect


def custody_findings(engine: Any, start: int, end: int, ledger_id: str = "",
                     keys: list[PublicKeyRef] | None = None,
                     ) -> tuple[list[Finding], list[Abstention]]:
    """Findings and abstentions (as reported) about the redaction and hold entries in
    [start, end): the document checks, and each redaction's signature
    (``ledger.crypto.redaction_sign.judge_redactions``, with the ledger's public keys
    ``keys``; None: not given, a signed redaction abstains ``no_ledger_key``)."""
    with connect(engine) as conn:
        rows = custody.custody_rows(conn, 0, end)
        named: set[int] = set()
        for e in (custody_entry(*r) for r in rows):
            named.update(_named(e))
        named_rows = custody.kinds_and_tenants_of(conn, sorted(named))
    entries = [custody_entry(*r) for r in rows]
    kinds = {s: k for s, (k, _) in named_rows.items()}
    tenants = {s: t for s, (_, t) in named_rows.items()}
    found = check_custody(entries, kinds.get, tenants.get)
    findings = [f.reported() for f in found if f.seq is not None and start <= f.seq < end]
    abstentions: list[Abstention] = []
    for seq, check in judge_redactions(_requests(entries), ledger_id, keys):
        if not start <= seq < end or check.disposition == Disposition.VERIFIED:
            continue
        if check.disposition == Disposition.FAILED:
            findings.append(Finding(check.code, seq, FindingClass.SIGNATURE_INVALID,
                                    check.message).reported())
        else:
            abstentions.append(Abstention(seq, "redaction_signature", check.code,
                                          check.message))
    return findings, abstentions


def _requests(entries: list[Any]) -> list[tuple[int, RedactionRequest]]:
    """(seq, request) of the redaction entries whose document is the one their envelope
    commits to and reads (a missing, modified or invalid one is already a finding)."""
    out = []
    for e in entries:
        if e.kind != "redaction" or e.document is None:
            continue
        want = (e.envelope.get("payloads") or {}).get("request") \
            if isinstance(e.envelope.get("payloads"), dict) else None
        if want != digest_text(e.document):
            continue
        try:
            out.append((e.seq, parse_request(e.document)))
        except UsageError:
            continue
    return out


def _named(e: Any) -> list[int]:
    from ledger.core.redaction import parse_hold, parse_request
    from ledger.errors import UsageError

    if e.document is None:
        return []
    try:
        if e.kind == "redaction":
            return [s for s, _ in parse_request(e.document).targets]
        order = parse_hold(e.document)
        return list(order.targets)
    except UsageError:
        return []


def add_custody_findings(tally: Tally, engine: Any, start: int, end: int, ledger_id: str = "",
                         keys: list[PublicKeyRef] | None = None) -> None:
    """Add the custody findings and abstentions of [start, end) to ``tally``, moving the
    rows they concern out of ``verified``."""
    found, abstained = custody_findings(engine, start, end, ledger_id, keys)
    failed_before = {f.seq for f in tally.findings}
    unverified_before = {a.seq for a in tally.abstentions} - failed_before
    new_failed = {f.seq for f in found} - failed_before
    for seq in new_failed:
        if seq in unverified_before and tally.unverified:
            tally.unverified -= 1
            tally.failed += 1
        elif tally.verified:
            tally.verified -= 1
            tally.failed += 1
    for _seq in {a.seq for a in abstained} - failed_before - unverified_before - new_failed:
        if tally.verified:
            tally.verified -= 1
            tally.unverified += 1
    tally.findings += found
    tally.abstentions += abstained
