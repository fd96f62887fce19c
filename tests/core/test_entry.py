"""Unit tests for ledger.core.entry (format version 1; docs/format.md)."""

from __future__ import annotations

import hashlib
import json
import struct

import pytest

from ledger.core.canonical import CanonicalizationError
from ledger.core.entry import (
    ENTRY_TAG,
    ENVELOPE_TAG,
    FORMAT_VERSION,
    GENESIS_TAG,
    HASH_SIZE,
    KINDS,
    body_hash,
    build_envelope,
    digest_text,
    entry_hash,
    genesis_hash,
    hash_hex,
    link,
    parse_hash_hex,
)

LEDGER = "00000000-0000-4000-8000-000000000001"
PREV = hashlib.sha256(b"prev").digest()
BODY = hashlib.sha256(b"body").digest()
SEQ, T = 7, 1_767_225_600_123_456


def flip(h: bytes, i: int = 0) -> bytes:
    b = bytearray(h)
    b[i // 8] ^= 1 << (i % 8)
    return bytes(b)


# -- constants ---------------------------------------------------------------

def test_domain_tags_are_fixed():
    assert FORMAT_VERSION == 1
    assert ENVELOPE_TAG.hex() == "6c65646765722e656e76656c6f70652e763100"
    assert ENTRY_TAG.hex() == "6c65646765722e656e7472792e763100"
    assert GENESIS_TAG.hex() == "6c65646765722e67656e657369732e763100"
    assert len({ENVELOPE_TAG, ENTRY_TAG, GENESIS_TAG}) == 3
    assert HASH_SIZE == 32
    assert KINDS == ("result", "key_event", "audit_run", "redaction", "hold", "import",
                     "reverify_run")


# -- genesis ------------------------------------------------------------------

def test_genesis_is_tagged_hash_of_ledger_id_text():
    g = genesis_hash(LEDGER)
    assert len(g) == 32
    assert g == hashlib.sha256(GENESIS_TAG + LEDGER.encode("utf-8")).digest()
    assert g == genesis_hash(LEDGER)  # deterministic
    assert g != hashlib.sha256(LEDGER.encode()).digest()  # the tag matters


@pytest.mark.parametrize("other", [
    "00000000-0000-4000-8000-000000000002",
    "00000000-0000-4000-8000-000000000001 ",
    "00000000-0000-4000-8000-00000000000",
    LEDGER.replace("-", ""),
    "{" + LEDGER + "}",
    "",
])
def test_genesis_differs_per_ledger_id(other):
    assert genesis_hash(other) != genesis_hash(LEDGER)


def test_genesis_hashes_the_id_as_text():
    lid = "8f14e45f-ceea-467f-a9ad-9c2b1c3a2b1d"
    assert genesis_hash(lid.upper()) != genesis_hash(lid)  # case matters: never re-format


def test_genesis_of_many_ids_all_differ():
    ids = [f"00000000-0000-4000-8000-{i:012d}" for i in range(200)]
    assert len({genesis_hash(i) for i in ids}) == len(ids)


def test_genesis_uses_utf8():
    assert genesis_hash("ledger-é") == hashlib.sha256(GENESIS_TAG + "ledger-é".encode()).digest()


# -- entry hash ---------------------------------------------------------------

def test_entry_hash_layout():
    expected = hashlib.sha256(ENTRY_TAG + PREV + struct.pack(">Q", SEQ) + struct.pack(">Q", T)
                              + BODY).digest()
    assert entry_hash(PREV, SEQ, T, BODY) == expected


@pytest.mark.parametrize("change", [
    {"prev_hash": flip(PREV)}, {"prev_hash": flip(PREV, 255)}, {"prev_hash": BODY},
    {"seq": SEQ + 1}, {"seq": SEQ - 1}, {"seq": 0}, {"seq": 2**63 - 1},
    {"recorded_at_us": T + 1}, {"recorded_at_us": T - 1}, {"recorded_at_us": 0},
    {"body": flip(BODY)}, {"body": flip(BODY, 200)}, {"body": PREV},
])
def test_entry_hash_changes_with_every_input(change):
    base = {"prev_hash": PREV, "seq": SEQ, "recorded_at_us": T, "body": BODY}
    assert entry_hash(**{**base, **change}) != entry_hash(**base)


def test_seq_and_time_are_not_interchangeable():
    assert entry_hash(PREV, 1, 2, BODY) != entry_hash(PREV, 2, 1, BODY)
    assert entry_hash(PREV, 0, 1, BODY) != entry_hash(PREV, 1, 0, BODY)
    # prev and body swapped
    assert entry_hash(PREV, SEQ, T, BODY) != entry_hash(BODY, SEQ, T, PREV)


def test_entry_hash_every_bit_of_prev_and_body_matters():
    base = entry_hash(PREV, SEQ, T, BODY)
    seen = {base}
    for i in range(256):
        seen.add(entry_hash(flip(PREV, i), SEQ, T, BODY))
        seen.add(entry_hash(PREV, SEQ, T, flip(BODY, i)))
    assert len(seen) == 1 + 2 * 256


@pytest.mark.parametrize("bad", [b"", b"\x00" * 31, b"\x00" * 33, b"\x00" * 64])
def test_entry_hash_rejects_wrong_lengths(bad):
    with pytest.raises(ValueError):
        entry_hash(bad, SEQ, T, BODY)
    with pytest.raises(ValueError):
        entry_hash(PREV, SEQ, T, bad)


def test_entry_hash_rejects_text_hashes():
    with pytest.raises((ValueError, TypeError)):
        entry_hash(PREV.hex(), SEQ, T, BODY)  # type: ignore[arg-type]


@pytest.mark.parametrize("seq, t", [(-1, T), (SEQ, -1), (-(2**63), T), (SEQ, -(2**63))])
def test_entry_hash_rejects_negative_values(seq, t):
    with pytest.raises(ValueError):
        entry_hash(PREV, seq, t, BODY)


def test_entry_hash_rejects_values_beyond_u64():
    with pytest.raises((ValueError, struct.error)):
        entry_hash(PREV, 2**64, T, BODY)
    with pytest.raises((ValueError, struct.error)):
        entry_hash(PREV, SEQ, 2**64, BODY)


# -- body hash and link ---------------------------------------------------------

def test_body_hash_is_tagged_hash_of_envelope():
    env = build_envelope(LEDGER, "result", {"a": 1}, {"result": None})
    assert body_hash(env) == hashlib.sha256(ENVELOPE_TAG + env).digest()
    assert body_hash(env) != hashlib.sha256(env).digest()
    assert body_hash(env + b" ") != body_hash(env)


def test_link_combines_body_and_entry_hash():
    env = build_envelope(LEDGER, "result", {"engine": "math"}, {"result": "sha256:" + "0" * 64})
    e = link(PREV, SEQ, T, env)
    assert (e.seq, e.recorded_at_us, e.envelope, e.prev_hash) == (SEQ, T, env, PREV)
    assert e.body_hash == body_hash(env)
    assert e.entry_hash == entry_hash(PREV, SEQ, T, e.body_hash)


def test_link_chains_from_genesis():
    prev = genesis_hash(LEDGER)
    hashes = []
    for seq in range(3):
        env = build_envelope(LEDGER, "result", {"n": seq}, {"result": None})
        e = link(prev, seq, T, env)
        assert e.prev_hash == prev
        hashes.append(e.entry_hash)
        prev = e.entry_hash
    assert len(set(hashes)) == 3


# -- envelopes ----------------------------------------------------------------

def test_build_envelope_is_canonical_with_fixed_keys():
    env = build_envelope(LEDGER, "result", {"status": "VERIFIED", "engine": "math",
                                            "subject": None},
                         {"result": "sha256:" + "a" * 64, "preimage": None})
    assert env == (b'{"engine":"math","kind":"result","ledger":"' + LEDGER.encode()
                   + b'","payloads":{"preimage":null,"result":"sha256:' + b"a" * 64
                   + b'"},"status":"VERIFIED","subject":null,"v":1}')
    doc = json.loads(env)
    assert doc["v"] == FORMAT_VERSION and doc["kind"] == "result" and doc["ledger"] == LEDGER


def test_build_envelope_keeps_non_ascii_values_raw():
    env = build_envelope(LEDGER, "result", {"subject": "ünï 😀"}, {})
    assert "ünï 😀".encode() in env


@pytest.mark.parametrize("kind", KINDS)
def test_build_envelope_accepts_every_kind(kind):
    assert json.loads(build_envelope(LEDGER, kind, {}, {}))["kind"] == kind


@pytest.mark.parametrize("kind", ["", "Result", "RESULT", "results", "checkpoint", "unknown",
                                  " result"])
def test_build_envelope_rejects_unknown_kinds(kind):
    with pytest.raises(ValueError, match="kind"):
        build_envelope(LEDGER, kind, {}, {})


@pytest.mark.parametrize("key", ["v", "ledger", "kind", "payloads"])
def test_build_envelope_rejects_reserved_keys(key):
    with pytest.raises(ValueError, match="reserved"):
        build_envelope(LEDGER, "result", {"engine": "math", key: "x"}, {})


@pytest.mark.parametrize("fields", [{"score": 0.5}, {"n": 2**53}, {"é": 1},
                                    {"subject": "\ud800"}, {"x": b"bytes"}])
def test_build_envelope_refuses_values_outside_the_subset(fields):
    with pytest.raises(CanonicalizationError):
        build_envelope(LEDGER, "result", fields, {})


# -- text forms of hashes -------------------------------------------------------

def test_digest_text_and_hash_hex():
    assert digest_text(b"") == ("sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b"
                                "7852b855")
    h = hashlib.sha256(b"x").digest()
    assert hash_hex(h) == "sha256:" + h.hex() == digest_text(b"x")


def test_parse_hash_hex_round_trips():
    for data in (b"", b"a", b"\x00" * 100):
        h = hashlib.sha256(data).digest()
        assert parse_hash_hex(hash_hex(h)) == h
    assert parse_hash_hex("sha256:" + "0" * 64) == bytes(32)


GOOD_HEX = hashlib.sha256(b"x").hexdigest()


@pytest.mark.parametrize("text", [
    "sha256:" + GOOD_HEX.upper(),  # uppercase hex
    "sha256:" + GOOD_HEX[:-1] + "A",  # one uppercase digit
    "sha256:" + "ABCDEF" * 10 + "ABCD",
    "SHA256:" + GOOD_HEX,  # uppercase prefix
    "Sha256:" + GOOD_HEX,
    "sha256:" + GOOD_HEX[:-1],  # short
    "sha256:" + GOOD_HEX[:62],
    "sha256:",
    "sha256:" + GOOD_HEX + "0",  # long
    "sha256:" + GOOD_HEX + "00",
    GOOD_HEX,  # no prefix
    "sha512:" + GOOD_HEX,  # wrong prefix
    "sha256-" + GOOD_HEX,
    "sha-256:" + GOOD_HEX[1:],
    " sha256:" + GOOD_HEX[1:],
    "sha256:" + GOOD_HEX[:-1] + "g",  # not hex
    "sha256:" + GOOD_HEX[:-2] + "0x",
    "",
])
def test_parse_hash_hex_rejects_malformed_text(text):
    with pytest.raises(ValueError):
        parse_hash_hex(text)


@pytest.mark.parametrize("value", [None, 123, bytes(32), b"sha256:" + GOOD_HEX.encode()])
def test_parse_hash_hex_rejects_non_strings(value):
    with pytest.raises(ValueError):
        parse_hash_hex(value)  # type: ignore[arg-type]


@pytest.mark.parametrize("text", [
    "sha256:" + "00 " * 20 + "0000",  # 64 characters, 22 bytes
    "sha256:" + GOOD_HEX[:60] + " " + GOOD_HEX[60:62] + " ",  # 31 bytes
    "sha256:" + GOOD_HEX[:60] + "\t" + GOOD_HEX[60:62] + "\n",
])
def test_parse_hash_hex_rejects_whitespace(text):
    assert len(text) == 71
    with pytest.raises(ValueError):
        parse_hash_hex(text)
