"""The stored Merkle tree: lazy-incremental sync and proofs from stored nodes.

The append path does not touch the tree.  :func:`sync_tree` extends the
stored tree from ``tree_state.size`` to the ledger size, reading only the new
entries' hashes (in pages) plus the ``popcount(size)`` right-edge nodes, under
the append lock, and inserts every subtree the new leaves complete.  Its cost
is proportional to the entries added since the last sync, never to the
ledger size.  A proof or root then needs O(log n) node reads
(:class:`StoredTree`).  See docs/merkle.md.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from sqlalchemy import Engine

from ledger.core.merkle import (
    CompactRange,
    NodeId,
    consistency_nodes,
    fold_inclusion,
    inclusion_ids,
    leaf_hash,
    node_ids,
    range_nodes,
    resolve_proof,
    root_from_nodes,
)
from ledger.errors import TreeIntegrityError, UsageError
from ledger.store.append import append_transaction
from ledger.store.tree import TreeStore, read_store

SYNC_PAGE = 5000          # entries per SELECT
SYNC_CHUNK = 200_000      # entries per transaction: bounds how long appends wait


def sync_tree(engine: Engine) -> int:
    """Extend the stored tree to the current ledger size; return the tree size.

    A no-op (one read) when the tree is current.  Raises TreeIntegrityError if
    the ledger is smaller than the stored tree, has a gap, or the first new
    entry does not link to the last stored leaf.
    """
    with read_store(engine) as store:
        head_size, tree_size = store.sizes()
    if head_size == tree_size:
        return tree_size
    while True:
        with append_transaction(engine) as txn:
            head_size = txn.lock_head().size
            end = extend_tree(TreeStore(txn.cur, txn.pg), head_size, SYNC_CHUNK)
        if end == head_size:
            return end


def extend_tree(store: TreeStore, head_size: int, limit: int | None = None) -> int:
    """Inside a transaction holding the append lock: extend the stored tree towards
    ``head_size`` by at most ``limit`` entries; return the new tree size."""
    start = store.tree_size()
    if start > head_size:
        raise TreeIntegrityError(
            f"the ledger has {head_size} entries but the stored tree already covers"
            f" {start}: entries were removed (truncated ledger)",
            code="ledger_shrank", detail={"ledger_size": head_size, "tree_size": start})
    end = head_size if limit is None else min(head_size, start + limit)
    if end == start:
        return start
    edge_ids = range_nodes(0, start)
    need = edge_ids + ([(0, start - 1)] if start else [])
    stored = store.get_nodes(need)
    missing = [i for i in need if i not in stored]
    if missing:
        raise TreeIntegrityError(f"stored tree of size {start} lacks node {missing[0]}",
                                 code="tree_node_missing")
    edge = CompactRange(start, [stored[i] for i in edge_ids])
    lasts: dict[str, bytes] = {}  # tenant -> hash of its last entry of this sync
    want = start
    for page in store.iter_entry_links(start, end, SYNC_PAGE):
        new: list[tuple[NodeId, bytes]] = []
        for seq, prev_hash, entry_hash, tenant in page:
            if seq != want:
                raise TreeIntegrityError(f"entry {want} is missing (next is {seq})",
                                         code="entry_gap", detail={"seq": want})
            prev_entry = lasts.get(tenant)
            if prev_entry is None:
                _check_tree_link(store, tenant, start, seq, prev_hash,
                                 stored.get((0, start - 1)))
            elif prev_hash != prev_entry:
                raise TreeIntegrityError(f"entry {seq} does not link to the previous entry of "
                                         f"tenant {tenant}", code="chain_broken",
                                         detail={"seq": seq})
            new.extend(edge.append(leaf_hash(entry_hash)))
            lasts[tenant], want = entry_hash, want + 1
        store.insert_nodes(new)
    if want != end:
        raise TreeIntegrityError(f"entry {want} is missing", code="entry_gap",
                                 detail={"seq": want})
    store.set_tree_size(end)
    return end


def _check_tree_link(store: TreeStore, tenant: str, start: int, seq: int, prev_hash: bytes,
                     last_leaf: bytes | None) -> None:
    """A tenant's first entry of a sync links to its last entry the stored tree holds."""
    if not start:
        return
    before = store.tenant_last_seq(tenant, start)
    if before is None:
        return
    leaf = last_leaf if before == start - 1 else store.get_nodes([(0, before)]).get((0, before))
    if leaf is not None and leaf_hash(prev_hash) != leaf:
        raise TreeIntegrityError(
            f"entry {seq} does not link to the entry the stored tree holds at {before}: the "
            "ledger was rewritten after the last tree sync",
            code="tree_link_broken", detail={"seq": seq})


class StoredTree:
    """Roots and proofs of any size up to ``size`` from the stored nodes.

    Every call reads only the O(log n) nodes it needs, in one statement.
    """

    def __init__(self, store: TreeStore, size: int | None = None) -> None:
        self.store = store
        self.size = store.tree_size() if size is None else size

    def _check(self, size: int) -> None:
        if not 0 <= size <= self.size:
            raise UsageError(f"tree size {size} is beyond the stored tree ({self.size})",
                             code="size_out_of_range", field="size")

    def nodes(self, ids: Sequence[NodeId]) -> Mapping[NodeId, bytes]:
        got = self.store.get_nodes(ids)
        if len(got) != len(ids):
            gone = next(i for i in ids if i not in got)
            raise TreeIntegrityError(f"stored tree lacks node {gone}", code="tree_node_missing")
        return got

    def root(self, size: int) -> bytes:
        self._check(size)
        ids = range_nodes(0, size)
        got = self.nodes(ids)
        return root_from_nodes(size, [got[i] for i in ids])

    def inclusion_proof(self, index: int, size: int) -> list[bytes]:
        """RFC 9162 inclusion proof of leaf ``index`` in the tree of ``size`` leaves."""
        self._check(size)
        if not 0 <= index < size:
            raise UsageError(f"seq {index} is not in a tree of size {size}",
                             code="seq_out_of_range", field="seq")
        ids, ephemeral = inclusion_ids(index, size)
        return fold_inclusion(ids, ephemeral, self.nodes(ids))

    def consistency_proof(self, size1: int, size2: int) -> list[bytes]:
        """RFC 9162 consistency proof from size1 to size2 (``size1 <= size2``)."""
        self._check(size2)
        if not 0 <= size1 <= size2:
            raise UsageError(f"invalid consistency sizes {size1} -> {size2}",
                             code="size_out_of_range", field="size")
        specs = consistency_nodes(size1, size2)
        return resolve_proof(specs, self.nodes(node_ids(specs)))

