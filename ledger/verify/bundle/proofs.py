"""Proof intervals of an export bundle (docs/export.md, ``proofs.jsonl``).

Each record declares an interval ``[first_seq, seq]`` of one file (``key_events.jsonl``
intervals first, then ``entries.jsonl`` ones) and proves it by the inclusion of its last
entry in the signed checkpoint.  :class:`ProofCursor` streams the records;
:class:`ProofTracker` merge-joins one file's rows with them and settles each interval:
its rows count as they were checked only when its proof reached a signed checkpoint (a
broken interval fails all its rows), and a row whose checks abstained is never verified.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import Any

from ledger.core.bundle import PROOF_FILES, PROOF_KEYS, PROOFS, BundleLine
from ledger.core.finding import Disposition, FindingClass
from ledger.core.merkle import leaf_hash, verify_inclusion
from ledger.errors import ProofError
from ledger.verify.bundle.context import BundleContext, RowCounts
from ledger.verify.bundle.sink import FindingSink


class ProofInterval:
    """A declared proof interval: entries [first, last] of one file, proven by the
    inclusion of ``last``; ``counts`` holds its rows' dispositions until it settles."""

    def __init__(self, first: int, last: int, path: list[bytes] | None, lineno: int) -> None:
        self.first, self.last, self.path, self.lineno = first, last, path, lineno
        self.expected, self.broken = first, path is None
        self.counts: Counter[Disposition] = Counter()
        self.tenant: str | None = None  # of its first row (ledger-export/2)


def settle(iv: ProofInterval, proven: Disposition | None) -> RowCounts:
    """The row counts of a finished interval.  ``proven``: what the checkpoint's signature
    lends (verified, abstained, or None: nothing)."""
    n = sum(iv.counts.values())
    if iv.broken or proven is None:
        return RowCounts(failed=n)
    good = iv.counts[Disposition.VERIFIED]
    abstained = iv.counts[Disposition.ABSTAINED]
    if proven is Disposition.VERIFIED:
        return RowCounts(verified=good, failed=iv.counts[Disposition.FAILED],
                         unverified=abstained)
    return RowCounts(failed=iv.counts[Disposition.FAILED], unverified=good + abstained)


class ProofCursor:
    """Streams proofs.jsonl: key_events.jsonl intervals first, then those of
    redactions.jsonl (when the bundle has one), then entries.jsonl ones."""

    def __init__(self, ctx: BundleContext, sink: FindingSink) -> None:
        self.ctx, self.sink = ctx, sink
        self.last = {name: -1 for name in PROOF_FILES}
        self.lines: Iterator[BundleLine] = ctx.files.lines(PROOFS, sink)
        self.peeked: BundleLine | None = next(self.lines, None)

    def _advance(self) -> None:
        self.peeked = next(self.lines, None)

    def next_for(self, file: str) -> ProofInterval | None:
        """The next usable interval of ``file`` (unusable records are findings)."""
        while self.peeked is not None:
            line = self.peeked
            if "file" in line.obj and line.obj["file"] != file:
                return None
            self._advance()
            iv = self._interval(line, file)
            if iv is not None:
                return iv
        return None

    def _interval(self, line: BundleLine, file: str) -> ProofInterval | None:
        sink, o, cp = self.sink, line.obj, self.ctx.checkpoint
        if line.problem:
            sink.fail(line.problem[0], FindingClass.PAYLOAD_MODIFIED, line.problem[1], PROOFS,
                      line.seq)
        if set(o) != PROOF_KEYS or not all(
                type(o[k]) is int and o[k] >= 0 for k in ("first_seq", "seq", "tree_size")) \
                or o["first_seq"] > o["seq"]:
            if not line.problem:
                sink.fail("proof_malformed", FindingClass.PAYLOAD_MODIFIED, f"line "
                          f"{line.lineno} is not a proof record", PROOFS, line.seq)
            return None
        if o["first_seq"] <= self.last[file]:
            sink.fail("proof_out_of_order", FindingClass.REORDERED, f"line {line.lineno} "
                      "overlaps or precedes the previous interval", PROOFS, o["seq"])
            return None
        self.last[file] = o["seq"]
        path = _path(o, sink)
        if cp is not None and o["tree_size"] != cp.size:
            sink.fail("proof_tree_size_mismatch", FindingClass.PAYLOAD_MODIFIED, "tree_size "
                      "is not the checkpoint's size", PROOFS, o["seq"], cp.size, o["tree_size"])
            path = None
        return ProofInterval(o["first_seq"], o["seq"], path, line.lineno)

    def drain(self) -> None:
        """Every record left proves entries that are not in the bundle (findings)."""
        while self.peeked is not None:
            line = self.peeked
            self._advance()
            o = line.obj
            self.sink.fail("proof_without_entry", FindingClass.DELETED, f"line {line.lineno} "
                           f"proves {o.get('file')} entries that are not in the bundle (or is "
                           "out of place)", PROOFS, line.seq, pair=str(o.get("file")))


