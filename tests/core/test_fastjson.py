"""ledger.core.fastjson.loads gives exactly what json.loads gives: the same value, or a
ValueError where json.loads raises one."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.core.fastjson import is_canonical_line, loads, loads_line, loads_text


def _same(text: bytes | str) -> None:
    try:
        want = json.loads(text)
    except ValueError:
        with pytest.raises(ValueError):
            loads(text)
        return
    got = loads(text)
    assert _key(got) == _key(want)


def _key(v: object) -> object:
    """A comparable form that tells 1 from 1.0 and True from 1, and NaN from anything."""
    if isinstance(v, float):
        return ("f", "nan" if math.isnan(v) else v.hex())
    if isinstance(v, bool) or v is None or isinstance(v, (int, str)):
        return (type(v).__name__, v)
    if isinstance(v, list):
        return ("l", [_key(x) for x in v])
    assert isinstance(v, dict)
    return ("d", [(k, _key(x)) for k, x in v.items()])


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner,
                                                                  max_size=4),
    max_leaves=20)


@settings(max_examples=400, deadline=None)
@given(json_values, st.booleans())
def test_it_agrees_with_json_loads_on_json_values(value, ascii_only):
    text = json.dumps(value, ensure_ascii=ascii_only)
    _same(text)
    _same(text.encode("utf-8"))


@settings(max_examples=400, deadline=None)
@given(st.binary(max_size=40))
def test_it_agrees_with_json_loads_on_arbitrary_bytes(data):
    _same(data)


@pytest.mark.parametrize("text", [
    b'{"a": 1, "a": 2}',                      # duplicate key: the last one, in both
    b'[NaN, Infinity, -Infinity]',            # json.loads takes them, orjson does not
    b'123456789012345678901234567890',        # beyond 64 bits
    b'-9223372036854775809', b'18446744073709551616',
    b'1e400', b'-0.0', b'-0', b'1.7976931348623157e308', b'9223372036854775807', b'0.1', b'1E5', b'5e-324',
    b'"\\ud800"', b'"\\udc00\\ud800"',        # lone surrogate escapes
    '"\ud83d\ude00"'.encode("utf-8", "surrogatepass"),
    b'\xef\xbb\xbf{}',                         # a byte-order mark
    '{"x": 1}'.encode("utf-16"), '[1]'.encode("utf-32"),
    b'"\xff"', b'{"a":}', b'', b' ', b'[1,]', b'{"a":1,}', b'01', b'"\t"', b'"\x00"',
    b'{"a": [1, {"b": null}]} ', b'\n[true]\n', b'[1] [2]', b'"\\u0000"',
    "\"caf\u00e9\"", "[\"\u2028\"]",
])
def test_it_agrees_with_json_loads_on_edge_inputs(text):
    _same(text)


# -- loads_text: exactly json.loads(raw.decode("utf-8")) ------------------------------
def _same_text(raw: bytes) -> None:
    try:
        want = json.loads(raw.decode("utf-8"))
    except ValueError:
        with pytest.raises(ValueError):
            loads_text(raw)
        return
    assert _key(loads_text(raw)) == _key(want)


@settings(max_examples=300, deadline=None)
@given(json_values)
def test_loads_text_agrees_on_json_values(value):
    _same_text(json.dumps(value, ensure_ascii=False).encode("utf-8", "surrogatepass"))


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=40))
def test_loads_text_agrees_on_arbitrary_bytes(data):
    _same_text(data)


@pytest.mark.parametrize("raw", [
    b'\xef\xbb\xbf{}', b'\x00{\x00}', '{"x": 1}'.encode("utf-16"), b'{"a":1,"a":2}',
    b'[NaN]', b'99999999999999999999', b'"\\ud800"', b'"\xed\xa0\x80"', b'{"a":"\xff"}',
])
def test_loads_text_agrees_on_edge_inputs(raw):
    _same_text(raw)


# -- is_canonical_line: True only where dump_line gives the very bytes -----------------
def _dump_line(obj: object) -> bytes:
    return (json.dumps(obj, ensure_ascii=False, separators=(",", ":"), sort_keys=True)
            + "\n").encode("utf-8")


@settings(max_examples=400, deadline=None)
@given(json_values)
def test_is_canonical_line_never_disagrees_with_the_standard_encoder(value):
    obj = {"v": value}
    try:
        raw = _dump_line(obj)
    except UnicodeEncodeError:
        return
    assert is_canonical_line(obj, raw) in (True, None)  # canonical by construction
    assert is_canonical_line(obj, raw + b" ") is None
    assert is_canonical_line(obj, b" " + raw) is None


@pytest.mark.parametrize("value", [1.0, 1e16, 1e-5, 1e22, 0.1, -0.0, float("nan"),
                                   float("inf"), 2**64, -(2**63) - 1, [1.5], {"x": 2.0}])
def test_is_canonical_line_leaves_floats_and_big_integers_to_the_standard_encoder(value):
    obj = {"v": value}
    raw = _dump_line(obj)
    assert is_canonical_line(obj, raw) is None


def test_every_code_point_is_escaped_as_the_standard_encoder_does():
    for cp in [*range(0, 0x800), *range(0x2000, 0x2100), 0xFEFF, 0xFFFF, 0x10000, 0x10FFFF]:
        if 0xD800 <= cp < 0xE000:
            continue
        obj = {chr(cp): chr(cp), "k": [chr(cp)]}
        assert is_canonical_line(obj, _dump_line(obj)) is True, hex(cp)


# -- loads_line: loads_text's value, and True only where raw is dump_line of it ----------
def _same_line(raw: bytes) -> None:
    try:
        want = json.loads(raw.decode("utf-8"))
    except ValueError:
        with pytest.raises(ValueError):
            loads_line(raw)
        return
    got, canonical = loads_line(raw)
    assert _key(got) == _key(want)
    if canonical:
        assert _dump_line(want) == raw


@settings(max_examples=400, deadline=None)
@given(json_values, st.booleans())
def test_loads_line_agrees_with_json_loads_and_the_standard_encoder(value, compact):
    obj = {"v": value, "n": 1}
    try:
        raw = _dump_line(obj) if compact else json.dumps(obj).encode("utf-8")
    except UnicodeEncodeError:
        return
    _same_line(raw)
    _same_line(raw.rstrip(b"\n"))


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=40))
def test_loads_line_agrees_on_arbitrary_bytes(data):
    _same_line(data)


@pytest.mark.parametrize("raw", [
    b'{"seq":18446744073709551617}\n',      # beyond 64 bits: orjson reads a float
    b'{"seq":18446744073709551616}\n', b'{"a":1.0}\n', b'{"a":1e16}\n', b'{"a":[0.5]}\n',
    b'{"a":1,"a":2}\n', b'{"b":1,"a":2}\n', b'{"a":"\\u00e9"}\n', b'{"a":"\xc3\xa9"}\n',
    b'{"a":"\\ud800"}\n', b'[NaN]\n', b'\xef\xbb\xbf{}\n', b'{"a":2}', b'{"a": 2}\n',
])
def test_loads_line_agrees_on_edge_inputs(raw):
    _same_line(raw)
    if raw in (b'{"seq":18446744073709551617}\n', b'{"a":1.0}\n'):
        assert loads_line(raw)[1] is False  # a float: the standard encoder decides
    assert loads_line(b'{"a":2}\n') == ({"a": 2}, True)
