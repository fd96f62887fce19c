"""Self-contained proof bundles (format: docs/format-checkpoint.md).

An inclusion bundle carries everything needed to check one entry with no
database: its envelope and payload bytes, the hashes that link it, the RFC
9162 audit path and the signed checkpoint the path leads to.  A consistency
bundle carries two signed checkpoints and the proof between them.  Verify
with ``ledger.verify.proof``.
"""

from __future__ import annotations

from typing import Any

from ledger.core.note import Checkpoint, parse_checkpoint_body, parse_note
from ledger.crypto.keys import Keyring
from ledger.errors import CheckpointError, NoteError, NotFound, UsageError
from ledger.ops.checkpoint.anchor import with_anchors
from ledger.ops.checkpoint.make import (
    consistency_proof,
    inclusion_proof,
    latest_checkpoint,
    make_checkpoint,
    tree_root,
)
from ledger.ops.context import LedgerContext
from ledger.ops.view import proof_entry
from ledger.store import entries as repo
from ledger.store.db import connect
from ledger.verify.proof import CONSISTENCY_FORMAT, INCLUSION_FORMAT


def parse_checkpoint_note(ctx: LedgerContext, note: str, what: str = "checkpoint") -> Checkpoint:
    """Parse a signed checkpoint of this ledger and check that it commits to the stored tree.

    Raises UsageError (malformed, another origin, larger than the ledger) or
    CheckpointError (this ledger's tree has another root at that size).
    """
    try:
        cp = parse_checkpoint_body(parse_note(note).text)
    except NoteError as exc:
        raise UsageError(f"{what} is not a signed checkpoint: {exc.message}",
                         code="bad_checkpoint", field=what) from exc
    if cp.origin != ctx.meta.origin:
        raise UsageError(f"{what} is for {cp.origin!r}, not this ledger"
                         f" ({ctx.meta.origin!r})", code="bad_checkpoint", field=what)
    root = tree_root(ctx, cp.size)
    if root != cp.root_hash:
        raise CheckpointError(f"{what} (size {cp.size}) does not match this ledger's tree:"
                              f" root {cp.root_hash.hex()} vs {root.hex()}",
                              detail={"size": cp.size})
    return cp


def covering_checkpoint(ctx: LedgerContext, seq: int, keyring: Keyring | None) -> str:
    """The latest stored checkpoint if it covers ``seq``; else a new one (needs keys)."""
    latest = latest_checkpoint(ctx)
    if latest is not None and latest.size > seq:
        return latest.note
    if keyring is None:
        raise UsageError(f"no stored checkpoint covers seq {seq} and no keyring to sign one",
                         code="no_checkpoint", field="checkpoint")
    return make_checkpoint(ctx, keyring)


def proof_entry_at(ctx: LedgerContext, seq: int) -> tuple[str, dict[str, Any]]:
    """(ledger id, the bundle's ``entry`` object) for the entry at ``seq``.  Raises NotFound."""
    with connect(ctx.engine) as conn:
        row = repo.get_entry(conn, seq)
        if row is None:
            raise NotFound(f"no entry with seq {seq}", field="seq")
        blobs = repo.get_payloads(conn, seq)
    return ctx.meta.ledger_id, proof_entry(row, blobs)


def inclusion_bundle(ctx: LedgerContext, seq: int, checkpoint: str | None = None,
                     keyring: Keyring | None = None) -> dict[str, Any]:
    """The ``ledger-inclusion-proof/1`` bundle for the entry at ``seq``.

    ``checkpoint``: a signed note of this ledger with size > seq; default the
    latest stored checkpoint, or a new one signed by ``keyring`` if none
    covers ``seq``.  Raises NotFound, UsageError, CheckpointError.
    """
    ledger_id, entry = proof_entry_at(ctx, seq)
    note = checkpoint if checkpoint is not None else covering_checkpoint(ctx, seq, keyring)
    cp = parse_checkpoint_note(ctx, note)
    if seq >= cp.size:
        raise UsageError(f"the checkpoint (size {cp.size}) does not cover seq {seq}",
                         code="seq_out_of_range", field="seq")
    path = inclusion_proof(ctx, seq, cp.size)
    return with_anchors(ctx, {
        "format": INCLUSION_FORMAT, "origin": cp.origin, "ledger_id": ledger_id,
        "seq": seq, "tree_size": cp.size, "leaf_index": seq, "entry": entry,
        "inclusion_path": [h.hex() for h in path], "checkpoint": note}, "checkpoint", cp.size)


def refuse_empty_old(old_size: int) -> None:
    """Raise UsageError for a consistency proof from the empty tree: RFC 9162 defines them
    only for ``0 < old size``, and every tree extends the empty one (nothing to prove)."""
    if old_size == 0:
        raise UsageError("the old checkpoint is empty (size 0): every tree extends the empty "
                         "tree, so it needs no proof (RFC 9162 defines consistency proofs "
                         "only from a non-empty tree)", code="size_out_of_range", field="old")


def consistency_bundle(ctx: LedgerContext, old: str, new: str) -> dict[str, Any]:
    """The ``ledger-consistency-proof/1`` bundle between two signed checkpoints of this
    ledger, ``0 < old size <= new size``.  Raises UsageError (old empty or larger than new)
    or CheckpointError."""
    cp_old = parse_checkpoint_note(ctx, old, "old")
    cp_new = parse_checkpoint_note(ctx, new, "new")
    if cp_old.size > cp_new.size:
        raise UsageError(f"old checkpoint (size {cp_old.size}) is larger than new"
                         f" ({cp_new.size})", code="size_out_of_range", field="old")
    refuse_empty_old(cp_old.size)
    path = consistency_proof(ctx, cp_old.size, cp_new.size)
    return with_anchors(ctx, {"format": CONSISTENCY_FORMAT, "origin": cp_old.origin,
                              "old": old, "new": new, "path": [h.hex() for h in path]},
                        "new", cp_new.size)
