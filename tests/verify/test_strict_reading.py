"""Strict reading of the artifacts an offline verifier is handed (docs/format-checkpoint.md
and docs/export.md, "Strict reading"): duplicate keys, unknown keys of a closed format and
non-canonical base64/base64url are refused, naming the field and the rule."""

from __future__ import annotations

import base64
import copy
import hashlib
import json
import shutil

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from ledger.core.note import Checkpoint
from ledger.core.strict import StrictError, b64decode, b64url_decode, closed, loads
from ledger.crypto.jws import check_manifest_jwt
from ledger.crypto.note_sign import sign_checkpoint
from ledger.errors import ProofError
from ledger.verify.export import verify_export
from ledger.verify.proof import CONSISTENCY_FORMAT, verify_bundle, verify_consistency_bundle
from tests.verify.test_bundle_counts import bundle  # noqa: F401 -- fixture
from tests.verify.test_proof import KEYS, ORIGIN, SEED, example_bundle

_B64_ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"


def _padding_bits_set(text: str, alphabet: str = _B64_ALPHABET) -> str:
    """The same bytes in non-canonical base64: the unused low bits of the last character set."""
    body = text.rstrip("=")
    last = alphabet.index(body[-1])
    unused = {2: 4, 3: 2}[len(body) % 4]  # characters in the last quantum -> unused bits
    assert last & ((1 << unused) - 1) == 0
    return body[:-1] + alphabet[last | 1] + text[len(body):]


def _fails(text: str | dict, code: str, field: str | None) -> ProofError:
    with pytest.raises(ProofError) as err:
        verify_bundle(text, KEYS)
    assert (err.value.code, err.value.field) == (code, field), err.value
    return err.value


# -- the reader itself ---------------------------------------------------------------------

def test_the_reader_refuses_what_two_parsers_could_read_differently():
    assert loads(b'{"a":1}') == {"a": 1}
    for data, rule in [(b'{"a":1,"a":2}', "duplicate_key"), (b'{"a":NaN}', "syntax"),
                       ('{"a":1}'.encode("utf-16"), "encoding"),
                       (b"\xef\xbb\xbf{}", "encoding"), (b"{", "syntax")]:
        with pytest.raises(StrictError) as err:
            loads(data)
        assert err.value.rule == rule, data
    with pytest.raises(StrictError, match="unknown field x.b") as err:
        closed({"a": 1, "b": 2}, {"a"}, "x.")
    assert (err.value.field, err.value.rule) == ("x.b", "unknown_key")


def test_base64_must_be_canonical():
    assert b64decode("eyJuIjo2fQ==") == b'{"n":6}'
    for text in ("eyJuIjo2fR==", "eyJuIjo2fQ", "eyJuIjo2fQ=", "eyJu Ijo2fQ==", "eyJ-Ijo2fQ=="):
        with pytest.raises(StrictError):
            b64decode(text, "data_b64")
    raw = bytes(range(64))
    canonical = base64.urlsafe_b64encode(raw).rstrip(b"=").decode()
    assert b64url_decode(canonical) == raw
    url_alphabet = _B64_ALPHABET[:62] + "-_"
    for text in (_padding_bits_set(canonical, url_alphabet), canonical + "=", canonical[:-1] + "+"):
        with pytest.raises(StrictError) as err:
            b64url_decode(text, "signature")
        assert err.value.field == "signature"


# -- inclusion and consistency bundles -----------------------------------------------------

def test_a_duplicate_key_is_refused_not_last_wins():
    text = json.dumps(example_bundle())
    two_seqs = text.replace('"seq": 6,', '"seq": 7, "seq": 6,', 1)
    assert json.loads(two_seqs)["seq"] == 6  # what a last-wins reader proves
    err = _fails(two_seqs, "proof_malformed", "seq")
    assert "duplicate key 'seq'" in err.message
    nested = text.replace('"digest":', '"digest": "sha256:00", "digest":', 1)
    _fails(nested, "proof_malformed", "digest")


@pytest.mark.parametrize("where,field", [
    ([], "extra"), (["entry"], "entry.extra"),
    (["entry", "payloads", "result"], "entry.payloads.result.extra")])
def test_unknown_keys_are_refused(where, field):
    b = example_bundle()
    obj = b
    for k in where:
        obj = obj[k]
    obj["extra"] = 1
    _fails(json.dumps(b), "proof_malformed", field)
    _fails(b, "proof_malformed", field)  # a parsed dict is held to the same keys


def test_payload_base64_must_be_canonical():
    b = example_bundle()
    p = b["entry"]["payloads"]["result"]
    p["data_b64"] = _padding_bits_set(p["data_b64"])
    assert base64.b64decode(p["data_b64"]) == b'{"n":6}'  # the same bytes, another text
    err = _fails(b, "proof_malformed", "entry.payloads.result")
    assert "canonical base64" in err.message


def _note(size: int, root: bytes) -> str:
    return sign_checkpoint(Checkpoint(ORIGIN, size, root), ORIGIN,
                           Ed25519PrivateKey.from_private_bytes(SEED))


def test_a_consistency_proof_from_the_empty_tree_is_refused():
    empty = hashlib.sha256(b"").digest()
    doc = {"format": CONSISTENCY_FORMAT, "origin": ORIGIN, "old": _note(0, empty),
           "new": _note(13, bytes(32)), "path": []}
    with pytest.raises(ProofError) as err:
        verify_consistency_bundle(doc, KEYS)
    assert (err.value.code, err.value.field) == ("proof_malformed", "old")
    assert "size 0" in err.value.message
    extra = copy.deepcopy(doc)
    extra["note"] = "x"
    with pytest.raises(ProofError) as err:
        verify_consistency_bundle(extra, KEYS)
    assert (err.value.code, err.value.field) == ("proof_malformed", "note")


# -- the manifest JWT of an export bundle ------------------------------------------------------

def _resign(token: str, change) -> str:
    head, claims, sig = token.split(".")
    return ".".join([head, claims, change(sig)])


def test_a_non_canonical_manifest_jwt_signature_is_a_finding(bundle, tmp_path):  # noqa: F811
    dst = tmp_path / "b"
    shutil.copytree(bundle["dir"], dst)
    token = (dst / "manifest.jwt").read_text("ascii")
    url_alphabet = _B64_ALPHABET[:62] + "-_"
    forged = _resign(token, lambda s: _padding_bits_set(s, url_alphabet))
    assert forged != token
    (dst / "manifest.jwt").write_text(forged, "ascii")
    report = verify_export(dst, bundle["jwks"])
    [f] = report["findings"]
    assert (f["code"], f["class"], f["file"]) == ("manifest_jwt_malformed", "signature_invalid",
                                                 "manifest.jwt")
    assert "signature is not canonical base64url" in f["message"]
    assert report["outcome"] == "failed" and report["signatures"]["manifest"] == "failed"


def test_manifest_jwt_header_with_a_duplicate_key_is_malformed(bundle):  # noqa: F811
    token = (bundle["dir"] / "manifest.jwt").read_bytes()
    head, rest = token.split(b".", 1)
    raw = base64.urlsafe_b64decode(head + b"=" * (-len(head) % 4))
    doubled = raw.replace(b'{"', b'{"alg":"none","', 1)
    forged = base64.urlsafe_b64encode(doubled).rstrip(b"=") + b"." + rest
    check = check_manifest_jwt(forged, [], True)
    assert (check.disposition, check.code) == ("failed", "manifest_jwt_malformed")
    assert "duplicate key" in check.message
