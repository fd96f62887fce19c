"""ledger.core.digest: the one spelling of SHA-256 digest text."""

from __future__ import annotations

import hashlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ledger.core import entry
from ledger.core.digest import digest_text, hash_hex, hasher_text, parse_hash_hex, sha256


def test_the_empty_string_vector():
    assert digest_text(b"") == ("sha256:e3b0c44298fc1c149afbf4c8996fb924"
                                "27ae41e4649b934ca495991b7852b855")


@given(st.binary(max_size=512), st.integers(min_value=0, max_value=512))
def test_every_spelling_agrees(data, cut):
    running = hashlib.sha256()
    running.update(data[:cut])
    running.update(data[cut:])
    text = digest_text(data)
    assert text == hasher_text(running) == hash_hex(sha256(data))
    assert parse_hash_hex(text) == sha256(data)
    assert len(text) == 71 and text == text.lower()


@pytest.mark.parametrize("bad", ["sha256:" + "A" * 64, "sha256:" + "a" * 63, "sha1:" + "a" * 64,
                                 "sha256:" + "a" * 65, None, b"sha256:"])
def test_parse_refuses_anything_else(bad):
    with pytest.raises(ValueError):
        parse_hash_hex(bad)


def test_entry_keeps_the_names_it_always_exported():
    assert entry.digest_text is digest_text and entry.hash_hex is hash_hex
    assert entry.parse_hash_hex is parse_hash_hex and entry.sha256 is sha256
