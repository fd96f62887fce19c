"""C2SP signed-note / tlog-checkpoint parsing, formatting and Ed25519 signing."""

from __future__ import annotations

import base64
import hashlib
import re
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat
from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.core.merkle import MemoryTree
from ledger.core.note import (
    MAX_SIGNATURES,
    Checkpoint,
    Note,
    NoteError,
    NoteSignature,
    format_checkpoint_body,
    format_note,
    parse_checkpoint_body,
    parse_note,
)
from ledger.crypto.note_sign import (
    NoteSignatureError,
    ed25519_key_id,
    known_key,
    open_checkpoint,
    sign_checkpoint,
    sign_note,
    verify_note,
)
from ledger.errors import IntegrityError, LedgerError

REPO = Path(__file__).resolve().parents[2]
ROOT = bytes(range(32))
ROOT_B64 = base64.b64encode(ROOT).decode()
BODY = f"example.com/log\n5\n{ROOT_B64}\n"

# --- worked vector (also in docs/format-checkpoint.md) ----------------------------------
VECTOR_SEED = bytes(range(1, 33))
VECTOR_NAME = "ledger.example/log"
VECTOR_PUBLIC_KEY = "79b5562e8fe654f94078b112e8a98ba7901f853ae695bed7e0e3910bad049664"
VECTOR_KEY_ID = "6240a278"
VECTOR_ROOT_13 = "cc79ebf24217a6c5cf6c1c87b2b51c22f7331ddc01bedf767a818a3f3c19d424"
VECTOR_NOTE = (
    "ledger.example/log\n"
    "13\n"
    "zHnr8kIXpsXPbByHsrUcIvczHdwBvt92eoGKPzwZ1CQ=\n"
    "\n"
    "\u2014 ledger.example/log YkCieG5XAFg2l4ZGDU2f3pySLVYh9HdyK5p9z5BerHQaVtjg5sBAHu9n4S6rgcb"
    "XSJ2A/H6UH5FJwLyVFmqO82KBAwM=\n"
)

# --- golang.org/x/mod/sumdb/note reference example (independent implementation) ---------
GO_SKEY = "PRIVATE+KEY+PeterNeumann+c74f20a3+AYEKFALVFGyNhPJEMzD1QIDr+Y7hfZx09iUvxdXHKDFz"
GO_VKEY = "PeterNeumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW"
GO_TEXT = ("If you think cryptography is the answer to your problem,\n"
           "then you don't know what your problem is.\n")
GO_SIG_LINE = ("\u2014 PeterNeumann x08go/ZJkuBS9UG/SffcvIAQxVBtiFupLLr8pAcElZInNIuGUgYN1FFYC2pZSNX"
               "gKvqfqdngotpRZb6KE6RyyBwJnAM=\n")


def _key(seed: bytes = VECTOR_SEED) -> Ed25519PrivateKey:
    return Ed25519PrivateKey.from_private_bytes(seed)


def _pub(sk: Ed25519PrivateKey) -> bytes:
    return sk.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)


# --- checkpoint body --------------------------------------------------------------------

def test_checkpoint_roundtrip():
    cp = Checkpoint("example.com/log", 5, ROOT, ("ext one", "ext-two"))
    body = format_checkpoint_body(cp)
    assert body == BODY + "ext one\next-two\n"
    assert parse_checkpoint_body(body) == cp
    assert parse_checkpoint_body(BODY) == Checkpoint("example.com/log", 5, ROOT)
    zero = f"o\n0\n{base64.b64encode(hashlib.sha256(b'').digest()).decode()}\n"
    assert parse_checkpoint_body(zero).size == 0


def test_note_error_is_invalid_category():
    assert issubclass(NoteError, LedgerError)
    err = NoteError("x")
    assert err.category == "invalid" and err.code == "malformed_note"


