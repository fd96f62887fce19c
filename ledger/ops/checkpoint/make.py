"""Signed checkpoints of the ledger's Merkle tree, and proofs from the stored tree.

``make_checkpoint`` syncs the tree (cost: the entries added since the last
sync), then, under the append lock, reads the ``popcount(size)`` edge nodes
for the root and the O(log n) nodes of a consistency proof from the latest
stored checkpoint, and refuses to sign unless that proof verifies.  So a
checkpoint never contradicts an earlier one, and its cost does not grow with
the ledger.  Every active key of the keyring named after the ledger origin
signs (several signature lines during a rotation).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ledger.core.merkle import (
    NodeId,
    NodeSpec,
    consistency_nodes,
    fold_inclusion,
    inclusion_ids,
    node_ids,
    resolve_proof,
    verify_consistency,
)
from ledger.core.note import (
    Checkpoint,
    format_checkpoint_body,
    parse_checkpoint_body,
    parse_note,
)
from ledger.core.tenant import TenantHead, extension_line, needs_extension, sorted_heads
from ledger.crypto.keys import Keyring
from ledger.crypto.note_sign import sign_note
from ledger.errors import CheckpointError, NoteError, ProofError, UsageError
from ledger.ops.checkpoint.check import check_against_checkpoint
from ledger.ops.checkpoint.tree import StoredTree, extend_tree, sync_tree
from ledger.ops.context import LedgerContext
from ledger.store.append import append_transaction
from ledger.store.tenants import heads_at
from ledger.store.tree import CheckpointRow, TreeStore, read_store

__all__ = ["CheckpointError", "CheckpointRow", "check_against_checkpoint", "checkpoint_at",
           "consistency_proof", "inclusion_proof", "latest_checkpoint", "make_checkpoint",
           "make_checkpoint_bounded", "tree_root"]


def make_checkpoint(ctx: LedgerContext, keyring: Keyring) -> str:
    """Sign (origin, size, root) of the whole ledger with every active key; store and
    return the signed note text.

    Raises KeyringError (no usable active key for the origin), CheckpointError
    (the tree is not a consistent extension of the latest stored checkpoint;
    nothing is signed) and TreeIntegrityError (entries and stored tree disagree).
    If a checkpoint of the same size is already stored, it is kept; the note
    returned is then freshly signed by the current keys (identical unless the
    active keys changed).
    """
    note = _sign_checkpoint(ctx, keyring, 0)
    assert note is not None  # no interval: always signed
    return note


def make_checkpoint_bounded(ctx: LedgerContext, keyring: Keyring, min_interval_us: int,
                            ) -> str | None:
    """:func:`make_checkpoint`, unless the latest stored checkpoint was made less than
    ``min_interval_us`` ago: then nothing is signed and None is returned.

    The age is read under the append lock from the stored ``created_at``, so the bound
    holds across every process that serves this ledger (``ledger serve --workers``,
    several hosts on one PostgreSQL) and across restarts: on-demand signing adds at most
    one checkpoint per interval.  Raises as :func:`make_checkpoint`."""
    return _sign_checkpoint(ctx, keyring, min_interval_us)


def _sign_checkpoint(ctx: LedgerContext, keyring: Keyring, min_interval_us: int) -> str | None:
    origin = ctx.meta.origin
    signers = keyring.signers(origin)
    sync_tree(ctx.engine)  # bulk catch-up in chunks, outside this transaction
    with append_transaction(ctx.engine) as txn:
        store = TreeStore(txn.cur, txn.pg)
        head_size = txn.lock_head().size  # from here on, no other process signs
        latest = store.latest_checkpoint()
        if min_interval_us > 0 and latest is not None and \
                ctx.clock.now_us() < latest.created_at + min_interval_us:
            return None
        size = extend_tree(store, head_size)  # what was appended meanwhile
        tree = StoredTree(store, size)
        root = tree.root(size)
        if latest is not None:
            _require_consistent(tree, latest, origin, size, root)
        body = format_checkpoint_body(Checkpoint(origin, size, root,
                                                 tenants_line(txn.cur, txn.pg, size)))
        note = body + "\n" + "".join(sign_note(body, name, key) for name, key in signers)
        if latest is None or latest.size < size:
            store.insert_checkpoint(size, root, note, ctx.clock.now_us())
    return note


def tenants_line(cur: Any, pg: bool, size: int) -> tuple[str, ...]:
    """The checkpoint's extension lines: ``tenants <n> <root>`` over the tenant heads at
    ``size`` once a tenant other than the default one has an entry there, else none (so a
    single-tenant ledger's checkpoints are what they always were)."""
    heads = [TenantHead(t, n, h) for t, n, h in heads_at(cur, pg, size)]
    return (extension_line(sorted_heads(heads)),) if needs_extension(heads) else ()


def _require_consistent(tree: StoredTree, latest: CheckpointRow, origin: str, size: int,
                        root: bytes) -> None:
    try:
        cp = parse_checkpoint_body(parse_note(latest.note).text)
    except NoteError as exc:
        raise CheckpointError(f"stored checkpoint {latest.id} is malformed: {exc.message}",
                              code="checkpoint_corrupt") from exc
    if (cp.origin, cp.size, cp.root_hash) != (origin, latest.size, latest.root_hash):
        raise CheckpointError(f"stored checkpoint {latest.id} does not match its own row"
                              " (origin, size or root)", code="checkpoint_corrupt")
    if latest.size > size:
        raise CheckpointError(
            f"refusing to sign: the ledger has {size} entries but checkpoint {latest.id}"
            f" already committed to {latest.size}", code="checkpoint_truncated",
            detail={"checkpoint_size": latest.size, "size": size})
    try:
        verify_consistency(latest.size, size, tree.consistency_proof(latest.size, size),
                           cp.root_hash, root)
    except ProofError as exc:
        raise CheckpointError(
            f"refusing to sign: the tree of size {size} is not a consistent extension of"
            f" the checkpoint of size {latest.size} ({exc.message})",
            detail={"checkpoint_size": latest.size, "size": size,
                    "checkpoint_root": cp.root_hash.hex(), "root": root.hex()}) from exc


def latest_checkpoint(ctx: LedgerContext) -> CheckpointRow | None:
    """The stored checkpoint with the largest tree size, or None."""
    with read_store(ctx.engine) as store:
        return store.latest_checkpoint()


def checkpoint_at(ctx: LedgerContext, size: int) -> CheckpointRow | None:
    with read_store(ctx.engine) as store:
        return store.checkpoint_at(size)


def _tree(ctx: LedgerContext, store: TreeStore, size: int) -> StoredTree:
    """The stored tree, synced first if it does not reach ``size`` yet."""
    head_size, tree_size = store.sizes()
    if size > head_size:
        raise UsageError(f"tree size {size} is larger than the ledger ({head_size})",
                         code="size_out_of_range", field="size")
    if size > tree_size:
        tree_size = sync_tree(ctx.engine)
    return StoredTree(store, tree_size)


def _resolve(ctx: LedgerContext, size: int, specs: list[NodeSpec]) -> list[bytes]:
    """Fetch and fold the nodes of ``specs`` in one read when the stored tree already
    reaches ``size`` (its leaf ``size - 1`` is stored); else check sizes, sync, refetch."""
    ids = node_ids(specs)
    want = list(dict.fromkeys([*ids, (0, size - 1)])) if size else ids
    with read_store(ctx.engine) as store:
        got: Mapping[NodeId, bytes] = store.get_nodes(want)
        if len(got) != len(want):
            got = _tree(ctx, store, size).nodes(want)
    return resolve_proof(specs, got)


def inclusion_proof(ctx: LedgerContext, seq: int, size: int) -> list[bytes]:
    """RFC 9162 inclusion proof for the entry at ``seq`` in the tree of ``size`` entries.

    One read of O(log n) nodes (plus a tree sync if ``size`` is beyond the stored
    tree).  Raises UsageError for ``seq``/``size`` out of range.
    """
    if not 0 <= seq < size:
        raise UsageError(f"seq {seq} is not in a tree of size {size}",
                         code="seq_out_of_range", field="seq")
    ids, ephemeral = inclusion_ids(seq, size)
    probe = (0, size - 1)  # leaf size - 1 stored: the stored tree reaches size
    want = ids if probe in ids else [*ids, probe]
    with read_store(ctx.engine) as store:
        got: Mapping[NodeId, bytes] = store.get_nodes(want)
        if len(got) != len(want):
            got = _tree(ctx, store, size).nodes(want)
    return fold_inclusion(ids, ephemeral, got)


def consistency_proof(ctx: LedgerContext, size1: int, size2: int) -> list[bytes]:
    """RFC 9162 consistency proof from tree size ``size1`` to ``size2``."""
    if not 0 <= size1 <= size2:
        raise UsageError(f"invalid consistency sizes {size1} -> {size2}",
                         code="size_out_of_range", field="size")
    return _resolve(ctx, size2, consistency_nodes(size1, size2))


def tree_root(ctx: LedgerContext, size: int) -> bytes:
    """Root of the stored tree of ``size`` entries (``popcount(size)`` node reads)."""
    with read_store(ctx.engine) as store:
        return _tree(ctx, store, size).root(size)

