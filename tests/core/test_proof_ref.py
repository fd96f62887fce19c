"""``compute_proof_ref`` against vectors recorded from upstream qwed==8.0.0.

``tests/vectors/proof_ref.json`` is written by ``scripts/gen-fixtures`` with
upstream's own ``compute_proof_ref``; nothing here recomputes the expected
values with our code.  Evidence that JSON cannot carry is described with small
tagged objects (``$float``, ``$items``, ``$tuple``, ``$set``) rebuilt by a
whitelist decoder, never by ``eval``.
"""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.core.diagnostics import compute_proof_ref, proof_preimage

VECTORS_PATH = Path(__file__).resolve().parents[1] / "vectors" / "proof_ref.json"
VECTORS: list[dict[str, Any]] = json.loads(VECTORS_PATH.read_text(encoding="utf-8"))["vectors"]

_FLOATS = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}


def rebuild(enc: Any) -> Any:
    """The Python value a vector's JSON-encodable ``evidence`` stands for."""
    if isinstance(enc, list):
        return [rebuild(x) for x in enc]
    if isinstance(enc, dict):
        if set(enc) == {"$float"}:
            return _FLOATS[enc["$float"]]  # KeyError for anything off the whitelist
        if set(enc) == {"$tuple"}:
            return tuple(rebuild(x) for x in enc["$tuple"])
        if set(enc) == {"$items"}:
            return {rebuild(k): rebuild(v) for k, v in enc["$items"]}
        if set(enc) == {"$set"}:
            return {rebuild(x) for x in enc["$set"]}
        assert not any(k.startswith("$") for k in enc), f"unknown tag in {enc!r}"
        return {k: rebuild(v) for k, v in enc.items()}
    return enc


def _ids(v: dict[str, Any]) -> str:
    return v["desc"]


OK_VECTORS = [v for v in VECTORS if v.get("expected_error") is None]
ERR_VECTORS = [v for v in VECTORS if v.get("expected_error") is not None]


def test_vector_file_covers_the_required_cases() -> None:
    descs = " | ".join(v["desc"] for v in VECTORS)
    for needle in ("string evidence is hashed raw", "dict keys sorted", "nested list of dicts",
                   "int 1", "float 1.0", "1e-07", "1e+16", "-0.0", "NaN", "Infinity",
                   "-Infinity", "lowercase \\uXXXX", "surrogate pair", "empty dict",
                   "booleans and None", "int keys sorted numerically"):
        assert needle in descs, needle
    assert len(OK_VECTORS) >= 40 and len(ERR_VECTORS) >= 2
    for v in OK_VECTORS:
        ref = v["expected_proof_ref"]
        assert ref.startswith("sha256:") and len(ref) == 71 and ref == ref.lower()


@pytest.mark.parametrize("vector", OK_VECTORS, ids=_ids)
def test_proof_ref_matches_upstream(vector: dict[str, Any]) -> None:
    evidence = rebuild(vector["evidence"])
    assert proof_preimage(evidence) == vector["expected_preimage"]
    assert compute_proof_ref(evidence) == vector["expected_proof_ref"]


@pytest.mark.parametrize("vector", OK_VECTORS, ids=_ids)
def test_recorded_preimage_hashes_to_recorded_proof_ref(vector: dict[str, Any]) -> None:
    """The vector file is self-consistent with plain hashlib (what an auditor uses)."""
    digest = hashlib.sha256(vector["expected_preimage"].encode("utf-8")).hexdigest()
    assert "sha256:" + digest == vector["expected_proof_ref"]


@pytest.mark.parametrize("vector", ERR_VECTORS, ids=_ids)
def test_unhashable_evidence_raises_like_upstream(vector: dict[str, Any]) -> None:
    evidence = rebuild(vector["evidence"])
    expected = {"ValueError": ValueError, "UnicodeEncodeError": UnicodeEncodeError}[
        vector["expected_error"]]
    with pytest.raises(expected):
        compute_proof_ref(evidence)


def _vector(desc_prefix: str) -> dict[str, Any]:
    (v,) = [v for v in VECTORS if v["desc"].startswith(desc_prefix)]
    return v


