"""Is the ledger a consistent extension of a checkpoint an auditor kept?

The chain alone cannot tell: whoever can write the database can rewrite a
tail with a fully recomputed valid chain, or delete the newest rows and move
the head.  A checkpoint signed earlier commits to (size, root); this check
recomputes the tree from the *entries table* (not from ``merkle_nodes``,
which a rewriter could have recomputed too), streaming, O(n) hashing and
O(log n) memory, and compares:

* fewer entries than the checkpoint's size       -> class ``truncated``
* root of the first ``size`` entries differs       -> class ``rewritten``; the
  first differing seq is found by descending the stored subtrees (if they
  still hash to the checkpoint root), re-hashing one half per level
* the stored tree (what proofs are served from) is not a consistent
  extension of the checkpoint                      -> class ``forked``

Findings are :class:`ledger.core.finding.Finding` (:func:`checkpoint_findings`), or
their report dicts ``{code, class, seq, message, expected, actual}``
(:func:`check_against_checkpoint`); ``seq`` is always an int: the first affected seq,
else ``size - 1``, else 0.  Codes:
``checkpoint_truncated``, ``checkpoint_inconsistent`` (rewritten, with ``range``),
``stored_tree_inconsistent``, ``tree_larger_than_ledger``, ``entries_gap``,
``checkpoint_unverified``, ``checkpoint_origin_mismatch``.  An empty list means
the ledger extends the checkpoint.  Never raises for bad
data (a checkpoint that does not parse or verify is itself a finding).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ledger.core.finding import CHECKPOINT_FINDING_KEYS, Finding, FindingClass
from ledger.core.merkle import (
    CompactRange,
    leaf_hash,
    node_hash,
    range_nodes,
    root_from_nodes,
    verify_consistency,
)
from ledger.core.note import Checkpoint, parse_checkpoint_body, parse_note
from ledger.core.tenant import (
    TenantHead,
    heads_root,
    needs_extension,
    parse_extension,
    sorted_heads,
)
from ledger.crypto.note_sign import KnownKeys, open_checkpoint
from ledger.errors import LedgerError, ProofError
from ledger.ops.checkpoint.tree import StoredTree
from ledger.ops.context import LedgerContext
from ledger.store.tenants import all_heads_at
from ledger.store.tree import TreeStore, read_store

PAGE = 10_000


def _finding(code: str, cls: FindingClass, seq: int, message: str, expected: Any = None,
             actual: Any = None, **extra: Any) -> Finding:
    return Finding(code, seq, cls, message, expected, actual, tuple(extra.items()))


@dataclass
class _Scan:
    """Recomputed from the entries: size, gaps, and the edge hashes at marked sizes."""

    size: int = 0
    gaps: list[int] = field(default_factory=list)
    frontiers: dict[int, list[bytes]] = field(default_factory=dict)


def _scan(store: TreeStore, marks: set[int]) -> _Scan:
    out, edge = _Scan(), CompactRange()
    if 0 in marks:
        out.frontiers[0] = []
    for page in store.iter_entry_hashes(0, None, PAGE):
        for seq, entry_hash in page:
            if seq != edge.size and len(out.gaps) < 10:
                out.gaps.append(edge.size)
            edge.append(leaf_hash(entry_hash))
            if edge.size in marks:
                out.frontiers[edge.size] = list(edge.hashes)
    out.size = edge.size
    return out


def _subtree_root(store: TreeStore, start: int, width: int) -> bytes:
    edge = CompactRange()
    for page in store.iter_entry_hashes(start, start + width, PAGE):
        edge.extend(leaf_hash(h) for _, h in page)
    return edge.root()


def _first_divergence(store: TreeStore, cp: Checkpoint, actual: list[bytes]
                      ) -> tuple[int, int]:
    """``[start, end)`` known to hold the first rewritten entry (``end = start + 1`` when
    exact).  Uses stored subtrees only while they hash up to the checkpoint root."""
    whole = (cp.size - 1, cp.size)
    ids = range_nodes(0, cp.size)
    stored = store.get_nodes(ids)
    if len(stored) != len(ids) or root_from_nodes(cp.size, [stored[i] for i in ids]) != \
            cp.root_hash:
        return whole
    # the stored nodes hash to the checkpoint root and the recomputed ones do not: one differs
    diff = [(i, stored[i]) for i, h in zip(ids, actual, strict=True) if stored[i] != h]
    (level, idx), parent = diff[0]
    while level > 0:
        left, right = (level - 1, 2 * idx), (level - 1, 2 * idx + 1)
        kids = store.get_nodes([left, right])
        if len(kids) != 2 or node_hash(kids[left], kids[right]) != parent:
            return idx << level, (idx + 1) << level  # stored nodes below are not trustworthy
        width = 1 << (level - 1)
        if _subtree_root(store, left[1] * width, width) != kids[left]:
            (level, idx), parent = left, kids[left]
        else:
            (level, idx), parent = right, kids[right]
    return idx, idx + 1


def _open(note_text: str | bytes, known_keys: KnownKeys | None) -> Checkpoint:
    if known_keys is None:
        return parse_checkpoint_body(parse_note(note_text).text)
    return open_checkpoint(note_text, known_keys)[0]


def check_against_checkpoint(ctx: LedgerContext, note_text: str | bytes,
                             known_keys: KnownKeys | None = None) -> list[dict[str, Any]]:
    """:func:`checkpoint_findings` as report dicts (``range`` last where there is one)."""
    return [f.to_dict(CHECKPOINT_FINDING_KEYS)
            for f in checkpoint_findings(ctx, note_text, known_keys)]


def checkpoint_findings(ctx: LedgerContext, note_text: str | bytes,
                        known_keys: KnownKeys | None = None) -> list[Finding]:
    """Findings showing how the ledger fails to extend the checkpoint ``note_text``.

    ``known_keys`` (see ``ledger.crypto.keys.known_keys``) verifies the note's
    signature first; ``None`` skips that (the auditor vouches for the copy).
    """
    try:
        cp = _open(note_text, known_keys)
    except LedgerError as exc:
        return [_finding("checkpoint_unverified", FindingClass.SIGNATURE_INVALID, 0,
                         f"the checkpoint cannot be used: {exc}")]
    if cp.origin != ctx.meta.origin:
        return [_finding("checkpoint_origin_mismatch", FindingClass.SIGNATURE_INVALID,
                         max(cp.size - 1, 0),
                         "the checkpoint is for another ledger",
                         {"origin": cp.origin}, {"origin": ctx.meta.origin})]
    with read_store(ctx.engine) as store:
        tree_size = store.tree_size()
        scan = _scan(store, {cp.size, tree_size})
        found = [_finding("entries_gap", FindingClass.DELETED, g, f"no entry at seq {g}")
                 for g in scan.gaps]
        if scan.size < cp.size:
            return found + [_finding(
                "checkpoint_truncated", FindingClass.TRUNCATED, scan.size,
                f"the ledger has {scan.size} entries, the checkpoint committed to {cp.size}:"
                f" entries {scan.size}..{cp.size - 1} are gone",
                {"size": cp.size, "root": cp.root_hash.hex()}, {"size": scan.size})]
        root = root_from_nodes(cp.size, scan.frontiers[cp.size])
        if root != cp.root_hash:
            start, end = _first_divergence(store, cp, scan.frontiers[cp.size])
            where = f"seq {start}" if end == start + 1 else f"seq {start}..{end - 1}"
            return found + [_finding(
                "checkpoint_inconsistent", FindingClass.REWRITTEN, start,
                f"the first {cp.size} entries no longer hash to the checkpoint root"
                f" (first difference at {where})",
                {"size": cp.size, "root": cp.root_hash.hex()},
                {"size": cp.size, "root": root.hex()}, range=[start, end])]
        return found + _check_tenants(store, cp) + _check_stored_tree(store, cp, scan, tree_size)


def _check_tenants(store: TreeStore, cp: Checkpoint) -> list[Finding]:
    """The checkpoint's tenants line against the tenant heads the entries give at its size
    (docs/tenants.md): a tenant's entry removed, moved or added after the checkpoint, or a
    line left out while a tenant had entries."""
    heads = sorted_heads(TenantHead(t, n, h) for t, n, h in
                         all_heads_at(store.cur, store.pg, cp.size))
    at = max(cp.size - 1, 0)
    try:
        line = parse_extension(cp.extensions)
    except LedgerError as exc:
        return [_finding("tenant_heads_mismatch", FindingClass.FORKED, at,
                         f"the checkpoint's tenants line cannot be read: {exc}")]
    if line is None:
        if needs_extension(heads):
            return [_finding("tenant_heads_mismatch", FindingClass.FORKED, at,
                             "the checkpoint commits to no tenant heads, but tenants other "
                             "than default have entries below its size",
                             None, {"tenants": len(heads)})]
        return []
    if line != (len(heads), heads_root(heads)):
        return [_finding("tenant_heads_mismatch", FindingClass.FORKED, at,
                         "the tenant heads of the entries below the checkpoint's size are not "
                         "the ones it committed to (a tenant's entry removed, moved, added or "
                         "rolled back)",
                         {"tenants": line[0], "root": line[1].hex()},
                         {"tenants": len(heads), "root": heads_root(heads).hex()})]
    return []


def _check_stored_tree(store: TreeStore, cp: Checkpoint, scan: _Scan, tree_size: int
                       ) -> list[Finding]:
    if tree_size > scan.size:
        return [_finding("tree_larger_than_ledger", FindingClass.TRUNCATED, scan.size,
                         f"the stored tree covers {tree_size} entries, the ledger has"
                         f" {scan.size}", {"size": tree_size}, {"size": scan.size})]
    if tree_size < cp.size:
        return []  # the stored tree does not reach the checkpoint yet: nothing served to check
    actual = root_from_nodes(tree_size, scan.frontiers[tree_size])
    try:
        tree = StoredTree(store, tree_size)
        stored = tree.root(tree_size)
        if stored != actual:
            raise ProofError(f"its root {stored.hex()} is not the root of the entries")
        verify_consistency(cp.size, tree_size, tree.consistency_proof(cp.size, tree_size),
                           cp.root_hash, actual)
    except LedgerError as exc:
        return [_finding("stored_tree_inconsistent", FindingClass.FORKED, max(cp.size - 1, 0),
                         f"the stored Merkle tree (size {tree_size}) is not a consistent"
                         f" extension of the checkpoint over the current entries: {exc}",
                         {"size": cp.size, "root": cp.root_hash.hex()},
                         {"size": tree_size, "root": actual.hex()})]
    return []