BAD_BODIES = {
    "empty": ("", "checkpoint body is empty"),
    "no_trailing_newline": (BODY[:-1], "does not end with a newline"),
    "two_lines": ("example.com/log\n5\n", "has 2 lines, need at least 3"),
    "too_many_lines": (BODY + "x\n" * 17, "has 20 lines, at most 19 allowed"),
    "empty_origin": (f"\n5\n{ROOT_B64}\n", "origin is empty"),
    "size_empty": (f"o\n\n{ROOT_B64}\n", "tree size line is empty"),
    "size_not_decimal": (f"o\n12a\n{ROOT_B64}\n", "not ASCII decimal"),
    "size_unicode_digit": (f"o\n\u0663\n{ROOT_B64}\n", "not ASCII decimal"),
    "size_space": (f"o\n 5\n{ROOT_B64}\n", "not ASCII decimal"),
    "size_hex": (f"o\n0x5\n{ROOT_B64}\n", "not ASCII decimal"),
    "size_leading_zero": (f"o\n05\n{ROOT_B64}\n", "has leading zeros"),
    "size_double_zero": (f"o\n00\n{ROOT_B64}\n", "has leading zeros"),
    "size_plus": (f"o\n+5\n{ROOT_B64}\n", "has a sign"),
    "size_minus": (f"o\n-1\n{ROOT_B64}\n", "has a sign"),
    "size_too_large": (f"o\n9223372036854775808\n{ROOT_B64}\n", "exceeds"),
    "size_huge": (f"o\n{'9' * 400}\n{ROOT_B64}\n", "exceeds"),
    "root_empty": ("o\n5\n\n", "root hash is empty"),
    "root_bad_base64": ("o\n5\n!!notbase64!!\n", "root hash is not valid base64"),
    "root_missing_padding": (f"o\n5\n{ROOT_B64.rstrip('=')}\n", "root hash is not valid base64"),
    "root_urlsafe": ("o\n5\n" + base64.urlsafe_b64encode(b"\xff" * 32).decode() + "\n",
                     "root hash is not valid base64"),
    "root_noncanonical": (f"o\n5\n{ROOT_B64[:-2]}9=\n", "not canonical base64"),
    "root_31_bytes": (f"o\n5\n{base64.b64encode(ROOT[:31]).decode()}\n",
                      "root hash is 31 bytes, want 32"),
    "root_33_bytes": (f"o\n5\n{base64.b64encode(ROOT + b'x').decode()}\n",
                      "root hash is 33 bytes, want 32"),
    "empty_extension": (BODY + "ext\n\n", "extension line 2 is empty"),
    "control_tab": (f"o\tx\n5\n{ROOT_B64}\n", "control character U+0009 at offset 1"),
    "control_cr": (f"o\n5\r\n{ROOT_B64}\n", "control character U+000D"),
    "control_nul": (BODY + "\x00\n", "control character U+0000"),
    "lone_surrogate": ("o\ud800\n5\n" + ROOT_B64 + "\n", "not valid UTF-8"),
}


@pytest.mark.parametrize("body,message", BAD_BODIES.values(), ids=BAD_BODIES.keys())
def test_parse_checkpoint_body_rejects(body, message):
    with pytest.raises(NoteError, match=re.escape(message)):
        parse_checkpoint_body(body)


def test_parse_checkpoint_body_rejects_bytes():
    with pytest.raises(NoteError, match="must be text"):
        parse_checkpoint_body(BODY.encode())


BAD_CHECKPOINTS = {
    "empty_origin": (("", 1, ROOT, ()), "origin is empty"),
    "origin_newline": (("a\nb", 1, ROOT, ()), "origin contains a newline"),
    "origin_control": (("a\tb", 1, ROOT, ()), "control character"),
    "negative_size": (("o", -1, ROOT, ()), "tree size must be"),
    "bool_size": (("o", True, ROOT, ()), "tree size must be"),
    "oversize": (("o", 2**63, ROOT, ()), "tree size must be"),
    "short_root": (("o", 1, ROOT[:31], ()), "root hash must be 32 bytes"),
    "str_root": (("o", 1, ROOT.hex(), ()), "root hash must be 32 bytes"),
    "empty_extension": (("o", 1, ROOT, ("",)), "extension line 1 is empty"),
    "extension_newline": (("o", 1, ROOT, ("a\nb",)), "extension line 1 contains a newline"),
    "too_many_extensions": (("o", 1, ROOT, ("x",) * 17), "17 extension lines"),
}


@pytest.mark.parametrize("args,message", BAD_CHECKPOINTS.values(), ids=BAD_CHECKPOINTS.keys())
def test_checkpoint_construction_rejects(args, message):
    with pytest.raises(NoteError, match=re.escape(message)):
        Checkpoint(*args)


@settings(max_examples=200, deadline=None)
@given(origin=st.text(st.characters(min_codepoint=0x20, exclude_categories=("Cs",)), min_size=1),
       size=st.integers(0, 2**63 - 1), root=st.binary(min_size=32, max_size=32),
       ext=st.lists(st.text(st.characters(min_codepoint=0x20, exclude_categories=("Cs",)),
                            min_size=1), max_size=3))
def test_checkpoint_roundtrip_property(origin, size, root, ext):
    cp = Checkpoint(origin, size, root, tuple(ext))
    assert parse_checkpoint_body(format_checkpoint_body(cp)) == cp


# --- signed note syntax -----------------------------------------------------------------

SIG_B64 = base64.b64encode(b"\x01\x02\x03\x04" + b"s" * 64).decode()
GOOD_NOTE = f"{BODY}\n\u2014 example.com/log {SIG_B64}\n"


