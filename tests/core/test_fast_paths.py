"""The ingest fast paths of ledger/core, each pinned to the plain path it replaces.

* the v2 result envelope written into a template == ``canonical_json`` of the document;
* ``inclusion_ids``/``fold_inclusion`` and ``MemoryTree.inclusion_proof`` (levels and the
  ephemeral cache) == ``resolve_proof(inclusion_nodes(...))``;
* ``root_from_inclusion_proof`` (two runs) == the RFC 9162 loop as written;
* the submission decoder built once and the preimage encoder built once == ``json.loads``
  with the hook and ``json.dumps(sort_keys=True)``.
"""

from __future__ import annotations

import hashlib
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.core import merkle as m
from ledger.core.canonical import canonical_json
from ledger.core.diagnostics import proof_preimage
from ledger.core.entry import SLOTS, V2_RESULT_FIELDS, build_envelope
from ledger.core.submission import loads
from ledger.errors import CanonicalizationError, ProofError, SubmissionError

LEDGER = "0d9b3c52-5f36-4a43-9a52-1f0c3d7b8e10"


def _plain_envelope(ledger_id, fields, payloads):
    return canonical_json({"v": 2, "ledger": ledger_id, "kind": "result", **fields,
                           "payloads": payloads})


texts = st.one_of(st.none(), st.text(), st.text(alphabet=st.characters(max_codepoint=0x7f)))
digests = st.one_of(st.none(), st.text(alphabet="0123456789abcdef", min_size=64, max_size=64)
                    .map(lambda h: "sha256:" + h), st.text())


@settings(max_examples=300, deadline=None)
@given(fields=st.fixed_dictionaries({k: texts for k in V2_RESULT_FIELDS}),
       payloads=st.fixed_dictionaries({n: digests for n in SLOTS}),
       ledger_id=st.text())
def test_v2_result_envelope_template_equals_canonical_json(fields, payloads, ledger_id):
    assert build_envelope(ledger_id, "result", fields, payloads, 2) == \
        _plain_envelope(ledger_id, fields, payloads)


@pytest.mark.parametrize("value", ["\x00\x1f\"\\\n\t\u2028\x7f", "ünï 😀", "%s %d %%", ""])
def test_v2_result_envelope_escapes_like_canonical_json(value):
    fields = dict.fromkeys(V2_RESULT_FIELDS, value)
    payloads = dict.fromkeys(SLOTS, value)
    assert build_envelope(value, "result", fields, payloads, 2) == \
        _plain_envelope(value, fields, payloads)


@pytest.mark.parametrize("bad", [1, 2**60, 0.5, True, b"x", ["a"], {"a": "b"}, "\ud800"])
def test_v2_result_envelope_other_values_take_the_generic_path(bad):
    """Anything but text and null falls back to canonical_json: the same bytes where it
    can encode them, the same error where it cannot."""
    fields = dict.fromkeys(V2_RESULT_FIELDS)
    fields["engine"] = bad
    payloads = dict.fromkeys(SLOTS)
    try:
        want = _plain_envelope(LEDGER, fields, payloads)
    except CanonicalizationError:
        with pytest.raises(CanonicalizationError):
            build_envelope(LEDGER, "result", fields, payloads, 2)
        return
    assert build_envelope(LEDGER, "result", fields, payloads, 2) == want


def test_v2_result_envelope_still_requires_exact_keys():
    fields = dict.fromkeys(V2_RESULT_FIELDS)
    with pytest.raises(ValueError, match="fields must be exactly"):
        build_envelope(LEDGER, "result", {**fields, "subject": None}, dict.fromkeys(SLOTS), 2)
    with pytest.raises(ValueError, match="payloads must be exactly"):
        build_envelope(LEDGER, "result", fields, {"result": None}, 2)


# -- inclusion proofs ---------------------------------------------------------------------

ENTRIES = [hashlib.sha256(b"entry %d" % i).digest() for i in range(140)]


@pytest.fixture(scope="module")
def tree():
    return m.MemoryTree(ENTRIES)


