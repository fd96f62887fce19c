"""The redaction map of a stored ledger: the fold of its redaction entries.

``{(seq, payload name): redaction seq}`` (``ledger.core.erasure``), read once before an
audit walks the rows (a redaction comes after the entries it erases).  Only redaction
documents that match the digest their envelope commits to are folded in; a modified or
missing one is the audit's finding on that row, never an excuse for a missing payload.
"""

from __future__ import annotations

import json

from sqlalchemy import Connection

from ledger.core.digest import digest_text
from ledger.core.entry import DOC_PAYLOAD
from ledger.core.erasure import RedactionMap, fold_redactions
from ledger.store import entries as repo


def documents(conn: Connection, kind: str, *, after: int = -1,
              status: str | None = None) -> list[tuple[int, bytes]]:
    """(seq, document bytes) of the entries of ``kind`` whose stored document matches the
    digest in their envelope, in seq order."""
    out = []
    name = DOC_PAYLOAD[kind]
    for r in repo.doc_refs(conn, kind, after=after, status=status):
        if r.data is None:
            continue
        try:
            want = (json.loads(r.envelope).get("payloads") or {}).get(name)
        except (ValueError, AttributeError):
            continue
        if want is not None and digest_text(r.data) == want:
            out.append((r.seq, r.data))
    return out


def load_redaction_map(conn: Connection) -> RedactionMap:
    """The redaction map of every redaction entry stored."""
    return fold_redactions((seq, "redaction", doc) for seq, doc in documents(conn, "redaction"))