def test_parse_and_format_note():
    note = parse_note(GOOD_NOTE)
    assert note == Note(BODY, (NoteSignature("example.com/log", b"\x01\x02\x03\x04", b"s" * 64),))
    assert format_note(note.text, note.signatures) == GOOD_NOTE
    assert parse_note(GOOD_NOTE.encode()) == note
    # the text may contain blank lines: the split is at the last one
    assert parse_note("a\n\nb\n" + GOOD_NOTE[len(BODY):]).text == "a\n\nb\n"


BAD_NOTES = {
    "no_trailing_newline": (GOOD_NOTE[:-1], "does not end with a newline"),
    "no_blank_line": (BODY + f"\u2014 example.com/log {SIG_B64}\n", "no blank line"),
    "no_signature_lines": (BODY + "\n", "no signature lines"),
    "hyphen_not_em_dash": (f"{BODY}\n- example.com/log {SIG_B64}\n",
                           "signature line 1 does not start with an em dash"),
    "double_hyphen": (f"{BODY}\n-- example.com/log {SIG_B64}\n", "does not start with an em dash"),
    "en_dash": (f"{BODY}\n\u2013 example.com/log {SIG_B64}\n", "does not start with an em dash"),
    "em_dash_no_space": (f"{BODY}\n\u2014example.com/log {SIG_B64}\n",
                         "does not start with an em dash"),
    "no_space_before_signature": (f"{BODY}\n\u2014 example.com/log\n",
                                  "no space between key name and signature"),
    "empty_key_name": (f"{BODY}\n\u2014  {SIG_B64}\n", "empty key name"),
    "plus_in_key_name": (f"{BODY}\n\u2014 a+b {SIG_B64}\n", "contains a space or '+'"),
    "nbsp_in_key_name": (f"{BODY}\n\u2014 a\u00a0b {SIG_B64}\n", "contains a space"),
    "empty_signature": (f"{BODY}\n\u2014 example.com/log \n", "signature line 1 signature is empty"),
    "bad_base64_signature": (f"{BODY}\n\u2014 example.com/log not*base64\n",
                             "signature line 1 signature is not valid base64"),
    "extra_field": (f"{BODY}\n\u2014 example.com/log {SIG_B64} extra\n", "not valid base64"),
    "noncanonical_signature": (f"{BODY}\n\u2014 k {base64.b64encode(b'12345').decode()[:-2]}V=\n",
                               "not canonical base64"),
    "signature_4_bytes": (f"{BODY}\n\u2014 k {base64.b64encode(b'1234').decode()}\n",
                          "signature is 4 bytes, need at least 5"),
    "second_line_bad": (f"{GOOD_NOTE}- k {SIG_B64}\n", "signature line 2"),
    "control_in_body": ("o\x07\n" + GOOD_NOTE[2:], "control character U+0007"),
    "carriage_return": (GOOD_NOTE.replace("\n", "\r\n"), "control character U+000D"),
    "too_many_signatures": (BODY + "\n" + f"\u2014 k {SIG_B64}\n" * (MAX_SIGNATURES + 1),
                            "101 signature lines, at most 100"),
    "too_large": (BODY + "x" * (1 << 20) + GOOD_NOTE[len(BODY):], "at most 1048576 allowed"),
}


@pytest.mark.parametrize("text,message", BAD_NOTES.values(), ids=BAD_NOTES.keys())
def test_parse_note_rejects(text, message):
    with pytest.raises(NoteError, match=re.escape(message)):
        parse_note(text)


def test_parse_note_rejects_invalid_utf8():
    with pytest.raises(NoteError, match="not valid UTF-8"):
        parse_note(GOOD_NOTE.encode() + b"\xff\n")


def test_parse_note_rejects_other_types():
    with pytest.raises(NoteError, match="text or bytes"):
        parse_note(123)  # type: ignore[arg-type]


def test_format_note_rejects():
    sig = NoteSignature("k", b"1234", b"s")
    with pytest.raises(NoteError, match="at least one signature"):
        format_note(BODY, [])
    with pytest.raises(NoteError, match="does not end with a newline"):
        format_note(BODY[:-1], [sig])
    with pytest.raises(NoteError, match="key ID must be 4 bytes"):
        format_note(BODY, [NoteSignature("k", b"123", b"s")])
    with pytest.raises(NoteError, match="key name is empty"):
        format_note(BODY, [NoteSignature("", b"1234", b"s")])
    with pytest.raises(NoteError, match="signature is empty"):
        format_note(BODY, [NoteSignature("k", b"1234", b"")])


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from("ab \n\u2014+=/AQ\t"), max_size=60))
def test_parse_note_only_raises_note_error(text):
    try:
        note = parse_note(text)
    except NoteError:
        return
    assert format_note(note.text, note.signatures) == text


# --- Ed25519 signing --------------------------------------------------------------------

