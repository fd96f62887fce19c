"""The redaction map and the audit's decisions about absent or erased payloads.

A *redaction map* ``{(seq, payload name): redaction_seq}`` says which payload bytes a
redaction entry of the chain erased.  It is the fold of the redaction entries in seq
order (as the trust store is the fold of the key events); the audit and the export
verifiers build it with :func:`fold_redactions` and pass it to the per-row checks, which
ask :func:`absent_payload` / :func:`present_payload` what an absent or present payload
means.  Pure: stdlib only.

The ``request`` document of a redaction entry (``ledger-redaction/2``, or ``/1`` written
before redactions were signed; docs/redaction.md)
names ``targets``: ``[{"seq": N, "payloads": [name, ...]}, ...]``.  The fold keeps only
what could be a valid erasure: a target seq earlier than the redaction, names of result
payloads; the *first* redaction naming a payload is the one cited.  Whether the redaction
entry itself is valid (role, reason, targets that exist and are results, holds) is
checked on the redaction row, not here.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from ledger.core.entry import SLOTS
from ledger.core.finding import Abstention, Finding, FindingClass

RedactionMap = dict[tuple[int, str], int]
# the request formats: /1 unsigned (old data), /2 signed (docs/format.md §10.1); the
# signature is checked on the redaction row, not here
REDACTION_FORMATS = ("ledger-redaction/1", "ledger-redaction/2")
REDACTED = "redacted"  # the abstention reason of an erased payload


def redaction_targets(doc: Any) -> list[tuple[int, str]]:
    """The (seq, payload name) pairs a ``ledger-redaction/1`` or ``/2`` document names;
    ``doc`` is its bytes or the parsed object.  Anything unreadable names nothing."""
    if isinstance(doc, (bytes, bytearray, memoryview, str)):
        try:
            doc = json.loads(bytes(doc) if not isinstance(doc, str) else doc)
        except ValueError:
            return []
    if not isinstance(doc, dict) or doc.get("format") not in REDACTION_FORMATS:
        return []
    targets = doc.get("targets")
    out: list[tuple[int, str]] = []
    for t in targets if isinstance(targets, list) else ():
        seq = t.get("seq") if isinstance(t, dict) else None
        names = t.get("payloads") if isinstance(t, dict) else None
        if type(seq) is not int or not isinstance(names, list):
            continue
        out.extend((seq, n) for n in names if isinstance(n, str) and n in SLOTS)
    return out


def fold_redactions(entries: Iterable[tuple[int, str, Any]],
                    into: RedactionMap | None = None) -> RedactionMap:
    """Fold ``(seq, kind, document)`` tuples (in seq order) into a redaction map.

    Only ``redaction`` entries count; a target at or after the redaction's own seq is
    ignored (it cannot have been erased by it); the earliest redaction of a payload
    wins.  ``into``: extend an existing map (the fold is incremental).
    """
    out: RedactionMap = {} if into is None else into
    for seq, kind, doc in entries:
        if kind != "redaction":
            continue
        for target, name in redaction_targets(doc):
            if 0 <= target < seq:
                out.setdefault((target, name), seq)
    return out


def absent_payload(seq: int, name: str, commitment: str, redactions: RedactionMap,
                   ) -> Finding | Abstention:
    """An envelope commits to payload ``name`` of row ``seq`` but its bytes are not stored:
    abstained ``redacted`` (citing the redaction seq) when an earlier redaction names it,
    else the failure ``payload_missing``."""
    by = redactions.get((seq, name))
    if by is not None and by > seq:
        return Abstention(seq, f"payload:{name}", REDACTED,
                          f"payload {name} was erased by redaction {by}",
                          (("redaction_seq", by),))
    return Finding("payload_missing", seq, FindingClass.DELETED,
                   f"payload {name} ({commitment}) is not stored", commitment, None)


def present_payload(seq: int, name: str, redactions: RedactionMap) -> Finding | None:
    """Payload ``name`` of row ``seq`` is stored: a finding ``redaction_not_applied``
    (policy violation) when a redaction names it, else None."""
    by = redactions.get((seq, name))
    if by is None or by <= seq:
        return None
    return Finding("redaction_not_applied", seq, FindingClass.POLICY_VIOLATION,
                   f"payload {name} is still stored although redaction {by} erased it",
                   None, by)
