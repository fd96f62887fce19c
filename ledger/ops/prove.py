"""Self-contained proof bundles (format: docs/format-checkpoint.md).

An inclusion bundle carries everything needed to check one entry with no
database: its envelope and payload bytes, the hashes that link it, the RFC
9162 audit path and the signed checkpoint the path leads to.  A consistency
bundle carries two signed checkpoints and the proof between them.  Verify
with ``ledger.crypto.proof_verify``.
"""

from __future__ import annotations

import base64
import json
from typing import TYPE_CHECKING, Any

from ledger.core.entry import hash_hex
from ledger.core.note import Checkpoint, NoteError, parse_checkpoint_body, parse_note
from ledger.crypto.keys import Keyring
from ledger.crypto.proof_verify import CONSISTENCY_FORMAT, INCLUSION_FORMAT
from ledger.errors import NotFound, UsageError
from ledger.ops.checkpoint import (
    CheckpointError,
    consistency_proof,
    inclusion_proof,
    latest_checkpoint,
    make_checkpoint,
    tree_root,
)
from ledger.store import entries as repo

if TYPE_CHECKING:
    from ledger.facade import Ledger


def parse_checkpoint_note(ledger: Ledger, note: str, what: str = "checkpoint") -> Checkpoint:
    """Parse a signed checkpoint of this ledger and check that it commits to the stored tree.

    Raises UsageError (malformed, another origin, larger than the ledger) or
    CheckpointError (this ledger's tree has another root at that size).
    """
    try:
        cp = parse_checkpoint_body(parse_note(note).text)
    except NoteError as exc:
        raise UsageError(f"{what} is not a signed checkpoint: {exc.message}",
                         code="bad_checkpoint", field=what) from exc
    if cp.origin != ledger.meta.origin:
        raise UsageError(f"{what} is for {cp.origin!r}, not this ledger"
                         f" ({ledger.meta.origin!r})", code="bad_checkpoint", field=what)
    root = tree_root(ledger, cp.size)
    if root != cp.root_hash:
        raise CheckpointError(f"{what} (size {cp.size}) does not match this ledger's tree:"
                              f" root {cp.root_hash.hex()} vs {root.hex()}",
                              detail={"size": cp.size})
    return cp


def covering_checkpoint(ledger: Ledger, seq: int, keyring: Keyring | None) -> str:
    """The latest stored checkpoint if it covers ``seq``; else a new one (needs keys)."""
    latest = latest_checkpoint(ledger)
    if latest is not None and latest.size > seq:
        return latest.note
    if keyring is None:
        raise UsageError(f"no stored checkpoint covers seq {seq} and no keyring to sign one",
                         code="no_checkpoint", field="checkpoint")
    return make_checkpoint(ledger, keyring)


def entry_record(ledger: Ledger, seq: int) -> tuple[str, dict[str, Any]]:
    """(ledger id, the bundle's ``entry`` object) for the entry at ``seq``.  Raises NotFound."""
    with ledger.engine.connect() as conn:
        row = repo.get_entry(conn, seq)
        if row is None:
            raise NotFound(f"no entry with seq {seq}", field="seq")
        envelope = bytes(row.envelope)
        committed = json.loads(envelope).get("payloads") or {}
        blobs = repo.get_payloads(conn, committed.values())
    payloads = {name: {"digest": d, "data_b64": (base64.b64encode(blobs[d]).decode("ascii")
                                                 if d in blobs else None)}
                for name, d in sorted(committed.items()) if d is not None}
    return ledger.meta.ledger_id, {
        "envelope": envelope.decode("utf-8"), "recorded_at_us": row.recorded_at,
        "prev_hash": hash_hex(bytes(row.prev_hash)), "body_hash": hash_hex(bytes(row.body_hash)),
        "entry_hash": hash_hex(bytes(row.entry_hash)), "payloads": payloads}


def inclusion_bundle(ledger: Ledger, seq: int, checkpoint: str | None = None,
                     keyring: Keyring | None = None) -> dict[str, Any]:
    """The ``ledger-inclusion-proof/1`` bundle for the entry at ``seq``.

    ``checkpoint``: a signed note of this ledger with size > seq; default the
    latest stored checkpoint, or a new one signed by ``keyring`` if none
    covers ``seq``.  Raises NotFound, UsageError, CheckpointError.
    """
    ledger_id, entry = entry_record(ledger, seq)
    note = checkpoint if checkpoint is not None else covering_checkpoint(ledger, seq, keyring)
    cp = parse_checkpoint_note(ledger, note)
    if seq >= cp.size:
        raise UsageError(f"the checkpoint (size {cp.size}) does not cover seq {seq}",
                         code="seq_out_of_range", field="seq")
    path = inclusion_proof(ledger, seq, cp.size)
    return {"format": INCLUSION_FORMAT, "origin": cp.origin, "ledger_id": ledger_id,
            "seq": seq, "tree_size": cp.size, "leaf_index": seq, "entry": entry,
            "inclusion_path": [h.hex() for h in path], "checkpoint": note}


def consistency_bundle(ledger: Ledger, old: str, new: str) -> dict[str, Any]:
    """The ``ledger-consistency-proof/1`` bundle between two signed checkpoints of this
    ledger.  Raises UsageError (old larger than new) or CheckpointError."""
    cp_old = parse_checkpoint_note(ledger, old, "old")
    cp_new = parse_checkpoint_note(ledger, new, "new")
    if cp_old.size > cp_new.size:
        raise UsageError(f"old checkpoint (size {cp_old.size}) is larger than new"
                         f" ({cp_new.size})", code="size_out_of_range", field="old")
    path = consistency_proof(ledger, cp_old.size, cp_new.size)
    return {"format": CONSISTENCY_FORMAT, "origin": cp_old.origin, "old": old, "new": new,
            "path": [h.hex() for h in path]}