def _path(o: dict[str, Any], sink: FindingSink) -> list[bytes] | None:
    try:
        text = o["inclusion_path"]
        path = [bytes.fromhex(h) for h in text]
        if any(len(h) != 32 or h.hex() != t for h, t in zip(path, text, strict=True)):
            raise ValueError("not 64 lowercase hex digits")
    except (ValueError, TypeError) as exc:
        sink.fail("proof_malformed", FindingClass.PAYLOAD_MODIFIED, f"inclusion_path: {exc}",
                  PROOFS, o["seq"])
        return None
    return path


class ProofTracker:
    """Merge-joins one file's rows with its declared intervals; :meth:`finish` returns the
    row counts of every interval settled."""

    def __init__(self, ctx: BundleContext, sink: FindingSink, file: str,
                 cursor: ProofCursor) -> None:
        self.ctx, self.sink, self.file, self.cursor = ctx, sink, file, cursor
        self.cur: ProofInterval | None = None
        self.counts = RowCounts()

    def add(self, seq: int, entry_hash: bytes, disp: Disposition,
            tenant: str | None = None) -> None:
        """One row of the file, in seq order, with the disposition of its own checks and,
        in a ``ledger-export/2`` bundle, its tenant (an interval is one tenant's run: its
        last entry's chain proves only that tenant's entries)."""
        while True:
            if self.cur is None:
                self.cur = self.cursor.next_for(self.file)
            if self.cur is None or seq < self.cur.first:
                self.sink.fail("proof_missing", FindingClass.DELETED, f"no interval of "
                               f"proofs.jsonl covers {self.file} entry {seq}", PROOFS, seq,
                               pair=self.file)
                self.counts += RowCounts(failed=1)
                return
            if seq <= self.cur.last:
                break
            self._close()
        iv = self.cur
        if seq != iv.expected:
            self.sink.fail("seq_gap", FindingClass.DELETED, f"entries {iv.expected}..{seq - 1}"
                           " of the proven interval are missing", self.file, iv.expected,
                           pair=PROOFS)
            iv.broken = True
        iv.expected = seq + 1
        if seq == iv.first or iv.tenant is None:
            iv.tenant = tenant
        elif tenant != iv.tenant:
            self.sink.fail("proof_interval_mixed", FindingClass.FORKED, f"the interval on line "
                           f"{iv.lineno} holds entries of tenants {iv.tenant} and {tenant}: "
                           "its proof does not reach the other tenant's entries", self.file,
                           seq, pair=PROOFS)
            iv.broken = True
        iv.counts[disp] += 1
        if seq == iv.last:
            self._prove(iv, seq, entry_hash)
            self._settle(iv)

    def _prove(self, iv: ProofInterval, seq: int, entry_hash: bytes) -> None:
        cp = self.ctx.checkpoint
        if iv.path is None or cp is None:
            return
        try:
            verify_inclusion(seq, cp.size, leaf_hash(entry_hash), iv.path, cp.root_hash)
        except (ProofError, ValueError) as exc:
            self.sink.fail("inclusion_invalid", FindingClass.FORKED, f"the proof on line "
                           f"{iv.lineno} for {self.file} entry {seq} does not reach the "
                           f"checkpoint root (the proof or the entry changed): {exc}",
                           PROOFS, seq, pair=self.file)
            iv.broken = True

    def _close(self) -> None:
        iv = self.cur
        assert iv is not None
        self.sink.fail("entry_missing", FindingClass.DELETED, f"entries {iv.expected}.."
                       f"{iv.last} are declared in proofs.jsonl but missing", self.file,
                       iv.expected, pair=PROOFS)
        iv.broken = True
        self._settle(iv)

    def _settle(self, iv: ProofInterval) -> None:
        self.cur = None
        self.counts += settle(iv, self.ctx.proven())

    def finish(self) -> RowCounts:
        """Close the open interval and every interval left for this file."""
        if self.cur is not None:
            self._close()
        while (iv := self.cursor.next_for(self.file)) is not None:
            self.cur = iv
            self._close()
        return self.counts
