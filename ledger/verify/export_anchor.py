"""The anchoring policy on an export bundle (``ledger verify-export --quorum ...``), offline.

The bundle's ``checkpoint.txt`` carries the witness cosignature lines; ``timestamps.json``
(``{"timestamps": [{tsa, token_b64, nonce}]}``, when the checkpoint was time-stamped)
the RFC 3161 tokens.  Neither needs the manifest's signature: a cosignature and a token
authenticate themselves against the witness keys and TSA certificates given.  The latest
``recorded_at_us`` of the exported entries is the one a token must not precede.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ledger.core.audit import outcome
from ledger.core.bundle import CHECKPOINT, ENTRIES
from ledger.core.note import parse_checkpoint_body, parse_note
from ledger.errors import NoteError
from ledger.verify.anchor import AnchorPolicy, check_anchors

TIMESTAMPS = "timestamps.json"


def _tokens(folder: Path) -> list[dict[str, Any]]:
    try:
        doc = json.loads((folder / TIMESTAMPS).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    items = doc.get("timestamps") if isinstance(doc, dict) else None
    return [t for t in items or [] if isinstance(t, dict)]


def _last_recorded_at(folder: Path) -> int | None:
    last = None
    try:
        with open(folder / ENTRIES, encoding="utf-8") as fh:
            for line in fh:
                try:
                    t = json.loads(line).get("recorded_at_us")
                except (ValueError, AttributeError):
                    continue
                if isinstance(t, int) and (last is None or t > last):
                    last = t
    except OSError:
        return None
    return last


def apply_export_anchors(directory: str | Path, report: dict[str, Any],
                         policy: AnchorPolicy) -> None:
    """Judge the bundle's checkpoint; add findings (``file`` checkpoint.txt) and
    ``report["anchors"]``, and recompute the outcome."""
    folder = Path(directory)
    try:
        text = (folder / CHECKPOINT).read_bytes()
        size = parse_checkpoint_body(parse_note(text).text).size
    except (OSError, NoteError):
        return  # the bundle verifier already reported the checkpoint
    check = check_anchors(text, size, _tokens(folder), policy, _last_recorded_at(folder))
    report["findings"].extend({**f, "seq": None, "file": CHECKPOINT} for f in check.findings)
    report["anchors"] = check.to_dict()
    report["outcome"] = outcome(report)