def test_go_sumdb_note_example_reproduced_byte_for_byte():
    seed = base64.b64decode(GO_SKEY.split("+", 4)[4])
    assert seed[0] == 1  # signature type Ed25519
    name, key_id, vkey = GO_VKEY.split("+", 2)
    public = base64.b64decode(vkey)[1:]
    assert ed25519_key_id(name, public).hex() == key_id
    assert sign_note(GO_TEXT, name, _key(seed[1:])) == GO_SIG_LINE
    assert verify_note(GO_TEXT + "\n" + GO_SIG_LINE, dict([known_key(name, public)])) == [name]


def test_worked_vector():
    sk = _key()
    assert _pub(sk).hex() == VECTOR_PUBLIC_KEY
    preimage = VECTOR_NAME.encode() + b"\n\x01" + _pub(sk)
    assert ed25519_key_id(VECTOR_NAME, _pub(sk)) == hashlib.sha256(preimage).digest()[:4]
    assert ed25519_key_id(VECTOR_NAME, sk.public_key()).hex() == VECTOR_KEY_ID
    tree = MemoryTree(hashlib.sha256(b"leaf-%d" % i).digest() for i in range(13))
    assert tree.root().hex() == VECTOR_ROOT_13
    cp = Checkpoint(VECTOR_NAME, 13, tree.root())
    assert sign_checkpoint(cp, VECTOR_NAME, sk) == VECTOR_NOTE
    keys = dict([known_key(VECTOR_NAME, _pub(sk))])
    assert open_checkpoint(VECTOR_NOTE, keys) == (cp, [VECTOR_NAME])


def test_verify_ignores_unknown_keys_and_collects_names():
    a, b, c = _key(), _key(b"\x02" * 32), _key(b"\x03" * 32)
    note = (BODY + "\n" + sign_note(BODY, "c.example", c) + sign_note(BODY, "a.example", a)
            + sign_note(BODY, "b.example", b))
    keys = dict([known_key("a.example", _pub(a)), known_key("b.example", _pub(b))])
    assert verify_note(note, keys) == ["a.example", "b.example"]


def test_verify_no_known_signature():
    note = BODY + "\n" + sign_note(BODY, "a.example", _key())
    with pytest.raises(NoteSignatureError, match="no signature from a known key"):
        verify_note(note, dict([known_key("other.example", _pub(_key()))]))
    # same name, different key (so different key ID): still unknown, not a failure
    with pytest.raises(NoteSignatureError, match="no signature from a known key"):
        verify_note(note, dict([known_key("a.example", _pub(_key(b"\x09" * 32)))]))
    assert issubclass(NoteSignatureError, IntegrityError)


def test_verify_rejects_tampered_text_and_bad_known_signature():
    sk = _key()
    keys = dict([known_key(VECTOR_NAME, _pub(sk))])
    with pytest.raises(NoteSignatureError, match="does not verify"):
        verify_note(VECTOR_NOTE.replace("\n13\n", "\n14\n"), keys)
    # a good signature does not rescue a failing one from the same known key
    bad = sign_note(BODY, VECTOR_NAME, sk)
    with pytest.raises(NoteSignatureError, match="does not verify"):
        verify_note(VECTOR_NOTE + bad, keys)


def test_verify_malformed_note_is_note_error():
    with pytest.raises(NoteError):
        verify_note(VECTOR_NOTE[:-1], {})


def test_open_checkpoint_rejects_bad_body_after_valid_signature():
    sk = _key()
    body = "o\n007\n" + ROOT_B64 + "\n"
    note = body + "\n" + sign_note(body, "o", sk)
    with pytest.raises(NoteError, match="leading zeros"):
        open_checkpoint(note, dict([known_key("o", _pub(sk))]))


def test_sign_note_rejects_bad_input():
    with pytest.raises(NoteError, match="does not end with a newline"):
        sign_note("no newline", "k", _key())
    with pytest.raises(NoteError, match="contains a space"):
        sign_note(BODY, "bad name", _key())
    with pytest.raises(ValueError):
        ed25519_key_id("k", b"short")


def test_docs_record_the_worked_vector():
    docs = [p for p in (REPO / "docs" / "format-checkpoint.md", REPO / "docs" / "format.md")
            if p.exists() and VECTOR_KEY_ID in p.read_text(encoding="utf-8")]
    assert docs, "the worked checkpoint vector must be in docs/format-checkpoint.md"
    text = docs[0].read_text(encoding="utf-8")
    sig = base64.b64decode(VECTOR_NOTE.rsplit(" ", 1)[1])[4:].hex()
    flat = text.replace("\n", "").replace(" ", "")
    for value in (VECTOR_PUBLIC_KEY, VECTOR_ROOT_13, sig, VECTOR_NOTE.replace("\n", "")):
        assert value.replace(" ", "") in flat, value
