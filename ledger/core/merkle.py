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


def inclusion_ids(index: int, size: int) -> tuple[list[NodeId], tuple[int, int] | None]:
    """The stored nodes of PATH(index, D[0:size]) without building NodeSpecs:
    ``(ids, ephemeral)``, leaf to root, one complete node id per proof element except
    that ``ids[pos:pos + count]`` (``ephemeral = (pos, count)``, or None) fold with
    :func:`hash_range` into the one ephemeral element a proof can have (the right
    sibling that ends at ``size``; above it the path has only left siblings).

    Walks up from the leaf: at level ``L`` the path's node is ``i = index >> L`` of
    ``last + 1``; an odd ``i`` has its (complete) left sibling ``i - 1``, an even
    ``i < last`` its right sibling ``i + 1``, and ``i == last`` has none (promoted).
    :func:`fold_inclusion` turns fetched hashes into the proof; a test pins both to
    :func:`inclusion_nodes` and :func:`resolve_proof`.  Raises ValueError unless
    ``0 <= index < size``.
    """
    if not 0 <= index < size:
        raise ValueError(f"leaf index {index} out of range for tree size {size}")
    ids: list[NodeId] = []
    ephemeral = None
    i, last, level = index, size - 1, 0
    while last:
        if i & 1:
            ids.append((level, i - 1))
        elif i < last:
            if (i + 2) << level <= size:
                ids.append((level, i + 1))
            else:
                parts = range_nodes((i + 1) << level, size)
                ephemeral = (len(ids), len(parts))
                ids.extend(parts)
        i, last, level = i >> 1, last >> 1, level + 1
    return ids, ephemeral


def fold_inclusion(ids: Sequence[NodeId], ephemeral: tuple[int, int] | None,
                   nodes: Mapping[NodeId, bytes]) -> list[bytes]:
    """The inclusion proof from the hashes of :func:`inclusion_ids`.  Raises KeyError
    naming a missing node id."""
    try:
        out = [nodes[i] for i in ids]
    except KeyError:
        missing = next(i for i in ids if i not in nodes)
        raise KeyError(f"node {missing} needed for an inclusion proof") from None
    if ephemeral is not None:
        pos, count = ephemeral
        out[pos:pos + count] = [hash_range(out[pos:pos + count])]
    return out


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


_BYTES = frozenset({bytes})
_HASH_LEN = frozenset({HASH_SIZE})


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
    inner = (index ^ (size - 1)).bit_length()  # inclusion_proof_size, inlined
    if len(proof) != inner + (index >> inner).bit_count():
        want = inclusion_proof_size(index, size)
        raise ProofError(f"wrong inclusion proof length for index {index} in tree size {size}:"
                         f" got {len(proof)} hashes, want {want}")
    if not (set(map(type, proof)) <= _BYTES and set(map(len, proof)) <= _HASH_LEN):
        _check_proof_input(proof)
    # RFC 9162 §2.1.3.2 in two runs (as Trillian's "inner" and "border" parts): below the
    # level where the paths of ``index`` and ``size - 1`` meet, bit k of ``index`` says on
    # which side proof[k] is; above it every element is a left sibling.  A test pins this
    # to the RFC's loop (``_root_rfc_loop``) on every index of many sizes.
    sha, prefix, r = hashlib.sha256, NODE_PREFIX, leaf  # node_hash inlined: the hot path
    for k in range(inner):
        p = proof[k]
        r = sha(prefix + p + r).digest() if index >> k & 1 else sha(prefix + r + p).digest()
    for p in proof[inner:]:
        r = sha(prefix + p + r).digest()
    return r


def _root_rfc_loop(index: int, size: int, leaf: bytes, proof: Sequence[bytes]) -> bytes:
    """The RFC 9162 §2.1.3.2 loop as written there (the reference for the test of
    :func:`root_from_inclusion_proof`); no input checks."""
    fn, sn, r = index, size - 1, leaf
    for p in proof:
        if fn & 1 or fn == sn:
            r = node_hash(p, r)
            while fn and not fn & 1:
                fn, sn = fn >> 1, sn >> 1
        else:
            r = node_hash(r, p)
        fn, sn = fn >> 1, sn >> 1
    if sn != 0:
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
        self._levels: list[list[bytes]] = []  # level -> hashes of its complete nodes
        self._ephemeral: dict[tuple[int, int], bytes] = {}  # (start, size) -> MTH
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
        return self.append_leaf(leaf_hash(entry_hash))

    def append_leaf(self, leaf: bytes) -> int:
        """Append a *leaf hash* (already 0x00-prefixed, e.g. a batch receipt's leaf,
        ledger.core.receipt); return its leaf index."""
        new = self._edge.append(leaf)
        self._nodes.update(new)
        levels = self._levels
        for (level, _), h in new:  # completed left to right: index == len(level list)
            if level == len(levels):
                levels.append([])
            levels[level].append(h)
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
        """PATH(index, D[0:size]) read from the stored levels, walking up from the leaf as
        :func:`inclusion_ids` does (a test pins it to :func:`inclusion_nodes`)."""
        size = self._size_arg(size)
        if not 0 <= index < size:
            raise ValueError(f"leaf index {index} out of range for tree size {size}")
        levels = self._levels
        out = []
        i, last, level = index, size - 1, 0
        while last:
            if i & 1:
                out.append(levels[level][i - 1])
            elif i < last:
                if (i + 2) << level <= size:
                    out.append(levels[level][i + 1])
                else:
                    out.append(self._ephemeral_hash((i + 1) << level, size))
            i, last, level = i >> 1, last >> 1, level + 1
        return out

    def _ephemeral_hash(self, start: int, size: int) -> bytes:
        """MTH(D[start:size]) of a right-edge range, cached: nodes below a size never
        change, so a cached value stays right as the tree grows."""
        key = (start, size)
        folded = self._ephemeral.get(key)
        if folded is None:
            folded = hash_range([self._nodes[i] for i in range_nodes(start, size)])
            if len(self._ephemeral) >= 4096:
                self._ephemeral.clear()
            self._ephemeral[key] = folded
        return folded

    def consistency_proof(self, size1: int, size2: int | None = None) -> list[bytes]:
        return resolve_proof(consistency_nodes(size1, self._size_arg(size2)), self._nodes)