def test_specific_spellings_recorded_from_upstream() -> None:
    """Spot checks of facts the design relies on, read from the recorded vectors."""
    assert _vector("string evidence is hashed raw")["expected_preimage"] == "hello"
    assert _vector("int 1")["expected_preimage"] == '{"v": 1}'
    assert _vector("float 1.0")["expected_preimage"] == '{"v": 1.0}'
    assert _vector("1e-07")["expected_preimage"] == '{"v": 1e-07}'
    assert _vector("1e+16")["expected_preimage"] == '{"v": 1e+16}'
    assert _vector("-0.0")["expected_preimage"] == '{"v": -0.0}'
    assert _vector("NaN bare")["expected_preimage"] == '{"v": NaN}'
    assert _vector("-Infinity")["expected_preimage"] == '{"v": -Infinity}'
    assert _vector("astral")["expected_preimage"] == '{"v": "\\ud83d\\ude00", "w": "\\udbff\\udfff"}'
    assert _vector("non-ASCII as")["expected_preimage"].startswith('{"v": "\\u00e9"')
    # Integer keys: sorted as integers (2 < 10), then written as strings -- so a
    # JSON round trip (string keys, "10" < "2") cannot reproduce the preimage.
    ints = _vector("int keys sorted numerically")
    assert ints["expected_preimage"] == '{"2": "a", "10": "b"}'
    reparsed = json.dumps(json.loads(ints["expected_preimage"]), sort_keys=True)
    assert reparsed == '{"10": "b", "2": "a"}' != ints["expected_preimage"]
    # Python sorts keys by code point: U+FFFF before U+1F600 (UTF-16 order would differ).
    keys = _vector("non-ASCII keys")["expected_preimage"]
    assert keys.index("\\uffff") < keys.index("\\ud83d\\ude00")


def test_int_float_and_signed_zero_differ_but_string_collides() -> None:
    assert compute_proof_ref({"v": 1}) != compute_proof_ref({"v": 1.0})
    assert compute_proof_ref({"v": 0.0}) != compute_proof_ref({"v": -0.0})
    # ... but string evidence is hashed raw, so it collides with any object whose
    # JSON text it spells: the kind is not part of the hash.
    assert compute_proof_ref("1") == compute_proof_ref(1)
    assert compute_proof_ref('{"a": 1}') == compute_proof_ref({"a": 1})


def test_non_serializable_evidence_raises_value_error_with_reason() -> None:
    with pytest.raises(ValueError, match="JSON-serializable"):
        compute_proof_ref({"v": object()})
    with pytest.raises(ValueError, match="JSON-serializable"):
        compute_proof_ref({1: "a", "b": 2})


# -- properties ----------------------------------------------------------------

_scalars = (st.none() | st.booleans() | st.integers(min_value=-(2 ** 70), max_value=2 ** 70)
            | st.floats(allow_nan=True, allow_infinity=True) | st.text())
_json_like = st.recursive(
    _scalars,
    lambda children: st.lists(children, max_size=4)
    | st.dictionaries(st.text(max_size=6), children, max_size=4),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(_json_like.filter(lambda x: not isinstance(x, str)))
def test_non_string_evidence_hashes_sorted_default_json_dumps(value: Any) -> None:
    expected = "sha256:" + hashlib.sha256(
        json.dumps(value, sort_keys=True).encode("utf-8")).hexdigest()
    assert compute_proof_ref(value) == expected
    pre = proof_preimage(value)
    assert pre.isascii()  # ensure_ascii=True: non-ASCII always escaped


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_string_evidence_hashes_raw_utf8(value: str) -> None:
    try:
        raw = value.encode("utf-8")
    except UnicodeEncodeError:  # lone surrogates: upstream raises too
        with pytest.raises(UnicodeEncodeError):
            compute_proof_ref(value)
        return
    assert compute_proof_ref(value) == "sha256:" + hashlib.sha256(raw).hexdigest()
    assert proof_preimage(value) == value
    if value:
        quoted = "sha256:" + hashlib.sha256(json.dumps(value).encode("utf-8")).hexdigest()
        assert compute_proof_ref(value) != quoted
