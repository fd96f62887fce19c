"""The rows of an export bundle (docs/export.md, check 4): ``key_events.jsonl`` and then
``entries.jsonl`` streamed through the same pure per-row checks as ``ledger audit``
(:class:`ledger.core.audit.ChainAuditor`).

Consecutive seqs get link checks; each run of consecutive rows is anchored by its own
``prev_hash``.  Key events are folded into the run's trust store as they pass, so the
entries' attestations are judged with the keys known at their seq.  Each file's walk
returns its row counts; what a file's rows say about the rest (the key events' hashes,
the entries' counts and ``entries.csv`` view) stays in its :class:`RowVisitor`.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Iterable
from typing import Any

from ledger.core.audit import AttestationJudge, ChainAuditor
from ledger.core.bundle import (
    CSV_HEADER,
    ENTRIES,
    KEY_EVENTS,
    MANIFEST,
    REDACTIONS,
    BundleRow,
    agent_message,
    csv_bytes,
    csv_row,
    matches,
    read_entry,
)
from ledger.core.erasure import RedactionMap, fold_redactions
from ledger.core.finding import Disposition, FindingClass, row_disposition
from ledger.core.redaction import parse_request
from ledger.core.tenant import DEFAULT_TENANT
from ledger.crypto.jws import SignatureCheck
from ledger.crypto.redaction_sign import judge_redactions
from ledger.crypto.trust import TrustStore, row_judge
from ledger.errors import UsageError
from ledger.verify.bundle.context import BundleContext, RowCounts
from ledger.verify.bundle.proofs import ProofCursor, ProofTracker
from ledger.verify.bundle.sink import FindingSink

Slots = dict[int, tuple[bytes | None, bytes]]
RedactionCheck = SignatureCheck[dict[str, Any]]


def committed(row: BundleRow, name: str) -> str | None:
    """The digest ``row``'s envelope commits to for payload ``name``."""
    try:
        env = json.loads(row.envelope)
        return (env.get("payloads") or {}).get(name)
    except (ValueError, AttributeError):
        return None


def redaction_doc(row: BundleRow, blobs: Slots) -> bytes | None:
    """The request document of a redaction entry, if it matches its envelope's digest."""
    data = blobs[0][1] if 0 in blobs else None
    if row.kind == "redaction" and data is not None and \
            "sha256:" + hashlib.sha256(data).hexdigest() == committed(row, "request"):
        return data
    return None


def bundle_redactions(ctx: BundleContext, carried: dict[int, bytes] | None = None,
                      ) -> tuple[RedactionMap, dict[int, RedactionCheck]]:
    """The redaction map of the bundle: the fold of the redaction entries in
    ``entries.jsonl`` (a pre-pass over the file) and of those ``carried`` by
    ``redactions.jsonl`` (seq -> document, walked before), whose request document matches
    its envelope's digest; the walks report every problem of those lines.  Also the check
    of each such redaction's signature that did not verify, by redaction seq
    (``judge_redactions``: the verifier's trusted keys verify it; with only the bundle's
    own keys it abstains at best)."""
    path = ctx.files.dir / ENTRIES
    docs = dict(carried or {})
    if path.is_file():
        with open(path, "rb") as fh:
            for raw in fh:
                if b'"kind":"redaction"' not in raw:
                    continue
                try:
                    row, blobs, _ = read_entry(json.loads(raw))
                except (ValueError, TypeError, AttributeError):
                    continue
                data = redaction_doc(row, blobs)
                if data is not None:
                    docs.setdefault(row.seq, data)
    requests = []
    for seq in sorted(docs):
        try:
            requests.append((seq, parse_request(docs[seq])))
        except UsageError:
            continue  # the walk's document check reports it
    trusted = ctx.trusted is not None
    checks = judge_redactions(requests, str(ctx.manifest.get("ledger_id")),
                              ctx.trusted if trusted else ctx.bundle_keys, trusted=trusted)
    return (fold_redactions((seq, "redaction", docs[seq]) for seq in sorted(docs)),
            {seq: c for seq, c in checks if c.disposition != Disposition.VERIFIED})


def report_signatures(sink: FindingSink, file: str, seqs: Iterable[int],
                      signatures: dict[int, RedactionCheck]) -> None:
    """Record the redaction signature checks of ``seqs`` (rows of ``file`` whose walk did
    not count them: ``redactions.jsonl``)."""
    for seq in sorted(seqs):
        sig = signatures.get(seq)
        if sig is not None and sig.disposition == Disposition.FAILED:
            sink.fail(sig.code, FindingClass.SIGNATURE_INVALID, sig.message, file, seq)
        elif sig is not None:
            sink.abstain("redaction_signature", sig.code, sig.message, file, seq)


