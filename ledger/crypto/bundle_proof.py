"""Proof intervals of an export bundle (docs/export.md, ``proofs.jsonl``).

Each record declares an interval ``[first_seq, seq]`` of one file (``key_events.jsonl``
intervals first, then ``entries.jsonl`` ones) and proves it by the inclusion of its last
entry in the signed checkpoint.  :class:`ProofCursor` streams the records;
:class:`ProofTracker` merge-joins one file's rows with them and settles each interval's
row dispositions into the tally (a broken interval fails all its rows).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ledger.core.audit import DELETED, FORKED, PAYLOAD_MODIFIED, REORDERED
from ledger.core.bundle import ENTRIES, KEY_EVENTS, PROOF_KEYS, PROOFS, BundleLine
from ledger.core.merkle import leaf_hash, verify_inclusion
from ledger.errors import ProofError

if TYPE_CHECKING:
    from ledger.crypto.bundle_verify import Verifier


def iter_lines(path: Path, hasher: Any) -> Iterator[BundleLine]:
    """The parsed lines of ``path``, each fed to ``hasher`` as read."""
    with open(path, "rb") as fh:
        for n, raw in enumerate(fh, 1):
            hasher.update(raw)
            yield BundleLine(raw, n)


class ProofInterval:
    """A declared proof interval: entries [first, last] of one file, proven by the
    inclusion of ``last``; ``counts`` holds its rows' dispositions until it settles."""

    def __init__(self, first: int, last: int, path: list[bytes] | None, lineno: int) -> None:
        self.first, self.last, self.path, self.lineno = first, last, path, lineno
        self.expected, self.broken, self.counts = first, path is None, Counter()


class ProofCursor:
    """Streams proofs.jsonl: key_events.jsonl intervals first, then entries.jsonl ones."""

    def __init__(self, v: Verifier) -> None:
        self.v, self.peeked, self.last = v, None, {ENTRIES: -1, KEY_EVENTS: -1}
        path = v.dir / PROOFS
        self.lines: Iterator[BundleLine] = iter(())
        if path.is_file():
            self.lines = iter_lines(path, v.hasher(PROOFS))
        else:
            v.finding("file_missing", DELETED, f"{PROOFS} is missing", PROOFS)
        self._advance()

    def _advance(self) -> None:
        self.peeked = next(self.lines, None)

    def next_for(self, file: str) -> ProofInterval | None:
        while self.peeked is not None:
            line = self.peeked
            readable = isinstance(line.obj, dict) and "file" in line.obj
            if readable and line.obj["file"] != file:
                return None
            self._advance()
            iv = self._interval(line, file)
            if iv is not None:
                return iv
        return None

    def _interval(self, line: BundleLine, file: str) -> ProofInterval | None:
        v, o = self.v, line.obj
        if line.problem:
            v.finding(line.problem[0], PAYLOAD_MODIFIED, line.problem[1], PROOFS, line.seq)
        if not isinstance(o, dict) or set(o) != PROOF_KEYS or not all(
                type(o[k]) is int and o[k] >= 0 for k in ("first_seq", "seq", "tree_size")) \
                or o["first_seq"] > o["seq"]:
            if not line.problem:
                v.finding("proof_malformed", PAYLOAD_MODIFIED, f"line {line.lineno} is not "
                          "a proof record", PROOFS, line.seq)
            return None
        if o["first_seq"] <= self.last[file]:
            v.finding("proof_out_of_order", REORDERED, f"line {line.lineno} overlaps or "
                      "precedes the previous interval", PROOFS, o["seq"])
            return None
        self.last[file] = o["seq"]
        path = None
        try:
            path = [bytes.fromhex(h) for h in o["inclusion_path"]]
            if any(len(h) != 32 or h.hex() != t for h, t in zip(path, o["inclusion_path"])):
                raise ValueError("not 64 lowercase hex digits")
        except (ValueError, TypeError) as exc:
            v.finding("proof_malformed", PAYLOAD_MODIFIED, f"inclusion_path: {exc}", PROOFS,
                      o["seq"])
            path = None
        if v.checkpoint is not None and o["tree_size"] != v.checkpoint.size:
            v.finding("proof_tree_size_mismatch", PAYLOAD_MODIFIED, "tree_size is not the "
                      "checkpoint's size", PROOFS, o["seq"], v.checkpoint.size, o["tree_size"])
            path = None
        return ProofInterval(o["first_seq"], o["seq"], path, line.lineno)

    def drain(self) -> None:
        while self.peeked is not None:
            line = self.peeked
            self._advance()
            o = line.obj if isinstance(line.obj, dict) else {}
            self.v.finding("proof_without_entry", DELETED, f"line {line.lineno} proves "
                           f"{o.get('file')} entries that are not in the bundle (or is out "
                           "of place)", PROOFS, line.seq, pair=str(o.get("file")))


class ProofTracker:
    """Merge-joins one file's rows with its declared intervals and settles their counts."""

    def __init__(self, v: Verifier, file: str, cursor: ProofCursor, tally: Counter) -> None:
        self.v, self.file, self.cursor, self.tally, self.cur = v, file, cursor, tally, None

    def add(self, seq: int, entry_hash: bytes, disp: str) -> None:
        while True:
            if self.cur is None:
                self.cur = self.cursor.next_for(self.file)
            if self.cur is None or seq < self.cur.first:
                self.v.finding("proof_missing", DELETED, f"no interval of proofs.jsonl "
                               f"covers {self.file} entry {seq}", PROOFS, seq, pair=self.file)
                self.tally["failed"] += 1
                return
            if seq <= self.cur.last:
                break
            self._close()
        iv = self.cur
        if seq != iv.expected:
            self.v.finding("seq_gap", DELETED, f"entries {iv.expected}..{seq - 1} of the "
                           "proven interval are missing", self.file, iv.expected, pair=PROOFS)
            iv.broken = True
        iv.expected = seq + 1
        iv.counts[disp] += 1
        if seq == iv.last:
            if iv.path is not None and self.v.checkpoint is not None:
                cp = self.v.checkpoint
                try:
                    verify_inclusion(seq, cp.size, leaf_hash(entry_hash), iv.path, cp.root_hash)
                except (ProofError, ValueError) as exc:
                    self.v.finding("inclusion_invalid", FORKED, f"the proof on line "
                                   f"{iv.lineno} for {self.file} entry {seq} does not reach the "
                                   f"checkpoint root (the proof or the entry changed): {exc}",
                                   PROOFS, seq, pair=self.file)
                    iv.broken = True
            self._settle(iv)

    def _close(self) -> None:
        iv = self.cur
        self.v.finding("entry_missing", DELETED, f"entries {iv.expected}..{iv.last} are "
                       "declared in proofs.jsonl but missing", self.file, iv.expected, pair=PROOFS)
        iv.broken = True
        self._settle(iv)

    def _settle(self, iv: ProofInterval) -> None:
        self.cur = None
        n = sum(iv.counts.values())
        cp = self.v.signatures.get("checkpoint")
        if iv.broken or cp != "verified" and cp != "abstained" or self.v.checkpoint is None:
            self.tally["failed"] += n
        else:
            self.tally["failed"] += iv.counts["failed"]
            good = iv.counts["verified"]
            self.tally["verified" if cp == "verified" else "unverified"] += good
            self.tally["unverified"] += iv.counts["abstained"]

    def finish(self) -> None:
        if self.cur is not None:
            self._close()
        while (iv := self.cursor.next_for(self.file)) is not None:
            self.cur = iv
            self._close()
