"""Where the steps of a bundle verification put what they find.

Each step is handed the one :class:`FindingSink` of the run; the sink alone holds the
findings and abstentions, in the order they were found.  A disagreement between two
files (an entries file and ``proofs.jsonl``) is recorded with the other file; once the
file digests are known, :meth:`FindingSink.finding_dicts` names whichever of the two no
longer has its signed digest (docs/export.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ledger.core.finding import BUNDLE_FINDING_KEYS, FINDING_KEYS, Abstention, Finding, FindingClass


class FindingSink:
    """The findings and abstentions of one bundle verification."""

    def __init__(self) -> None:
        # (finding, its report key order, file, the other file of a disagreement)
        self._findings: list[tuple[Finding, Sequence[str], str, str | None]] = []
        self._abstentions: list[Abstention] = []

    def fail(self, code: str, cls: FindingClass, message: str, file: str,
             seq: int | None = None, expected: Any = None, actual: Any = None,
             pair: str | None = None) -> None:
        """Record a finding about ``file``; ``pair``: the other file of a disagreement."""
        self._findings.append((Finding(code, seq, cls, message, expected, actual),
                               BUNDLE_FINDING_KEYS, file, pair))

    def add(self, findings: list[Finding], file: str) -> None:
        """Record row findings (from the audit's per-row checks) about ``file``."""
        self._findings += [(f, FINDING_KEYS, file, None) for f in findings]

    def abstain(self, check: str, reason: str, message: str, file: str,
                seq: int | None = None) -> None:
        """Record an abstention about ``file``."""
        self._abstentions.append(Abstention(seq, check, reason, message, (("file", file),)))

    def add_abstentions(self, abstentions: list[Abstention], file: str) -> None:
        """Record row abstentions (from the audit's per-row checks) about ``file``."""
        self._abstentions += [a.with_extra(file=file) for a in abstentions]

    def count(self) -> int:
        """How many findings were recorded so far."""
        return len(self._findings)

    def files_with(self, codes: frozenset[str]) -> set[str]:
        """The files named by a finding with one of ``codes``."""
        return {file for f, _, file, _ in self._findings if f.code in codes}

    def finding_dicts(self, bad_files: set[str]) -> list[dict[str, Any]]:
        """The report's findings, sorted by seq (bundle-level ones, without a seq, first);
        a disagreement is named after its file in ``bad_files`` if exactly one is."""
        out = []
        for f, keys, file, pair in self._findings:
            if pair is not None and (file in bad_files) != (pair in bad_files):
                file = file if file in bad_files else pair
            out.append(f.with_extra(file=file).to_dict(keys))
        return sorted(out, key=lambda d: (d["seq"] is not None, d["seq"] or 0))

    def abstention_dicts(self) -> list[dict[str, Any]]:
        """The report's abstentions, in the order they were found."""
        return [a.to_dict() for a in self._abstentions]