class RowVisitor:
    """The checks of one file's rows beyond the audit's (a subclass per file)."""

    file = ""

    def visit(self, row: BundleRow, blobs: Slots) -> None:
        raise NotImplementedError


class KeyEvents(RowVisitor):
    """``key_events.jsonl``: every row a key event, folded into ``store``."""

    file = KEY_EVENTS

    def __init__(self, sink: FindingSink, store: TrustStore) -> None:
        self.sink, self.store = sink, store
        self.hashes: dict[int, bytes] = {}  # seq -> entry_hash of every key event listed

    def visit(self, row: BundleRow, blobs: Slots) -> None:
        if row.kind != "key_event":
            self.sink.fail("not_a_key_event", FindingClass.PAYLOAD_MODIFIED,
                           f"kind is {row.kind!r}", KEY_EVENTS, row.seq)
            return
        self.hashes[row.seq] = row.entry_hash
        want = committed(row, "event")
        data = blobs[0][1] if 0 in blobs else None
        if data is not None and "sha256:" + hashlib.sha256(data).hexdigest() == want:
            try:
                self.store.apply(row.seq, json.loads(data))
            except (ValueError, KeyError, TypeError):
                pass  # the key event's content check already reported it


class Redactions(RowVisitor):
    """``redactions.jsonl``: every row a redaction entry; their documents explain the
    erased payloads of ``entries.jsonl``."""

    file = REDACTIONS

    def __init__(self, sink: FindingSink) -> None:
        self.sink = sink
        self.docs: dict[int, bytes] = {}  # seq -> request document (digest verified)

    def visit(self, row: BundleRow, blobs: Slots) -> None:
        if row.kind != "redaction":
            self.sink.fail("not_a_redaction", FindingClass.PAYLOAD_MODIFIED,
                           f"kind is {row.kind!r}", REDACTIONS, row.seq)
            return
        data = redaction_doc(row, blobs)
        if data is not None:
            self.docs[row.seq] = data


class Entries(RowVisitor):
    """``entries.jsonl``: inside the manifest's range and filters, key events listed, and
    the counts and ``entries.csv`` view the rows give."""

    file = ENTRIES

    def __init__(self, ctx: BundleContext, sink: FindingSink,
                 key_event_hashes: dict[int, bytes]) -> None:
        self.ctx, self.sink, self.key_event_hashes = ctx, sink, key_event_hashes
        self.filters = ctx.manifest.get("filters") or {}
        self.by_status: Counter[str] = Counter()
        self.by_kind: Counter[str] = Counter()
        self._csv = hashlib.sha256(csv_bytes([CSV_HEADER]))
        self._csv_rows: list[list[str]] = []
        self.tenant_check: Any = None  # a tenant export's TenantCheck, fed every row

    def visit(self, row: BundleRow, blobs: Slots) -> None:
        sink, seq = self.sink, row.seq
        if self.tenant_check is not None:
            self.tenant_check.add(row)
        rng = self.ctx.manifest.get("range") or {}
        end = rng.get("end")
        if end is None:
            end = seq + 1
        if not (rng.get("start", 0) <= seq < end):
            sink.fail("entry_out_of_range", FindingClass.CONTRACT_VIOLATION, "seq is outside "
                      "the manifest's range", ENTRIES, seq, rng, seq)
        try:
            ok = matches(self.filters, row)
        except (ValueError, TypeError) as exc:
            sink.fail("manifest_malformed", FindingClass.PAYLOAD_MODIFIED, f"filters: {exc}",
                      MANIFEST)
            self.filters, ok = {}, True  # reported once
        if not ok:
            sink.fail("entry_outside_filter", FindingClass.CONTRACT_VIOLATION, "the entry "
                      "does not match the manifest's filters", ENTRIES, seq)
        if row.kind == "key_event" and self.key_event_hashes.get(seq) != row.entry_hash:
            sink.fail("key_event_not_listed", FindingClass.DELETED, "this key event is not "
                      "in key_events.jsonl", ENTRIES, seq)
        self.by_status[str(row.status)] += 1
        self.by_kind[row.kind] += 1
        msg = agent_message(row.kind, blobs[0][1] if 0 in blobs else None)
        self._csv_rows.append(csv_row(seq, row.kind, row.recorded_at, row, msg,
                                      "sha256:" + row.entry_hash.hex()))
        if len(self._csv_rows) >= 1000:
            self._flush()

    def _flush(self) -> None:
        self._csv.update(csv_bytes(self._csv_rows))
        self._csv_rows = []

    def csv_digest(self) -> bytes:
        """SHA-256 of the ``entries.csv`` the rows visited give."""
        self._flush()
        return self._csv.digest()


