"""C2SP tlog-cosignature / tlog-witness text formats: the spec's vectors and every defect."""

from __future__ import annotations

import base64

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ledger.core.cosignature import (
    COSIGNATURE_TYPE,
    Cosignature,
    cosigned_message,
    cosigner_key_id,
    decode_cosignature,
    encode_cosignature,
    format_add_checkpoint,
    format_vkey,
    parse_add_checkpoint,
    parse_size_text,
    parse_vkey,
)
from ledger.core.note import NoteSignature, format_signature_line, parse_note
from ledger.errors import NoteError

# c2sp.org/tlog-cosignature: the example checkpoint with a witness cosignature.
SPEC_NOTE = (
    "example.com/behind-the-sofa\n20852163\nCsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=\n\n"
    "\u2014 example.com/behind-the-sofa Az3grlgtzPICa5OS8npVmf1Myq/5IZniMp+ZJurmRDeOoRDe4URY"
    "N7u5/Zhcyv2q1gGzGku9nTo+zyWE+xeMcTOAYQ8=\n"
    "\u2014 witness.example.com/w1 jWbPPwAAAABkGFDLEZMHwSRaJNiIDoe9DYn/zXcrtPHeolMI5OWXEhZCB9dl"
    "rDJsX3b2oyin1nPZqhf5nNo0xUe+mbIUBkBIfZ+qnA==\n")
# c2sp.org/tlog-cosignature, "Ed25519 signed message"
SPEC_MESSAGE = (b"cosignature/v1\ntime 1679315147\nexample.com/behind-the-sofa\n20852163\n"
                b"CsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=\n")
# c2sp.org/tlog-witness, the add-checkpoint example body (proof lines and note head)
SPEC_PROOF = ["PlRNCrwHpqhGrupue0L7gxbjbMiKA9temvuZZDDpkaw=",
              "jrJZDmY8Y7SyJE0MWLpLozkIVMSMZcD5kvuKxPC3swk=",
              "5+pKlUdi2LeF/BcMHBn+Ku6yhPGNCswZZD1X/6QgPd8=",
              "/6WVhPs2CwSsb5rYBH5cjHV/wSmA79abXAwhXw3Kj/0="]


def test_spec_cosignature_line_decodes_to_the_spec_timestamp():
    note = parse_note(SPEC_NOTE)
    cosig = decode_cosignature(note.signatures[1])
    assert cosig.name == "witness.example.com/w1"
    assert cosig.key_id.hex() == "8d66cf3f"
    assert cosig.timestamp == 1679315147
    assert len(cosig.signature) == 64
    assert cosigned_message(note.text, cosig.timestamp) == SPEC_MESSAGE


def test_spec_cosignature_line_round_trips():
    note = parse_note(SPEC_NOTE)
    line = format_signature_line(encode_cosignature(decode_cosignature(note.signatures[1])))
    assert SPEC_NOTE.endswith(line)


def test_the_log_signature_is_not_a_cosignature():
    with pytest.raises(NoteError, match="want 72"):
        decode_cosignature(parse_note(SPEC_NOTE).signatures[0])


def test_timestamp_above_2_63_is_refused():
    sig = NoteSignature("w", b"\0" * 4, (2**63).to_bytes(8, "big") + b"\1" * 64)
    with pytest.raises(NoteError, match="2\\*\\*63"):
        decode_cosignature(sig)
    with pytest.raises(NoteError, match="timestamp"):
        cosigned_message("a\n1\n" + "A" * 43 + "=\n", 2**63)


def test_key_id_is_sha256_of_name_newline_type_04_key():
    import hashlib

    key = bytes(range(32))
    want = hashlib.sha256(b"w.example/1\n\x04" + key).digest()[:4]
    assert cosigner_key_id("w.example/1", key) == want


def test_spec_witness_request_round_trips():
    body = ("old 20852014\n" + "".join(p + "\n" for p in SPEC_PROOF) + "\n" + SPEC_NOTE)
    req = parse_add_checkpoint(body.encode())
    assert req.old_size == 20852014
    assert [base64.b64encode(h).decode() for h in req.proof] == SPEC_PROOF
    assert req.note == SPEC_NOTE
    assert format_add_checkpoint(req.old_size, req.proof, req.note) == body


@pytest.mark.parametrize("body,match", [
    (b"\xff", "not UTF-8"),
    (b"old 1\nAAAA\n", "no blank line"),
    (b"new 1\n\nnote", "old <size>"),
    (b"old 01\n\nnote", "leading zeros"),
    (b"old -1\n\nnote", "not a decimal"),
    (b"old 99999999999999999999\n\nnote", "exceeds"),
    (b"old 1\nAAAA\n\nnote", "proof line 1"),
    (b"old 1\n" + b"A" * 43 + b"B\n\nnote", "proof line 1"),
    (b"old 1\n" + (base64.b64encode(b"\0" * 32) + b"\n") * 64 + b"\nnote", "at most 63"),
])
def test_malformed_requests_each_have_their_message(body, match):
    with pytest.raises(NoteError, match=match):
        parse_add_checkpoint(body)


def test_more_than_63_proof_hashes_cannot_be_sent():
    with pytest.raises(NoteError, match="at most 63"):
        format_add_checkpoint(5, [b"\0" * 32] * 64, "x\n")


@given(st.integers(0, 2**63 - 1))
def test_sizes_round_trip(n):
    assert parse_size_text(str(n)) == n


@given(st.integers(0, 2**63 - 1), st.binary(min_size=64, max_size=64))
def test_cosignatures_round_trip(ts, sig):
    c = Cosignature("w.example/1", b"abcd", ts, sig)
    assert decode_cosignature(encode_cosignature(c)) == c


def test_vkey_round_trip_and_defects():
    key = bytes(range(32))
    text = format_vkey("w.example/1", COSIGNATURE_TYPE, key)
    vk = parse_vkey(text)
    assert (vk.name, vk.type, vk.public_key) == ("w.example/1", 4, key)
    assert vk.key_id == cosigner_key_id("w.example/1", key)
    name, hex_id, blob = text.split("+")
    for bad, match in [("w.example/1", "not <name>"),
                       (f"{name}+{hex_id}+!!!", "base64"),
                       (f"{name}+00000000+{blob}", "does not match"),
                       (f"{name}+{hex_id.upper()}+{blob}", "8 lowercase hex"),
                       (f"{name}+{hex_id}+" + base64.b64encode(b"\x04" + key[:31]).decode(),
                        "31 bytes")]:
        with pytest.raises(NoteError, match=match):
            parse_vkey(bad)
