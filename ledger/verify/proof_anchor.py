"""The anchoring policy on a proof bundle (``ledger verify-proof --quorum ...``), offline.

An inclusion bundle's ``checkpoint`` note carries the witness cosignature lines and its
optional ``timestamps`` list the RFC 3161 tokens of that checkpoint (``{tsa, token_b64,
nonce}``); a consistency bundle's apply to its ``new`` checkpoint.  The entry of an
inclusion bundle is the one whose recorded_at a token must not precede.
"""

from __future__ import annotations

import json
from typing import Any

from ledger.core.note import parse_checkpoint_body, parse_note
from ledger.errors import NoteError
from ledger.verify.anchor import AnchorPolicy, check_anchors


def check_bundle_anchors(data: str | bytes, policy: AnchorPolicy) -> dict[str, Any]:
    """``{findings, cosigned_by, quorum_met, recorded_no_later_than}`` for a bundle whose
    proof already verified (so it parses).  Never raises for bad anchors."""
    doc = json.loads(data)
    note = doc.get("checkpoint") if "checkpoint" in doc else doc.get("new")
    try:
        size = parse_checkpoint_body(parse_note(note).text).size
    except (NoteError, TypeError):
        return {"findings": ["checkpoint_malformed"]}
    entry = doc.get("entry") if isinstance(doc.get("entry"), dict) else {}
    recorded = entry.get("recorded_at_us")
    tokens = [t for t in doc.get("timestamps") or [] if isinstance(t, dict)]
    check = check_anchors(note, size, tokens, policy,
                          recorded if isinstance(recorded, int) else None)
    out = check.to_dict()
    return {"cosigned_by": ", ".join(out["cosigned_by"]) or "-",
            "quorum": out["quorum"], "quorum_met": out["quorum_met"],
            "recorded_no_later_than": out["recorded_no_later_than"],
            "findings": [f"{f['code']}: {f['message']}" for f in check.findings]}
