"""RFC 9162 (§2.1) / RFC 6962 Merkle tree core: hashing, proof layout, verification.

Pure and stdlib-only; storage lives elsewhere.  The core says *which* nodes a
proof needs, the store fetches them, the core folds them.

Hashing::

    leaf_hash(e)     = SHA-256(0x00 || e)          -- e is a 32-byte entry hash
    node_hash(l, r)  = SHA-256(0x01 || l || r)
    root of size 0   = SHA-256("")
    root of size n   = MTH(D[0:n]), RFC 6962 §2.1: split at the largest power of two < n

Node ids: ``(level, index)`` names the *complete* subtree of ``2**level`` leaves
covering ``[index * 2**level, (index + 1) * 2**level)``; level 0 is the leaf
hashes.  A complete subtree's hash never changes as the tree grows, so the
store keeps one row ``(level, index, hash)`` per complete subtree (appended by
:class:`CompactRange`).  Along the ragged right edge the RFC tree also has
*ephemeral* nodes: the hash of ``[start, size)`` for a ``start`` aligned to a
power of two larger than ``size - start``.  Such a range is the fold
(:func:`hash_range`) of its maximal complete subtrees (:func:`range_nodes`).
A :class:`NodeSpec` is one proof element: a leaf range plus the complete node
ids whose fold is its hash (one id if the range is itself complete).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from typing import NamedTuple

from ledger.errors import ProofError

HASH_SIZE = 32
LEAF_PREFIX = b"\x00"
NODE_PREFIX = b"\x01"
EMPTY_ROOT = hashlib.sha256(b"").digest()

NodeId = tuple[int, int]  # (level, index) of a complete subtree


def _require_hash(value: object, what: str) -> bytes:
    if not isinstance(value, bytes) or len(value) != HASH_SIZE:
        got = f"{len(value)} bytes" if isinstance(value, bytes) else type(value).__name__
        raise ValueError(f"{what} must be {HASH_SIZE} bytes, got {got}")
    return value


def leaf_hash(entry_hash: bytes) -> bytes:
    """SHA-256(0x00 || entry_hash).  Raises ValueError unless entry_hash is 32 bytes."""
    return hashlib.sha256(LEAF_PREFIX + _require_hash(entry_hash, "entry hash")).digest()


def node_hash(left: bytes, right: bytes) -> bytes:
    """SHA-256(0x01 || left || right) for two 32-byte child hashes."""
    return hashlib.sha256(NODE_PREFIX + left + right).digest()


# --- node layout -------------------------------------------------------------------------

class NodeSpec(NamedTuple):
    """One proof element: the hash of leaves ``[start, end)``.

    ``ids`` are the complete subtrees covering the range left to right; the
    element's hash is ``hash_range([hash(id) for id in ids])``.  ``ephemeral``
    is true when the range is not itself a complete subtree.
    """

    start: int
    end: int
    ids: tuple[NodeId, ...]

    @property
    def ephemeral(self) -> bool:
        return len(self.ids) > 1


def range_nodes(start: int, end: int) -> list[NodeId]:
    """Decompose ``[start, end)`` into maximal aligned complete subtrees, left to right.

    Precondition ``0 <= start <= end`` (ValueError otherwise); ``[]`` for an empty range.
    For ``start == 0`` the levels are the set bits of ``end``, largest first.
    """
    if not 0 <= start <= end:
        raise ValueError(f"invalid leaf range [{start}, {end})")
    out: list[NodeId] = []
    while start < end:
        level = (end - start).bit_length() - 1          # largest 2**level that fits
        if start:
            level = min(level, (start & -start).bit_length() - 1)  # alignment of start
        out.append((level, start >> level))
        start += 1 << level
    return out


def hash_range(hashes: Sequence[bytes]) -> bytes:
    """Fold subtree hashes right to left: ``h0 . (h1 . (... . hk))`` as RFC 6962 MTH does.

    Given the hashes of ``range_nodes(start, end)`` this is MTH(D[start:end])
    whenever ``start`` is 0 or aligned to a power of two >= ``end - start``
    (true for every proof element).  Raises ValueError on an empty sequence.
    """
    if not hashes:
        raise ValueError("hash_range needs at least one hash")
    acc = hashes[-1]
    for h in reversed(hashes[:-1]):
        acc = node_hash(h, acc)
    return acc


def _spec(start: int, end: int) -> NodeSpec:
    width = end - start
    if width & (width - 1) == 0 and start % width == 0:  # one complete subtree (the usual case)
        level = width.bit_length() - 1
        return NodeSpec(start, end, ((level, start >> level),))
    return NodeSpec(start, end, tuple(range_nodes(start, end)))


def _split(n: int) -> int:
    """Largest power of two strictly less than n (n >= 2)."""
    return 1 << ((n - 1).bit_length() - 1)


def inclusion_nodes(index: int, size: int) -> list[NodeSpec]:
    """Proof elements of RFC 6962 PATH(index, D[0:size]), leaf to root.

    Walks down from the root; at each split the sibling of the half holding
    ``index`` is an element.  Left siblings are always complete; only a right
    sibling ending at ``size`` can be ephemeral.  Raises ValueError unless
    ``0 <= index < size``.
    """
    if not 0 <= index < size:
        raise ValueError(f"leaf index {index} out of range for tree size {size}")
    specs: list[NodeSpec] = []
    a, b = 0, size
    while b - a > 1:
        k = _split(b - a)
        if index < a + k:
            specs.append(_spec(a + k, b))
            b = a + k
        else:
            specs.append(_spec(a, a + k))
            a += k
    specs.reverse()
    return specs


def consistency_nodes(size1: int, size2: int) -> list[NodeSpec]:
    """Proof elements of RFC 6962 PROOF(size1, D[0:size2]), leaf to root.

    Follows SUBPROOF(m, D[a:b], complete): descend towards the boundary
    ``size1``; when the boundary meets the end of the current range, emit that
    range's own hash unless it is the whole old tree (a power-of-two-aligned
    prefix, which the verifier already knows as root1).  Empty when
    ``size1 == 0`` or ``size1 == size2``.  Raises ValueError unless
    ``0 <= size1 <= size2``.
    """
    if not 0 <= size1 <= size2:
        raise ValueError(f"invalid consistency sizes {size1} -> {size2}")
    if size1 in (0, size2):
        return []
    specs: list[NodeSpec] = []
    a, b, old_root_is_whole_range = 0, size2, True
    while size1 != b:
        k = _split(b - a)
        if size1 <= a + k:
            specs.append(_spec(a + k, b))
            b = a + k
        else:
            specs.append(_spec(a, a + k))
            a += k
            old_root_is_whole_range = False
    if not old_root_is_whole_range:
        specs.append(_spec(a, b))
    specs.reverse()
    return specs


def node_ids(specs: Iterable[NodeSpec]) -> list[NodeId]:
    """Distinct node ids the specs need, in first-use order (what the store must fetch)."""
    return list(dict.fromkeys(i for spec in specs for i in spec.ids))


def resolve_proof(specs: Iterable[NodeSpec], nodes: Mapping[NodeId, bytes]) -> list[bytes]:
    """Proof hashes from fetched node hashes.  Raises KeyError naming a missing node id."""
    out = []
    for spec in specs:
        try:
            if len(spec.ids) == 1:
                out.append(nodes[spec.ids[0]])
            else:
                out.append(hash_range([nodes[i] for i in spec.ids]))
        except KeyError:
            missing = [i for i in spec.ids if i not in nodes]
            raise KeyError(f"node {missing[0]} needed for leaves [{spec.start}, {spec.end})"
                           ) from None
    return out


def root_from_nodes(size: int, hashes: Sequence[bytes]) -> bytes:
    """Root of the tree of ``size`` leaves from the hashes of ``range_nodes(0, size)``.

    Raises ValueError if the number of hashes is not ``popcount(size)``.
    """
    if size < 0 or len(hashes) != size.bit_count():
        raise ValueError(f"tree size {size} needs {max(size, 0).bit_count()} subtree hashes,"
                         f" got {len(hashes)}")
    return hash_range(hashes) if size else EMPTY_ROOT


# --- verification (RFC 9162 §2.1.3.2 and §2.1.4.2) ---------------------------------------

def inclusion_proof_size(index: int, size: int) -> int:
    """Number of hashes in an inclusion proof (precondition ``0 <= index < size``)."""
    inner = (index ^ (size - 1)).bit_length()   # levels below the split from the right edge
    return inner + (index >> inner).bit_count()  # + complete left siblings above it


def consistency_proof_size(size1: int, size2: int) -> int:
    """Number of hashes in a consistency proof (precondition ``0 < size1 < size2``)."""
    level = (size1 & -size1).bit_length() - 1    # size1's lowest set bit
    index, size = (size1 - 1) >> level, ((size2 - 1) >> level) + 1
    seed = 0 if index == 0 else 1                # root1 itself is the seed if size1 == 2**k
    return seed + inclusion_proof_size(index, size)


def _check_proof_input(proof: Sequence[bytes], **hashes: bytes) -> None:
    for name, value in hashes.items():
        if not isinstance(value, bytes) or len(value) != HASH_SIZE:
            raise ProofError(f"{name} is not a {HASH_SIZE}-byte hash")
    if set(map(type, proof)) <= {bytes} and set(map(len, proof)) <= {HASH_SIZE}:
        return  # the common case, checked at C speed
    for i, value in enumerate(proof):
        if not isinstance(value, bytes) or len(value) != HASH_SIZE:
            raise ProofError(f"proof[{i}] is not a {HASH_SIZE}-byte hash")


def _short(h: bytes) -> str:
    return h.hex()[:16]


def _require_hashes(proof: Sequence[bytes]) -> None:
    if not (set(map(type, proof)) <= {bytes} and set(map(len, proof)) <= {HASH_SIZE}):
        _check_proof_input(proof)


def root_from_inclusion_proof(index: int, size: int, leaf: bytes,
                              proof: Sequence[bytes]) -> bytes:
    """Root implied by an inclusion proof for leaf hash ``leaf`` at ``index`` in ``size``.

    Raises ProofError if the index is out of range, the proof has the wrong
    length, or any hash is not 32 bytes (all checked before hashing).
    """
    if not 0 <= index < size:
        raise ProofError(f"leaf index {index} out of range for tree size {size}",
                         detail={"index": index, "size": size})
    if type(leaf) is not bytes or len(leaf) != HASH_SIZE:
        raise ProofError(f"leaf_hash is not a {HASH_SIZE}-byte hash")
    want = inclusion_proof_size(index, size)
    if len(proof) != want:
        raise ProofError(f"wrong inclusion proof length for index {index} in tree size {size}:"
                         f" got {len(proof)} hashes, want {want}")
    _require_hashes(proof)
    fn, sn, r = index, size - 1, leaf
    sha, prefix = hashlib.sha256, NODE_PREFIX  # node_hash inlined: this loop is the hot path
    for p in proof:
        if fn & 1 or fn == sn:
            r = sha(prefix + p + r).digest()
            while fn and not fn & 1:
                fn, sn = fn >> 1, sn >> 1
        else:
            r = sha(prefix + r + p).digest()
        fn, sn = fn >> 1, sn >> 1
    if sn != 0:  # unreachable after the length check; kept as the RFC's final guard
        raise ProofError("inclusion proof does not reach the root")
    return r


def verify_inclusion(index: int, size: int, leaf: bytes, proof: Sequence[bytes],
                     root: bytes) -> None:
    """Check that ``leaf`` is at ``index`` in the tree of ``size`` leaves with ``root``.

    Raises ProofError (index out of range, wrong proof length, root mismatch).
    """
    if type(root) is not bytes or len(root) != HASH_SIZE:
        raise ProofError(f"root is not a {HASH_SIZE}-byte hash")
    got = root_from_inclusion_proof(index, size, leaf, proof)
    if got != root:
        raise ProofError(f"inclusion proof root mismatch for index {index} in tree size {size}:"
                         f" computed {_short(got)}…, expected {_short(root)}…")


def verify_consistency(size1: int, size2: int, proof: Sequence[bytes], root1: bytes,
                       root2: bytes) -> None:
    """Check that the tree (size1, root1) is a prefix of the tree (size2, root2).

    ``size1 == size2`` needs an empty proof and equal roots; ``size1 == 0``
    needs an empty proof and root1 == SHA-256("").  Raises ProofError on any
    failure; sizes and lengths are validated before hashing.
    """
    if size1 < 0 or size2 < 0:
        raise ProofError(f"negative tree size in consistency {size1} -> {size2}")
    if size1 > size2:
        raise ProofError(f"size1 {size1} is larger than size2 {size2}")
    _check_proof_input(proof, root1=root1, root2=root2)
    if size1 == size2:
        if proof:
            raise ProofError(f"consistency proof for equal sizes must be empty,"
                             f" got {len(proof)} hashes")
        if root1 != root2:
            raise ProofError(f"roots differ for equal tree size {size1}")
        return
    if size1 == 0:
        if proof:
            raise ProofError(f"consistency proof from the empty tree must be empty,"
                             f" got {len(proof)} hashes")
        if root1 != EMPTY_ROOT:
            raise ProofError("root1 is not the empty-tree root SHA-256('')")
        return
    want = consistency_proof_size(size1, size2)
    if len(proof) != want:
        raise ProofError(f"wrong consistency proof length for {size1} -> {size2}:"
                         f" got {len(proof)} hashes, want {want}")
    path = list(proof)
    if size1 & (size1 - 1) == 0:
        path.insert(0, root1)
    fn, sn = size1 - 1, size2 - 1
    while fn & 1:
        fn, sn = fn >> 1, sn >> 1
    fr = sr = path[0]
    for c in path[1:]:
        if fn & 1 or fn == sn:
            fr, sr = node_hash(c, fr), node_hash(c, sr)
            while fn and not fn & 1:
                fn, sn = fn >> 1, sn >> 1
        else:
            sr = node_hash(sr, c)
        fn, sn = fn >> 1, sn >> 1
    if sn != 0:  # unreachable after the length check
        raise ProofError("consistency proof does not reach the new root")
    if fr != root1:
        raise ProofError(f"consistency proof root1 mismatch for size {size1}:"
                         f" computed {_short(fr)}…, expected {_short(root1)}…")
    if sr != root2:
        raise ProofError(f"consistency proof root2 mismatch for size {size2}:"
                         f" computed {_short(sr)}…, expected {_short(root2)}…")


# --- incremental maintenance -------------------------------------------------------------

class CompactRange:
    """The right edge of ``[0, size)``: hashes of ``range_nodes(0, size)``, largest first.

    Load it from the store (``CompactRange(n, [hash(i) for i in range_nodes(0, n)])``),
    append leaf hashes, and persist the returned ``((level, index), hash)`` nodes:
    every complete subtree that the append completed, level 0 included.
    """

    def __init__(self, size: int = 0, hashes: Sequence[bytes] = ()) -> None:
        ids = range_nodes(0, size)  # ValueError if size < 0
        if len(hashes) != len(ids):
            raise ValueError(f"tree size {size} needs {len(ids)} edge hashes, got {len(hashes)}")
        self._size = size
        self._ids = ids
        self._hashes = [_require_hash(h, "edge hash") for h in hashes]

    @property
    def size(self) -> int:
        return self._size

    @property
    def ids(self) -> tuple[NodeId, ...]:
        return tuple(self._ids)

    @property
    def hashes(self) -> tuple[bytes, ...]:
        return tuple(self._hashes)

    def append(self, leaf: bytes) -> list[tuple[NodeId, bytes]]:
        """Append one *leaf hash* (already 0x00-prefixed); return the nodes it completes."""
        h = _require_hash(leaf, "leaf hash")
        level, index = 0, self._size
        new = [((level, index), h)]
        while self._ids and self._ids[-1][0] == level:
            self._ids.pop()
            h = node_hash(self._hashes.pop(), h)
            level, index = level + 1, index >> 1
            new.append(((level, index), h))
        self._ids.append((level, index))
        self._hashes.append(h)
        self._size += 1
        return new

    def extend(self, leaves: Iterable[bytes]) -> list[tuple[NodeId, bytes]]:
        """Append several leaf hashes; return all completed nodes in creation order."""
        return [node for leaf in leaves for node in self.append(leaf)]

    def root(self) -> bytes:
        return root_from_nodes(self._size, self._hashes)


class MemoryTree:
    """In-memory tree holding every complete subtree hash (for tests and offline use)."""

    def __init__(self, entry_hashes: Iterable[bytes] = ()) -> None:
        self._nodes: dict[NodeId, bytes] = {}
        self._edge = CompactRange()
        for entry in entry_hashes:
            self.append(entry)

    @property
    def size(self) -> int:
        return self._edge.size

    @property
    def nodes(self) -> Mapping[NodeId, bytes]:
        return self._nodes

    def append(self, entry_hash: bytes) -> int:
        """Append an entry hash (hashed into a leaf here); return its leaf index."""
        self._nodes.update(self._edge.append(leaf_hash(entry_hash)))
        return self.size - 1

    def leaf_hash(self, index: int) -> bytes:
        return self._nodes[(0, index)]

    def _size_arg(self, size: int | None) -> int:
        if size is None:
            return self.size
        if not 0 <= size <= self.size:
            raise ValueError(f"tree size {size} out of range 0..{self.size}")
        return size

    def root(self, size: int | None = None) -> bytes:
        size = self._size_arg(size)
        return root_from_nodes(size, [self._nodes[i] for i in range_nodes(0, size)])

    def inclusion_proof(self, index: int, size: int | None = None) -> list[bytes]:
        return resolve_proof(inclusion_nodes(index, self._size_arg(size)), self._nodes)

    def consistency_proof(self, size1: int, size2: int | None = None) -> list[bytes]:
        return resolve_proof(consistency_nodes(size1, self._size_arg(size2)), self._nodes)
