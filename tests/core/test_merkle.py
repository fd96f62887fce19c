"""Merkle core against a naive RFC 6962 §2.1 reference, pymerkle, and properties."""

from __future__ import annotations

import hashlib
from functools import cache

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.core import merkle as m
from ledger.errors import ProofError

MAX_INCLUSION_SIZE = 300
MAX_CONSISTENCY_SIZE = 130

ENTRIES = [hashlib.sha256(b"leaf-%d" % i).digest() for i in range(MAX_INCLUSION_SIZE)]


# --- naive reference, straight from RFC 6962 §2.1 (D = ENTRIES) --------------------------

def _h(data: bytes) -> bytes:
    return hashlib.sha256(data).digest()


def _k(n: int) -> int:
    """Largest power of two smaller than n."""
    k = 1
    while k * 2 < n:
        k *= 2
    return k


@cache
def ref_mth(a: int, b: int) -> bytes:
    """MTH(D[a:b])."""
    n = b - a
    if n == 0:
        return _h(b"")
    if n == 1:
        return _h(b"\x00" + ENTRIES[a])
    k = _k(n)
    return _h(b"\x01" + ref_mth(a, a + k) + ref_mth(a + k, b))


def ref_path(i: int, a: int, b: int) -> list[bytes]:
    """PATH(i, D[a:b]) with i relative to a."""
    n = b - a
    if n == 1:
        return []
    k = _k(n)
    if i < k:
        return ref_path(i, a, a + k) + [ref_mth(a + k, b)]
    return ref_path(i - k, a + k, b) + [ref_mth(a, a + k)]


def ref_subproof(mm: int, a: int, b: int, whole: bool) -> list[bytes]:
    """SUBPROOF(m, D[a:b], b) with m relative to a."""
    n = b - a
    if mm == n:
        return [] if whole else [ref_mth(a, b)]
    k = _k(n)
    if mm <= k:
        return ref_subproof(mm, a, a + k, whole) + [ref_mth(a + k, b)]
    return ref_subproof(mm - k, a + k, b, False) + [ref_mth(a, a + k)]


def ref_proof(size1: int, size2: int) -> list[bytes]:
    return ref_subproof(size1, 0, size2, True)


@pytest.fixture(scope="module")
def tree() -> m.MemoryTree:
    return m.MemoryTree(ENTRIES)


# --- hashing and layout -----------------------------------------------------------------

def test_hash_constants_and_primitives():
    e = ENTRIES[0]
    assert m.LEAF_PREFIX == b"\x00" and m.NODE_PREFIX == b"\x01"
    assert m.leaf_hash(e) == _h(b"\x00" + e)
    assert m.node_hash(e, e) == _h(b"\x01" + e + e)
    assert m.EMPTY_ROOT == _h(b"") == m.MemoryTree().root()
    with pytest.raises(ValueError, match="32 bytes"):
        m.leaf_hash(b"short")


def test_range_nodes_decomposition():
    assert m.range_nodes(0, 0) == []
    assert m.range_nodes(0, 13) == [(3, 0), (2, 2), (0, 12)]
    assert m.range_nodes(3, 13) == [(0, 3), (2, 1), (2, 2), (0, 12)]
    assert m.range_nodes(8, 13) == [(2, 2), (0, 12)]
    for start in range(40):
        for end in range(start, 40):
            covered = []
            for level, index in m.range_nodes(start, end):
                covered.extend(range(index << level, (index + 1) << level))
            assert covered == list(range(start, end))
    with pytest.raises(ValueError):
        m.range_nodes(5, 4)
    with pytest.raises(ValueError):
        m.hash_range([])


def test_roots_match_reference(tree):
    for size in range(MAX_INCLUSION_SIZE + 1):
        assert tree.root(size) == ref_mth(0, size), size


def test_every_complete_node_stored(tree):
    n = tree.size
    expected = {(lv, i) for lv in range(n.bit_length()) for i in range(n >> lv)}
    assert set(tree.nodes) == expected
    for (lv, i), h in tree.nodes.items():
        assert h == ref_mth(i << lv, (i + 1) << lv)


def test_all_inclusion_proofs(tree):
    for size in range(1, MAX_INCLUSION_SIZE + 1):
        root = ref_mth(0, size)
        for index in range(size):
            proof = tree.inclusion_proof(index, size)
            assert proof == ref_path(index, 0, size), (index, size)
            assert len(proof) == m.inclusion_proof_size(index, size)
            m.verify_inclusion(index, size, tree.leaf_hash(index), proof, root)


