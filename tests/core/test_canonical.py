"""ledger.core.canonical.canonical_json is RFC 8785 on its subset, and refuses the rest."""

from __future__ import annotations

import decimal
import math

import pytest
import rfc8785
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ledger.core.canonical import MAX_SAFE_INTEGER, CanonicalizationError, canonical_json

SETTINGS = settings(max_examples=300, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])

# Strings: every valid code point (control characters, non-ASCII, astral), with the
# troublesome ones made likely.
SPECIAL_CHARS = ["\x00", "\x08", "\t", "\n", "\x0b", "\x0c", "\r", "\x1f", '"', "\\", "/",
                 "\x7f", "\x80", "\u2028", "\u2029", "\ufeff", "\uffff", "\ue000",
                 "\U0001f600", "\U0010ffff", "é", "日"]
valid_chars = st.characters(blacklist_categories=("Cs",))  # everything but surrogates
strings = st.lists(st.one_of(valid_chars, st.sampled_from(SPECIAL_CHARS)), max_size=12).map(
    "".join)
ascii_keys = st.text(alphabet=st.characters(max_codepoint=0x7F), max_size=8)
safe_ints = st.one_of(
    st.integers(min_value=-MAX_SAFE_INTEGER, max_value=MAX_SAFE_INTEGER),
    st.sampled_from([0, 1, -1, MAX_SAFE_INTEGER, -MAX_SAFE_INTEGER, 2**31, -(2**31), 2**32]),
)
scalars = st.one_of(st.none(), st.booleans(), safe_ints, strings)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=5),
                            st.dictionaries(ascii_keys, inner, max_size=5)),
    max_leaves=25,
)


@SETTINGS
@given(values)
def test_matches_rfc8785_on_the_subset(value):
    assert canonical_json(value) == rfc8785.dumps(value)


@SETTINGS
@given(st.dictionaries(ascii_keys, scalars, max_size=10))
def test_objects_match_rfc8785(doc):
    assert canonical_json(doc) == rfc8785.dumps(doc)


@SETTINGS
@given(strings)
def test_strings_match_rfc8785(s):
    assert canonical_json(s) == rfc8785.dumps(s)
    assert canonical_json({"k": s}) == rfc8785.dumps({"k": s})


@SETTINGS
@given(st.lists(safe_ints, max_size=10))
def test_tuples_are_arrays(items):
    assert canonical_json(tuple(items)) == canonical_json(items) == rfc8785.dumps(items)


# -- refusals ---------------------------------------------------------------

finite_or_not = st.one_of(st.floats(allow_nan=True, allow_infinity=True),
                          st.sampled_from([0.0, -0.0, 1.0, 1e16, 0.1, math.nan, math.inf]))


@SETTINGS
@given(finite_or_not, st.sampled_from(["top", "list", "dict", "deep", "flat"]))
def test_floats_are_refused(x, where):
    doc = {"top": x, "list": [1, x], "dict": {"a": {"b": x}}, "deep": [[{"c": [x]}]],
           "flat": {"a": 1, "b": x}}[where]
    with pytest.raises(CanonicalizationError):
        canonical_json(doc)


@SETTINGS
@given(st.one_of(st.integers(min_value=MAX_SAFE_INTEGER + 1),
                 st.integers(max_value=-MAX_SAFE_INTEGER - 1)))
def test_big_integers_are_refused(n):
    with pytest.raises(CanonicalizationError):
        canonical_json(n)
    for doc in ({"a": [n]}, {"a": n}, {"a": {"b": n}}):
        with pytest.raises(CanonicalizationError):
            canonical_json(doc)


def test_integer_bounds_are_inclusive():
    assert canonical_json(MAX_SAFE_INTEGER) == b"9007199254740991"
    assert canonical_json(-MAX_SAFE_INTEGER) == b"-9007199254740991"
    for n in (2**53, -(2**53), 2**63, 2**64):
        with pytest.raises(CanonicalizationError):
            canonical_json(n)


@SETTINGS
@given(st.text(min_size=1).filter(lambda k: not k.isascii()), scalars)
def test_non_ascii_keys_are_refused(key, value):
    with pytest.raises(CanonicalizationError):
        canonical_json({key: value})
    with pytest.raises(CanonicalizationError):
        canonical_json({"ok": {key: value}})
    with pytest.raises(CanonicalizationError):
        canonical_json([{"ok": {key: value}}])


@pytest.mark.parametrize("key", [1, 1.5, None, True, (1, 2), b"k"])
def test_non_string_keys_are_refused(key):
    with pytest.raises(CanonicalizationError):
        canonical_json({key: 1})


@SETTINGS
@given(st.integers(min_value=0xD800, max_value=0xDFFF), strings, strings)
def test_lone_surrogates_are_refused(cp, before, after):
    s = before + chr(cp) + after
    with pytest.raises(CanonicalizationError):
        canonical_json(s)
    # flat objects take a fast path that relies on the final encode; nested ones are walked
    for doc in ({"a": s}, {"a": {"b": s}}, {"a": [s]}, {"a": {"b": [s]}}, [s]):
        with pytest.raises(CanonicalizationError):
            canonical_json(doc)


def test_surrogate_pair_written_as_code_points_is_refused():
    # Two surrogate code points in a Python str are not the astral character.
    with pytest.raises(CanonicalizationError):
        canonical_json("\ud83d\ude00")


@pytest.mark.parametrize("value", [
    b"bytes", bytearray(b"x"), {1, 2}, frozenset(), decimal.Decimal(1), object(),
    complex(1, 2), range(3), {"a": {"b": [b"nested"]}}, [decimal.Decimal("1.5")],
])
def test_unsupported_types_are_refused(value):
    with pytest.raises(CanonicalizationError):
        canonical_json(value)


def test_error_is_a_value_error_and_names_the_path():
    with pytest.raises(ValueError, match=r"\$\.a\[1\]\.b"):
        canonical_json({"a": [0, {"b": 1.5}]})


# -- fixed vectors ------------------------------------------------------------

@pytest.mark.parametrize("value, expected", [
    ("\b\f\n\r\t", b'"\\b\\f\\n\\r\\t"'),
    ("\x00\x01\x0b\x1f", b'"\\u0000\\u0001\\u000b\\u001f"'),
    ("\x1f", b'"\\u001f"'),  # lowercase hex, never \u001F
    ('"\\', b'"\\"\\\\"'),
    ("/", b'"/"'),  # solidus is not escaped
    ("\x7f", b'"\x7f"'),  # DEL is not escaped
    ("\u2028\u2029", b'"\xe2\x80\xa8\xe2\x80\xa9"'),  # raw UTF-8, not \u2028
    ("é日", '"é日"'.encode()),
    ("\U0001f600", b'"\xf0\x9f\x98\x80"'),  # astral as 4-byte UTF-8, not a \ud83d pair
    ("\ufeff", b'"\xef\xbb\xbf"'),
    ({"b": 1, "a": [True, False, None], "A": {}, "": 0},
     b'{"":0,"A":{},"a":[true,false,null],"b":1}'),
    ({"v": 1, "payloads": {"z": None, "a": "sha256:00"}, "kind": "result"},
     b'{"kind":"result","payloads":{"a":"sha256:00","z":null},"v":1}'),
    ([], b"[]"),
    ({}, b"{}"),
    (-0, b"0"),
    (True, b"true"),
    (None, b"null"),
])
def test_fixed_vectors(value, expected):
    assert canonical_json(value) == expected
    assert rfc8785.dumps(value) == expected


def test_bool_is_not_an_integer():
    assert canonical_json([True, 1, False, 0]) == b"[true,1,false,0]"