def test_inclusion_ids_and_memory_tree_equal_the_spec_path(tree):
    for size in range(1, len(ENTRIES) + 1):
        for index in range(size):
            want = m.resolve_proof(m.inclusion_nodes(index, size), tree.nodes)
            ids, ephemeral = m.inclusion_ids(index, size)
            assert m.fold_inclusion(ids, ephemeral, tree.nodes) == want, (index, size)
            assert tree.inclusion_proof(index, size) == want, (index, size)
            assert tree.inclusion_proof(index, size) == want  # served from the cache
            assert len(ids) == len(set(ids))


def test_memory_tree_proofs_stay_right_as_it_grows():
    """The ephemeral cache is keyed by size: proofs of an old size do not change when
    the tree grows, and proofs of the new size use the new right edge."""
    grown = m.MemoryTree(ENTRIES[:37])
    before = {i: grown.inclusion_proof(i) for i in range(37)}
    for e in ENTRIES[37:]:
        grown.append(e)
    fresh = m.MemoryTree(ENTRIES)
    for i in range(37):
        assert grown.inclusion_proof(i, 37) == before[i]
        assert grown.inclusion_proof(i) == fresh.inclusion_proof(i)


def test_inclusion_ids_range_errors(tree):
    for index, size in ((0, 0), (5, 5), (-1, 3)):
        with pytest.raises(ValueError):
            m.inclusion_ids(index, size)
        with pytest.raises(ValueError):
            tree.inclusion_proof(index, size)
    ids, ephemeral = m.inclusion_ids(3, 13)
    with pytest.raises(KeyError, match="node"):
        m.fold_inclusion(ids, ephemeral, {})


def test_root_from_inclusion_proof_equals_the_rfc_loop(tree):
    for size in range(1, len(ENTRIES) + 1):
        root = tree.root(size)
        for index in range(size):
            proof = tree.inclusion_proof(index, size)
            leaf = tree.leaf_hash(index)
            got = m.root_from_inclusion_proof(index, size, leaf, proof)
            assert got == m._root_rfc_loop(index, size, leaf, proof) == root


@settings(max_examples=200, deadline=None)
@given(data=st.data())
def test_tampered_proofs_fail_in_both_loops(tree, data):
    size = data.draw(st.integers(2, len(ENTRIES)))
    index = data.draw(st.integers(0, size - 1))
    proof = tree.inclusion_proof(index, size)
    k = data.draw(st.integers(0, len(proof) - 1))
    bad = [*proof[:k], bytes(32), *proof[k + 1:]]
    leaf = tree.leaf_hash(index)
    assert m.root_from_inclusion_proof(index, size, leaf, bad) == \
        m._root_rfc_loop(index, size, leaf, bad) != tree.root(size)
    with pytest.raises(ProofError, match="root mismatch"):
        m.verify_inclusion(index, size, leaf, bad, tree.root(size))
    with pytest.raises(ProofError, match="32-byte"):
        m.verify_inclusion(index, size, leaf, [*proof[:k], b"short", *proof[k + 1:]],
                           tree.root(size))
    with pytest.raises(ProofError, match="length"):
        m.verify_inclusion(index, size, leaf, proof[:-1], tree.root(size))


# -- the encoders and the decoder built once ----------------------------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
    lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=5), c, max_size=4),
    max_leaves=20)


@settings(max_examples=300, deadline=None)
@given(json_values)
def test_preimage_encoder_equals_json_dumps_sort_keys(value):
    want = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
    assert proof_preimage(value) == want


@settings(max_examples=300, deadline=None)
@given(json_values)
def test_submission_decoder_equals_json_loads(value):
    text = json.dumps(value)

    def strict(pairs):
        keys = [k for k, _ in pairs]
        if len(set(keys)) != len(keys):
            raise ValueError("duplicate")
        return dict(pairs)

    try:
        want = json.loads(text, object_pairs_hook=strict)
    except ValueError:
        with pytest.raises(SubmissionError):
            loads(text)
        return
    assert json.dumps(loads(text)) == json.dumps(want)


def test_submission_decoder_still_refuses_duplicate_keys():
    with pytest.raises(SubmissionError) as info:
        loads(b'{"a": {"b": 1, "b": 2}}')
    assert info.value.code == "duplicate_key" and info.value.field == "b"