def test_all_consistency_proofs(tree):
    for size2 in range(MAX_CONSISTENCY_SIZE + 1):
        root2 = ref_mth(0, size2)
        for size1 in range(size2 + 1):
            proof = tree.consistency_proof(size1, size2)
            want = [] if size1 in (0, size2) else ref_proof(size1, size2)
            assert proof == want, (size1, size2)
            if 0 < size1 < size2:
                assert len(proof) == m.consistency_proof_size(size1, size2)
            m.verify_consistency(size1, size2, proof, ref_mth(0, size1), root2)


def test_node_specs_only_right_edge_is_ephemeral():
    for size in range(1, 70):
        for index in range(size):
            for spec in m.inclusion_nodes(index, size):
                assert not spec.ephemeral or spec.end == size
                assert spec.ids == tuple(m.range_nodes(spec.start, spec.end))


def test_node_ids_and_resolve_proof(tree):
    specs = m.inclusion_nodes(6, 13)
    assert m.node_ids(specs) == [(0, 7), (1, 2), (2, 0), (2, 2), (0, 12)]
    with pytest.raises(KeyError, match=r"\(0, 12\)"):
        m.resolve_proof(specs, {k: v for k, v in tree.nodes.items() if k != (0, 12)})


def test_compact_range_resume_matches_fresh(tree):
    for n in (0, 1, 5, 8, 13, 100):
        hashes = [tree.nodes[i] for i in m.range_nodes(0, n)]
        edge = m.CompactRange(n, hashes)
        assert edge.root() == m.root_from_nodes(n, hashes) == ref_mth(0, n)
        new = edge.extend(tree.leaf_hash(i) for i in range(n, n + 20))
        assert edge.root() == ref_mth(0, n + 20)
        for (lv, i), h in new:
            assert (i + 1) << lv > n  # only nodes that did not exist before
            assert h == tree.nodes[(lv, i)]
    with pytest.raises(ValueError, match="needs 2 edge hashes"):
        m.CompactRange(5, [ENTRIES[0]])
    with pytest.raises(ValueError):
        m.root_from_nodes(3, [ENTRIES[0]])


def test_compact_range_append_returns_completed_nodes():
    edge = m.CompactRange()
    got = [[nid for nid, _ in edge.append(m.leaf_hash(e))] for e in ENTRIES[:4]]
    assert got == [[(0, 0)], [(0, 1), (1, 0)], [(0, 2)], [(0, 3), (1, 1), (2, 0)]]
    assert edge.ids == ((2, 0),) and edge.size == 4


def test_pymerkle_roots_and_paths_agree(tree):
    # pymerkle's default (security on) hashes leaves as SHA-256(0x00 || data) and nodes
    # as SHA-256(0x01 || l || r), i.e. RFC 6962; its indices are 1-based and its
    # inclusion path starts with the leaf itself.
    pymerkle = pytest.importorskip("pymerkle")
    other = pymerkle.InmemoryTree(algorithm="sha256")
    for e in ENTRIES[:70]:
        other.append_entry(e)
    for size in range(1, 71):
        assert other.get_root(size) == tree.root(size)
    for size in (1, 2, 7, 13, 64, 70):
        for index in range(size):
            path = [bytes.fromhex(x) for x in
                    other.prove_inclusion(index + 1, size).serialize()["path"]]
            assert path[1:] == tree.inclusion_proof(index, size)


# --- verification errors ----------------------------------------------------------------

def test_inclusion_errors(tree):
    leaf, root = tree.leaf_hash(3), tree.root(7)
    proof = tree.inclusion_proof(3, 7)
    with pytest.raises(ProofError, match="out of range"):
        m.verify_inclusion(7, 7, leaf, proof, root)
    with pytest.raises(ProofError, match="out of range"):
        m.verify_inclusion(-1, 7, leaf, proof, root)
    with pytest.raises(ProofError, match="got 2 hashes, want 3"):
        m.verify_inclusion(3, 7, leaf, proof[:-1], root)
    with pytest.raises(ProofError, match="root mismatch"):
        m.verify_inclusion(3, 7, tree.leaf_hash(4), proof, root)
    with pytest.raises(ProofError, match=r"proof\[1\] is not a 32-byte hash"):
        m.verify_inclusion(3, 7, leaf, [proof[0], proof[1][:31], proof[2]], root)
    with pytest.raises(ProofError, match="root is not"):
        m.verify_inclusion(3, 7, leaf, proof, root + b"x")
    with pytest.raises(ProofError, match="leaf_hash is not"):
        m.verify_inclusion(3, 7, "ab", proof, root)


