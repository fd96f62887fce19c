"""The rows of an export bundle (docs/export.md): ``key_events.jsonl`` and then
``entries.jsonl`` streamed through the same pure per-row checks as ``ledger audit``
(:class:`ledger.core.audit.ChainAuditor`), and ``entries.csv`` compared with the view
of the rows.

Consecutive seqs get link checks; each run of consecutive rows is anchored by its own
``prev_hash``.  Key events are folded into the verifier's trust store as they pass, so
the entries' attestations are judged with the keys known at their seq.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from ledger.core.audit import (
    CONTRACT_VIOLATION,
    DELETED,
    PAYLOAD_MODIFIED,
    REORDERED,
    ChainAuditor,
)
from ledger.core.bundle import (
    CSV_HEADER,
    CSV_VIEW,
    ENTRIES,
    KEY_EVENTS,
    MANIFEST,
    BundleLine,
    BundleRow,
    agent_message,
    csv_bytes,
    csv_row,
    matches,
    read_entry,
)
from ledger.crypto.bundle_proof import ProofCursor, ProofTracker, iter_lines

if TYPE_CHECKING:
    from ledger.crypto.bundle_verify import Verifier


class RowWalk:
    """One verification's pass over the bundle's rows; findings go to the verifier."""

    def __init__(self, v: Verifier) -> None:
        self.v = v
        self.key_event_hashes: dict[int, bytes] = {}
        self.csv_rows: list[list[str]] = []

    def walk(self, file: str, cursor: ProofCursor, tally: Counter, judge: Any) -> None:
        v = self.v
        path = v.dir / file
        if not path.is_file():
            v.finding("file_missing", DELETED, f"{file} is missing", file)
            lines: Iterator[BundleLine] = iter(())
        else:
            lines = iter_lines(path, v.hasher(file))
        tracker = ProofTracker(v, file, cursor, tally)
        ledger_id = v.manifest.get("ledger_id")
        auditor, last_seq, last_time = None, -1, 0
        self.csv_rows = []
        for line in lines:
            tally["rows"] += 1
            if line.problem:
                v.finding(line.problem[0], PAYLOAD_MODIFIED, line.problem[1], file, line.seq)
                if line.problem[0] == "line_unreadable":
                    tally["failed"] += 1
                    continue
            try:
                row, blobs, problems = read_entry(line.obj)
            except (ValueError, TypeError, AttributeError) as exc:
                v.finding("line_malformed", PAYLOAD_MODIFIED, f"line {line.lineno}: {exc}",
                          file, line.seq)
                tally["failed"] += 1
                continue
            for code, msg in problems:
                v.finding(code, PAYLOAD_MODIFIED, msg, file, row.seq)
            if row.seq <= last_seq:
                v.finding("entry_out_of_order", REORDERED, f"seq {row.seq} follows seq "
                          f"{last_seq}", file, row.seq, last_seq + 1, row.seq)
                tally["failed"] += 1
                continue
            if auditor is None or row.seq != last_seq + 1:
                auditor = ChainAuditor(ledger_id, row.seq, row.prev_hash, last_time,
                                       v.policy, judge)
            outcome = auditor.check_row(row, blobs)
            last_seq, last_time = row.seq, max(last_time, row.recorded_at)
            n = len(v.findings)
            v.findings += [{**f.to_dict(), "file": file} for f in outcome.findings]
            v.abstentions += [{**a.to_dict(), "file": file} for a in outcome.abstentions]
            (self._key_event if file == KEY_EVENTS else self._entry)(row, blobs)
            failed = line.problem or problems or len(v.findings) > n
            disp = "failed" if failed else "abstained" if outcome.abstentions else "verified"
            tracker.add(row.seq, row.entry_hash, disp)
        tracker.finish()

    def _key_event(self, row: BundleRow, blobs: dict[str, bytes]) -> None:
        if row.kind != "key_event":
            self.v.finding("not_a_key_event", PAYLOAD_MODIFIED, f"kind is {row.kind!r}",
                           KEY_EVENTS, row.seq)
            return
        self.key_event_hashes[row.seq] = row.entry_hash
        data = blobs.get(row.doc_digest) if row.doc_digest else None
        if data is not None and "sha256:" + hashlib.sha256(data).hexdigest() == row.doc_digest:
            try:
                self.v.store.apply(row.seq, json.loads(data))
            except (ValueError, KeyError, TypeError):
                pass  # the key event's content check already reported it

    def _entry(self, row: BundleRow, blobs: dict[str, bytes]) -> None:
        v, seq = self.v, row.seq
        m = v.manifest
        rng = m.get("range") or {}
        if not (rng.get("start", 0) <= seq < (rng.get("end") if rng.get("end") is not None
                                               else seq + 1)):
            v.finding("entry_out_of_range", CONTRACT_VIOLATION, "seq is outside the "
                      "manifest's range", ENTRIES, seq, rng, seq)
        try:
            ok = matches(m.get("filters") or {}, row)
        except (ValueError, TypeError) as exc:
            v.finding("manifest_malformed", PAYLOAD_MODIFIED, f"filters: {exc}", MANIFEST)
            m["filters"], ok = {}, True
        if not ok:
            v.finding("entry_outside_filter", CONTRACT_VIOLATION, "the entry does not "
                      "match the manifest's filters", ENTRIES, seq)
        if row.kind == "key_event" and self.key_event_hashes.get(seq) != row.entry_hash:
            v.finding("key_event_not_listed", DELETED, "this key event is not in "
                      "key_events.jsonl", ENTRIES, seq)
        v.counts["by_status"][str(row.status)] += 1
        v.counts["by_kind"][row.kind] += 1
        msg = agent_message(row.kind, blobs.get(row.doc_digest) if row.doc_digest else None)
        self.csv_rows.append(csv_row(seq, row.kind, row.recorded_at, row, msg,
                                     "sha256:" + row.entry_hash.hex()))
        if len(self.csv_rows) >= 1000:
            self._csv_flush()

    def _csv_flush(self) -> None:
        hashers = self.v.hashers
        if "csv:expected" not in hashers:
            hashers["csv:expected"] = hashlib.sha256(csv_bytes([CSV_HEADER]))
        hashers["csv:expected"].update(csv_bytes(self.csv_rows))
        self.csv_rows = []

    def check_csv(self) -> None:
        """entries.csv must be, byte for byte, the view of the entries walked."""
        self._csv_flush()
        v = self.v
        path = v.dir / CSV_VIEW
        if not path.is_file():
            v.finding("file_missing", DELETED, f"{CSV_VIEW} is missing", CSV_VIEW)
            return
        h = v.hasher(CSV_VIEW)
        with open(path, "rb") as fh:
            while chunk := fh.read(1 << 20):
                h.update(chunk)
        if h.digest() != v.hashers["csv:expected"].digest():
            v.finding("csv_view_mismatch", PAYLOAD_MODIFIED, "entries.csv is not the view "
                      "of entries.jsonl", CSV_VIEW)
