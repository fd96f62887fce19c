"""Ed25519 cosignature/v1: a pinned vector, and every way a cosignature can fail."""

from __future__ import annotations

import base64

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from ledger.core.cosignature import parse_vkey
from ledger.crypto.cosign import (
    CosignatureError,
    accept_cosignatures,
    check_cosignatures,
    cosign,
    cosigner_vkey,
    generate_cosigner,
    load_cosigner,
    load_vkeys,
)
from ledger.crypto.note_sign import sign_note
from ledger.errors import UsageError

# RFC 8032 section 7.1, TEST 1 secret key; the checkpoint of the C2SP examples.
RFC8032_SK = bytes.fromhex("9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60")
BODY = "example.com/behind-the-sofa\n20852163\nCsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=\n"
NAME = "witness.example.com/w1"
VKEY = "witness.example.com/w1+7e6f4aaa+BNdamAGCsQq31Uv+08lkBzoO4XLz2qYjJa8CGmj3B1Ea"
LINE = ("\u2014 witness.example.com/w1 fm9KqgAAAABkGFDL+TPmh4BYuAjsYRoqMJCWb/gWJaeRF/kmm5tlCr9s"
        "J57DLErur7K0yDXc2ArN+TIuotuB/HbuL3AJsp3bv/aNCQ==\n")


@pytest.fixture
def key():
    return Ed25519PrivateKey.from_private_bytes(RFC8032_SK)


def test_pinned_vector(key):
    assert cosigner_vkey(NAME, key) == VKEY
    assert cosign(BODY, NAME, key, 1679315147) == LINE


def _note(key, *lines):
    log = Ed25519PrivateKey.generate()
    return BODY + "\n" + sign_note(BODY, "example.com/behind-the-sofa", log) + "".join(lines)


def test_check_finds_the_valid_cosignature(key):
    got = check_cosignatures(_note(key, LINE), [parse_vkey(VKEY)])
    assert got.valid == {NAME: 1679315147} and got.invalid == {}


def test_unknown_cosigners_are_ignored(key):
    other = Ed25519PrivateKey.generate()
    line = cosign(BODY, "w2.example/x", other, 5)
    got = check_cosignatures(_note(key, line), [parse_vkey(VKEY)])
    assert got.valid == {} and got.invalid == {}


@pytest.mark.parametrize("mutate", [
    lambda b: b[:10] + bytes([b[10] ^ 1]) + b[11:],   # the timestamp
    lambda b: b[:-1] + bytes([b[-1] ^ 1]),             # the signature
])
def test_a_changed_cosignature_is_invalid(key, mutate):
    name, blob = LINE[2:].split(" ")
    bad = f"\u2014 {name} " + base64.b64encode(mutate(base64.b64decode(blob))).decode() + "\n"
    got = check_cosignatures(_note(key, bad), [parse_vkey(VKEY)])
    assert got.valid == {} and NAME in got.invalid


def test_a_cosignature_of_another_checkpoint_is_invalid(key):
    line = cosign(BODY.replace("20852163", "20852164"), NAME, key, 1679315147)
    assert NAME in check_cosignatures(_note(key, line), [parse_vkey(VKEY)]).invalid


def test_a_malformed_note_reports_every_key():
    assert set(check_cosignatures("nonsense", [parse_vkey(VKEY)]).invalid) == {NAME}


def test_accept_keeps_only_valid_lines_of_that_key(key):
    other = cosign(BODY, "w2.example/x", Ed25519PrivateKey.generate(), 5)
    assert accept_cosignatures(BODY, other + LINE, parse_vkey(VKEY)) == [LINE]
    with pytest.raises(CosignatureError, match="no valid cosignature"):
        accept_cosignatures(BODY, other, parse_vkey(VKEY))
    with pytest.raises(CosignatureError, match="malformed"):
        accept_cosignatures(BODY, "garbage\n", parse_vkey(VKEY))


def test_generate_writes_a_private_key_and_its_vkey(tmp_path):
    pem, vkey = generate_cosigner(tmp_path / "w", "w.example/1")
    assert pem.stat().st_mode & 0o777 == 0o600
    assert cosigner_vkey("w.example/1", load_cosigner(pem)) == vkey
    assert load_vkeys(tmp_path / "w" / "witness.vkey") == [parse_vkey(vkey)]
    with pytest.raises(UsageError, match="not overwriting"):
        generate_cosigner(tmp_path / "w", "w.example/1")


def test_vkey_files_skip_comments_and_reject_bad_lines(tmp_path):
    f = tmp_path / "keys"
    f.write_text(f"# witnesses\n\n{VKEY}\n")
    assert [k.name for k in load_vkeys(f)] == [NAME]
    f.write_text("not a key\n")
    with pytest.raises(UsageError, match="not <name>"):
        load_vkeys(f)