def test_consistency_errors(tree):
    r = tree.root
    proof = tree.consistency_proof(3, 7)
    with pytest.raises(ProofError, match="larger than size2"):
        m.verify_consistency(7, 3, proof, r(7), r(3))
    with pytest.raises(ProofError, match="negative"):
        m.verify_consistency(-1, 3, [], r(0), r(3))
    with pytest.raises(ProofError, match="equal sizes must be empty"):
        m.verify_consistency(5, 5, [r(5)], r(5), r(5))
    with pytest.raises(ProofError, match="roots differ"):
        m.verify_consistency(5, 5, [], r(5), r(6))
    with pytest.raises(ProofError, match="empty tree must be empty"):
        m.verify_consistency(0, 5, [r(5)], r(0), r(5))
    with pytest.raises(ProofError, match="not the empty-tree root"):
        m.verify_consistency(0, 5, [], r(1), r(5))
    m.verify_consistency(0, 0, [], r(0), r(0))
    with pytest.raises(ProofError, match="got 0 hashes, want 4"):
        m.verify_consistency(3, 7, [], r(3), r(7))
    with pytest.raises(ProofError, match="root1 mismatch"):
        m.verify_consistency(3, 7, proof, r(2), r(7))
    with pytest.raises(ProofError, match="root2 mismatch"):
        m.verify_consistency(3, 7, proof, r(3), r(6))


# --- properties -------------------------------------------------------------------------

def _flip(data: bytes, bit: int) -> bytes:
    b = bytearray(data)
    b[bit // 8] ^= 1 << (bit % 8)
    return bytes(b)


@st.composite
def index_and_size(draw):
    size = draw(st.integers(1, MAX_INCLUSION_SIZE))
    return draw(st.integers(0, size - 1)), size


@settings(max_examples=150, deadline=None)
@given(index_and_size(), st.data())
def test_inclusion_property(tree, case, data):
    index, size = case
    leaf, root = tree.leaf_hash(index), tree.root(size)
    proof = tree.inclusion_proof(index, size)
    m.verify_inclusion(index, size, leaf, proof, root)
    assert m.root_from_inclusion_proof(index, size, leaf, proof) == root
    # any single bit flip in leaf, a proof hash, or the root is rejected
    target = data.draw(st.integers(-2, len(proof) - 1))
    bit = data.draw(st.integers(0, 8 * m.HASH_SIZE - 1))
    if target == -2:
        leaf = _flip(leaf, bit)
    elif target == -1:
        root = _flip(root, bit)
    else:
        proof = proof[:target] + [_flip(proof[target], bit)] + proof[target + 1:]
    with pytest.raises(ProofError):
        m.verify_inclusion(index, size, leaf, proof, root)


@settings(max_examples=100, deadline=None)
@given(index_and_size(), st.integers(0, MAX_INCLUSION_SIZE - 1))
def test_inclusion_wrong_index_fails(tree, case, other):
    index, size = case
    if other == index:
        return
    with pytest.raises(ProofError):
        m.verify_inclusion(other, size, tree.leaf_hash(index), tree.inclusion_proof(index, size),
                           tree.root(size))


@settings(max_examples=150, deadline=None)
@given(st.integers(1, MAX_INCLUSION_SIZE - 1), st.data())
def test_consistency_property(tree, size1, data):
    size2 = data.draw(st.integers(size1 + 1, MAX_INCLUSION_SIZE))
    proof = tree.consistency_proof(size1, size2)
    root1, root2 = tree.root(size1), tree.root(size2)
    m.verify_consistency(size1, size2, proof, root1, root2)
    target = data.draw(st.integers(-2, len(proof) - 1))
    bit = data.draw(st.integers(0, 8 * m.HASH_SIZE - 1))
    if target == -2:
        root1 = _flip(root1, bit)
    elif target == -1:
        root2 = _flip(root2, bit)
    else:
        proof = proof[:target] + [_flip(proof[target], bit)] + proof[target + 1:]
    with pytest.raises(ProofError):
        m.verify_consistency(size1, size2, proof, root1, root2)