def judge_with(store: TrustStore) -> AttestationJudge:
    """The audit's attestation judge over ``store`` (as folded so far)."""
    return row_judge(store)


def _unmarked_erasures(obj: dict[str, Any], marked: dict[str, int]) -> list[str]:
    """Names of the payloads of an entry line exported without bytes and without the
    ``redacted_by`` marker an erased payload's record carries."""
    return [n for n, p in obj["payloads"].items() if p["data_b64"] is None and n not in marked]


def walk(ctx: BundleContext, sink: FindingSink, visitor: RowVisitor, cursor: ProofCursor,
         judge: AttestationJudge | None, redactions: RedactionMap | None = None,
         signatures: dict[int, RedactionCheck] | None = None) -> RowCounts:
    """Check every line of ``visitor.file`` and return its row counts; ``redactions``
    and ``signatures``: the bundle's redaction map and the redaction signature checks
    that did not verify (:func:`bundle_redactions`)."""
    file = visitor.file
    tracker = ProofTracker(ctx, sink, file, cursor)
    ledger_id = ctx.manifest.get("ledger_id")
    auditor, last_seq, last_time = None, -1, 0
    rows = failed = 0
    for line in ctx.files.lines(file, sink):
        rows += 1
        if line.problem:
            sink.fail(line.problem[0], FindingClass.PAYLOAD_MODIFIED, line.problem[1], file,
                      line.seq)
            if line.problem[0] == "line_unreadable":
                failed += 1
                continue
        try:
            row, blobs, problems = read_entry(line.obj, ctx.v2)
        except (ValueError, TypeError, AttributeError) as exc:
            sink.fail("line_malformed", FindingClass.PAYLOAD_MODIFIED,
                      f"line {line.lineno}: {exc}", file, line.seq)
            failed += 1
            continue
        for code, msg in problems:
            sink.fail(code, FindingClass.PAYLOAD_MODIFIED, msg, file, row.seq)
        if row.seq <= last_seq:
            sink.fail("entry_out_of_order", FindingClass.REORDERED, f"seq {row.seq} follows "
                      f"seq {last_seq}", file, row.seq, last_seq + 1, row.seq)
            failed += 1
            continue
        if auditor is None or row.seq != last_seq + 1:
            # a run's first entry of each tenant links to what it says (its interval's proof
            # vouches for it); the default tenant's chain starts at this row if it is one
            first_default = row.tenant in (None, DEFAULT_TENANT)
            auditor = ChainAuditor(ledger_id, row.seq, row.prev_hash if first_default else None,
                                   last_time, ctx.policy, judge, redactions,
                                   anchors=lambda _tenant: (None, None))
            auditor.parsed_envelopes = True  # read_entry parsed each envelope
        out = auditor.check_row(row, blobs)
        before = sink.count()
        for name in _unmarked_erasures(line.obj, row.redacted_by):
            by = (redactions or {}).get((row.seq, name))
            if by is not None:  # without a redaction it is payload_missing (the audit's)
                sink.fail("redaction_marker_invalid", FindingClass.PAYLOAD_MODIFIED,
                          f"payload {name} was erased by redaction {by} but its record has "
                          "no redacted_by", file, row.seq, by, None)
        for name, by in row.redacted_by.items():
            if (redactions or {}).get((row.seq, name)) != by:
                sink.fail("redaction_marker_invalid", FindingClass.PAYLOAD_MODIFIED,
                          f"payload {name} is marked erased by {by}, which no redaction entry "
                          "of the bundle confirms", file, row.seq, by,
                          (redactions or {}).get((row.seq, name)))
        last_seq, last_time = row.seq, max(last_time, row.recorded_at)
        sink.add(out.findings, file)
        sink.add_abstentions(out.abstentions, file)
        visitor.visit(row, blobs)
        sig = (signatures or {}).get(row.seq) if row.kind == "redaction" else None
        if sig is not None and sig.disposition == Disposition.FAILED:
            sink.fail(sig.code, FindingClass.SIGNATURE_INVALID, sig.message, file, row.seq)
        elif sig is not None:
            sink.abstain("redaction_signature", sig.code, sig.message, file, row.seq)
        row_failed = bool(line.problem or problems) or sink.count() > before
        tracker.add(row.seq, row.entry_hash,
                    row_disposition(row_failed, bool(out.abstentions) or sig is not None),
                    row.tenant or DEFAULT_TENANT)
    return RowCounts(rows=rows, failed=failed) + tracker.finish()
