"""ledger.core.jsonseq: the one JSON-array / JSON-lines splitter (HTTP batches and
``ledger append`` files)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ledger.core.jsonseq import documents, split_array
from ledger.errors import SubmissionError, SubmissionTooLarge

JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=5)
                    | st.floats(allow_nan=False, allow_infinity=False),
                    lambda kids: st.lists(kids, max_size=3)
                    | st.dictionaries(st.text(max_size=3), kids, max_size=3), max_leaves=8)


@given(st.lists(JSON, max_size=5), st.sampled_from(["", " ", "\n", " \t\r\n"]))
def test_elements_come_back_as_their_exact_source_text(items, ws):
    texts = [json.dumps(i, ensure_ascii=False, indent=1 if n % 2 else None)
             for n, i in enumerate(items)]
    body = (ws + "[" + ws + (ws + "," + ws).join(texts) + ws + "]" + ws).encode()
    assert split_array(body) == [t.encode() for t in texts]


def test_duplicate_keys_and_odd_spellings_are_kept_as_sent():
    body = b'[{"a":1,"a":2}, 1.0E2 ,"\\u00e9"]'
    assert split_array(body) == [b'{"a":1,"a":2}', b"1.0E2", b'"\\u00e9"']


@pytest.mark.parametrize("body,code", [
    (b"{}", "not_an_array"), (b"", "not_an_array"), (b"[1,]", "invalid_json"),
    (b"[1 2]", "invalid_json"), (b"[1]x", "invalid_json"), (b"[1", "invalid_json"),
    (b"\xff[]", "invalid_json"), (b"[" * 100_000 + b"]" * 100_000, "too_deep"),
])
def test_malformed_arrays_are_refused_with_a_code(body, code):
    with pytest.raises(SubmissionError) as err:
        split_array(body)
    assert err.value.code == code


def test_more_items_than_allowed_is_too_large():
    assert split_array(b"[1,2]", 2) == [b"1", b"2"]
    with pytest.raises(SubmissionTooLarge) as err:
        split_array(b"[1,2,3]", 2)
    assert err.value.code == "batch_too_large"


@pytest.mark.parametrize("data,want", [
    (b"", []), (b"  \n", []),
    (b'{"a": 1}', [b'{"a": 1}']),
    (b'{\n "a": 1\n}\n', [b'{\n "a": 1\n}']),
    (b' [{"a":1}, {"b":2}] ', [b'{"a":1}', b'{"b":2}']),
    (b"[]", []),
    (b'{"a":1}\n\n{"b":2}\n', [b'{"a":1}', b'{"b":2}']),
    (b'{"a":1}\nnot json\n', [b'{"a":1}', b"not json"]),
    (b'[{"a":1},]\n', [b'[{"a":1},]']),  # not an array: one (invalid) document per line
])
def test_documents_reads_an_object_an_array_or_json_lines(data, want):
    assert list(documents(data)) == want
