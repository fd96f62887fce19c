"""Batch receipts (``ledger-batch-receipt/1``, docs/format-receipt.md): the tree and its
paths against a reference RFC 9162 MTH, the text form, the vector, and three verifiers that
must agree on every valid and every altered receipt -- the server's
(``ledger.api.receipts``), the client's own (``ledger.client.receipt``) and an independent one
written here from the format document with only hashlib, json, base64 and cryptography."""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import re
from pathlib import Path
from typing import Any

import pytest
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.api.receipts import verify_receipt as server_verify
from ledger.client.errors import ReceiptInvalid
from ledger.client.receipt import batch_root as client_root
from ledger.client.receipt import verify_receipt as client_verify
from ledger.core import receipt as fmt
from ledger.errors import IntegrityError, ProofError

ROOT = Path(__file__).resolve().parents[2]
VECTOR = json.loads((ROOT / "tests" / "vectors" / "receipt.json").read_text("utf-8"))
DOC = ROOT / "docs" / "format-receipt.md"


# -- a reference tree, RFC 9162 §2.1.1 as written ---------------------------------------
def mth(leaves: list[bytes]) -> bytes:
    n = len(leaves)
    if n == 1:
        return hashlib.sha256(b"\x00" + leaves[0]).digest()
    k = 1 << (n - 1).bit_length() - 1
    return hashlib.sha256(b"\x01" + mth(leaves[:k]) + mth(leaves[k:])).digest()


def path(m: int, leaves: list[bytes]) -> list[bytes]:
    n = len(leaves)
    if n == 1:
        return []
    k = 1 << (n - 1).bit_length() - 1
    if m < k:
        return path(m, leaves[:k]) + [mth(leaves[k:])]
    return path(m - k, leaves[k:]) + [mth(leaves[:k])]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.binary(min_size=0, max_size=40), min_size=1, max_size=70))
def test_tree_and_paths_are_rfc9162(leaves: list[bytes]) -> None:
    root, paths = fmt.batch_tree(leaves)
    assert root == mth(leaves)
    for i, leaf in enumerate(leaves):
        assert paths[i] == path(i, leaves)
        assert fmt.root_of(leaf, i, len(leaves), paths[i]) == root
        assert client_root(leaf, i, len(leaves), paths[i]) == root


@settings(max_examples=60, deadline=None)
@given(st.lists(st.binary(min_size=1, max_size=20), min_size=2, max_size=40, unique=True),
       st.data())
def test_a_wrong_leaf_index_or_path_never_reaches_the_root(leaves: list[bytes],
                                                            data: st.DataObject) -> None:
    root, paths = fmt.batch_tree(leaves)
    n = len(leaves)
    i = data.draw(st.integers(0, n - 1))
    j = data.draw(st.integers(0, n - 1).filter(lambda x: x != i))
    # another leaf under i's path, i's leaf at another index, a changed path element
    for leaf, idx, p in ((leaves[j], i, paths[i]), (leaves[i], j, paths[i])):
        for root_fn in (fmt.root_of, client_root):
            try:
                assert root_fn(leaf, idx, n, p) != root
            except (ValueError, ProofError):
                pass
    if paths[i]:
        k = data.draw(st.integers(0, len(paths[i]) - 1))
        bad = list(paths[i])
        bad[k] = bytes([bad[k][0] ^ 1]) + bad[k][1:]
        assert fmt.root_of(leaves[i], i, n, bad) != root
        assert client_root(leaves[i], i, n, bad) != root


def test_client_tree_code_refuses_what_the_server_code_refuses() -> None:
    leaves = [b"a", b"b", b"c"]
    _, paths = fmt.batch_tree(leaves)
    for index, size, p in ((3, 3, paths[0]), (0, 3, paths[0][:1]), (0, 3, paths[0] + [b"x" * 32]),
                           (-1, 3, paths[0])):
        with pytest.raises(ProofError):
            fmt.root_of(b"a", index, size, p)
        with pytest.raises(ValueError):
            client_root(b"a", index, size, p)


@given(st.binary(max_size=200), st.integers(0, fmt.MAX_SIZE),
       st.lists(st.binary(min_size=32, max_size=32), max_size=20))
def test_text_form_round_trips(leaf: bytes, index: int, p: list[bytes]) -> None:
    jws = "aGVhZA.Y2xhaW1z.c2ln"
    text = fmt.encode(jws, leaf, index, p)
    assert fmt.is_batch(text) and not fmt.is_batch(jws)
    assert fmt.split(text) == (jws, leaf, index, p)


@pytest.mark.parametrize(("text", "part"), [
    ("a~b", "3 parts"), ("a~AA~AAAAAA~x", "3 parts"), ("a~A=~AAAAAA", "leaf"),
    ("a~AA~AAAAAA==", "proof"), ("a~A+~AAAAAA", "leaf"), ("a~AB~AAAAAA", "canonical"),
    ("a~AA~AAA", "4 bytes of index"), ("a~AA~" + "A" * 10, "whole 32-byte"),
])
def test_malformed_text_is_refused_naming_the_part(text: str, part: str) -> None:
    with pytest.raises(ValueError, match=part):
        fmt.split(text)


def test_leaf_document_is_compact_sorted_ascii() -> None:
    assert fmt.leaf_document(7, "sha256:ab", "2027-01-01T00:00:00.000000Z", "é") == (
        b'{"entry_hash":"sha256:ab","producer":"\\u00e9","recorded_at":'
        b'"2027-01-01T00:00:00.000000Z","seq":7}')
    assert b"producer" not in fmt.leaf_document(7, "h", "t", None)
    with pytest.raises(ValueError):
        fmt.batch_tree([])


# -- the vector and three verifiers --------------------------------------------------------
def b64d(text: str) -> bytes:
    if "=" in text:
        raise ValueError("padded")
    data = base64.b64decode(text + "=" * (-len(text) % 4), altchars=b"-_", validate=True)
    if base64.urlsafe_b64encode(data).rstrip(b"=").decode() != text:
        raise ValueError("not canonical")
    return data


def unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    if len({k for k, _ in pairs}) != len(pairs):
        raise ValueError("duplicate key")
    return dict(pairs)


def strict_json(data: bytes) -> Any:
    return json.loads(data, object_pairs_hook=unique)


def independent_verify(receipt: str, jwk: dict[str, Any], origin: str,
                       ledger_id: str) -> dict[str, Any]:
    """docs/format-receipt.md "Verifying", step by step, with no ledger code."""
    parts = receipt.split("~")
    if len(parts) != 3:
        raise ValueError("parts")
    jws, leaf, proof = parts[0], b64d(parts[1]), b64d(parts[2])
    h, c, s = jws.split(".")
    header = strict_json(b64d(h))
    if header != {"alg": "EdDSA", "kid": jwk["kid"], "typ": "ledger-batch-receipt+jwt"}:
        raise ValueError("header")
    Ed25519PublicKey.from_public_bytes(b64d(jwk["x"])).verify(b64d(s), f"{h}.{c}".encode())
    claims = strict_json(b64d(c))
    if claims["iss"] != origin or claims["origin"] != origin or claims["ledger_id"] != ledger_id:
        raise ValueError("identity")
    if len(proof) < 4 or (len(proof) - 4) % 32:
        raise ValueError("proof length")
    index, size = int.from_bytes(proof[:4], "big"), claims["size"]
    hashes = [proof[i:i + 32] for i in range(4, len(proof), 32)]
    if not 0 <= index < size:
        raise ValueError("index")
    fn, sn, r = index, size - 1, hashlib.sha256(b"\x00" + leaf).digest()
    for p in hashes:
        if sn == 0:
            raise ValueError("path too long")
        if fn & 1 or fn == sn:
            r = hashlib.sha256(b"\x01" + p + r).digest()
            while fn and not fn & 1:
                fn, sn = fn >> 1, sn >> 1
        else:
            r = hashlib.sha256(b"\x01" + r + p).digest()
        fn, sn = fn >> 1, sn >> 1
    if sn != 0 or "sha256:" + r.hex() != claims["root"]:
        raise ValueError("root")
    return strict_json(leaf)


JWKS = {"keys": [VECTOR["jwk"]]}
ORIGIN, LEDGER_ID = VECTOR["origin"], VECTOR["ledger_id"]


def test_the_vector_is_what_the_code_makes() -> None:
    script = ROOT / "scripts" / "gen-vectors-receipt"
    gen: dict[str, Any] = {"__file__": str(script), "__name__": "gen_vectors_receipt"}
    exec(compile(script.read_text("utf-8"), str(script), "exec"), gen)
    assert json.loads(json.dumps(gen["build"]())) == VECTOR


@pytest.mark.parametrize("entry", VECTOR["entries"], ids=lambda e: f"index{e['index']}")
def test_every_vector_receipt_verifies_with_all_three(entry: dict[str, Any]) -> None:
    receipt = entry["receipt"]
    leaf = independent_verify(receipt, VECTOR["jwk"], ORIGIN, LEDGER_ID)
    assert leaf == json.loads(entry["leaf_document"])
    assert (leaf["seq"], leaf["entry_hash"]) == (entry["seq"], entry["entry_hash"])
    assert leaf.get("producer") == entry["producer"]
    for claims in (server_verify(receipt, JWKS, ORIGIN),
                   client_verify(receipt, JWKS, origin=ORIGIN, ledger_id=LEDGER_ID,
                                 seq=entry["seq"], entry_hash=entry["entry_hash"])):
        assert claims["seq"] == entry["seq"] and claims["index"] == entry["index"]
        assert claims["size"] == VECTOR["batch"]["size"]
        assert claims["root"] == VECTOR["batch"]["root"]
        assert claims.get("producer") == entry["producer"]
    assert receipt.split("~")[0] == VECTOR["batch"]["jws"]  # one signature for the batch
    assert hashlib.sha256(b"\x00" + entry["leaf_document"].encode()).hexdigest() == \
        entry["leaf_hash"]


@pytest.mark.parametrize("case", VECTOR["invalid"], ids=lambda c: c["name"])
def test_every_altered_vector_receipt_is_refused_by_all_three(case: dict[str, Any]) -> None:
    entry = VECTOR["entries"][case["for_index"]]
    with pytest.raises((ValueError, InvalidSignature, binascii.Error, KeyError)):
        independent_verify(case["receipt"], VECTOR["jwk"], ORIGIN, LEDGER_ID)
    with pytest.raises(IntegrityError):
        server_verify(case["receipt"], JWKS, ORIGIN)
    with pytest.raises(ReceiptInvalid):
        client_verify(case["receipt"], JWKS, origin=ORIGIN, ledger_id=LEDGER_ID,
                      seq=entry["seq"], entry_hash=entry["entry_hash"])


def test_a_receipt_for_another_entry_or_ledger_is_refused() -> None:
    e = VECTOR["entries"][1]
    with pytest.raises(ReceiptInvalid, match="seq and entry_hash"):
        client_verify(e["receipt"], JWKS, origin=ORIGIN, ledger_id=LEDGER_ID, seq=e["seq"] + 1,
                      entry_hash=e["entry_hash"])
    with pytest.raises(ReceiptInvalid, match="ledger id"):
        client_verify(e["receipt"], JWKS, origin=ORIGIN, ledger_id="other", seq=e["seq"],
                      entry_hash=e["entry_hash"])
    with pytest.raises(IntegrityError):
        server_verify(e["receipt"], JWKS, "other.example/log")
    with pytest.raises(ReceiptInvalid):
        client_verify(e["receipt"], {"keys": []}, origin=ORIGIN, ledger_id=LEDGER_ID,
                      seq=e["seq"], entry_hash=e["entry_hash"])


def test_the_doc_shows_the_vector() -> None:
    text = DOC.read_text("utf-8")
    assert VECTOR["batch"]["root"] in text and VECTOR["batch"]["jws"] in text
    assert VECTOR["entries"][2]["receipt"] in text and VECTOR["entries"][2]["leaf_document"] in text
    for h in VECTOR["entries"][2]["path"]:
        assert h in text
    assert VECTOR["jwk"]["x"] in text and VECTOR["private_key_seed_hex"] in text


# -- per-entry receipts are read as strictly -------------------------------------------------
def _per_entry(claims_text: bytes, *, pad: str = "") -> str:
    """A per-entry receipt over exactly ``claims_text``, signed by the vector key."""
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    key = Ed25519PrivateKey.from_private_bytes(bytes.fromhex(VECTOR["private_key_seed_hex"]))
    header = json.dumps({"alg": "EdDSA", "kid": VECTOR["jwk"]["kid"],
                         "typ": "ledger-receipt+jwt"}).encode()
    signing_input = fmt._b64(header) + "." + fmt._b64(claims_text)
    return signing_input + "." + fmt._b64(key.sign(signing_input.encode())) + pad


ENTRY = VECTOR["entries"][2]
CLAIMS = {"iss": ORIGIN, "origin": ORIGIN, "ledger_id": LEDGER_ID, "seq": ENTRY["seq"],
          "entry_hash": ENTRY["entry_hash"], "recorded_at": ENTRY["recorded_at"],
          "iat": VECTOR["batch"]["iat"]}


def _both_refuse(token: str) -> None:
    with pytest.raises(IntegrityError, match="strict"):
        server_verify(token, JWKS, ORIGIN)
    with pytest.raises(ReceiptInvalid, match="strict"):
        client_verify(token, JWKS, origin=ORIGIN, ledger_id=LEDGER_ID, seq=ENTRY["seq"],
                      entry_hash=ENTRY["entry_hash"])


def test_a_per_entry_receipt_verifies_with_both() -> None:
    token = _per_entry(json.dumps(CLAIMS).encode())
    assert server_verify(token, JWKS, ORIGIN)["seq"] == ENTRY["seq"]
    assert client_verify(token, JWKS, origin=ORIGIN, ledger_id=LEDGER_ID, seq=ENTRY["seq"],
                         entry_hash=ENTRY["entry_hash"])["seq"] == ENTRY["seq"]


def test_a_per_entry_receipt_with_a_padded_signature_is_refused() -> None:
    _both_refuse(_per_entry(json.dumps(CLAIMS).encode(), pad="=="))


def test_a_per_entry_receipt_with_a_claim_twice_is_refused() -> None:
    text = json.dumps(CLAIMS).encode()
    twice = text.replace(b'"seq": 42', b'"seq": 1042, "seq": 42')
    assert twice != text
    _both_refuse(_per_entry(twice))


# -- ledger-batch-receipt/2 and per-entry claims: receipts that name a tenant ----------------
TV = VECTOR["tenants"]


def independent_tenant(doc: dict[str, Any]) -> tuple[str, int | None]:
    """docs/format-receipt.md "Tenants": tenant and tseq together, a tenant id other than
    default and an integer >= 0; neither: the default tenant."""
    if "tenant" not in doc and "tseq" not in doc:
        return "default", None
    t, n = doc["tenant"], doc["tseq"]
    if not re.fullmatch(r"[a-z0-9][a-z0-9._-]{0,62}", t) or t == "default" \
            or type(n) is not int or n < 0:
        raise ValueError("tenant")
    return t, n


def test_the_tenant_vectors_verify_with_all_three() -> None:
    assert TV["format"] == "ledger-batch-receipt/2" and VECTOR["format"] == \
        "ledger-batch-receipt/1"
    pe = TV["per_entry"]
    h, c, s = pe["receipt"].split(".")
    assert strict_json(b64d(h)) == {"alg": "EdDSA", "kid": VECTOR["jwk"]["kid"],
                                    "typ": "ledger-receipt+jwt"}
    Ed25519PublicKey.from_public_bytes(b64d(VECTOR["jwk"]["x"])).verify(
        b64d(s), f"{h}.{c}".encode())
    assert strict_json(b64d(c)) == pe["claims"]
    assert independent_tenant(pe["claims"]) == ("acme", 2)
    assert server_verify(pe["receipt"], JWKS, ORIGIN, entry=pe)["tseq"] == 2
    assert client_verify(pe["receipt"], JWKS, origin=ORIGIN, ledger_id=LEDGER_ID,
                         seq=pe["seq"], entry_hash=pe["entry_hash"], tenant="acme",
                         tseq=2)["tenant"] == "acme"
    for e in TV["entries"]:
        leaf = independent_verify(e["receipt"], VECTOR["jwk"], ORIGIN, LEDGER_ID)
        assert leaf == json.loads(e["leaf_document"])
        want = (e["tenant"], e["tseq"]) if e["tenant"] != "default" else ("default", None)
        assert independent_tenant(leaf) == want
        assert server_verify(e["receipt"], JWKS, ORIGIN, entry=e)["index"] == e["index"]
        client_verify(e["receipt"], JWKS, origin=ORIGIN, ledger_id=LEDGER_ID, seq=e["seq"],
                      entry_hash=e["entry_hash"], tenant=e["tenant"], tseq=e["tseq"])
    # the default entry's leaf is a /1 leaf: no tenant member
    assert set(json.loads(TV["entries"][0]["leaf_document"])) == {"entry_hash", "producer",
                                                                  "recorded_at", "seq"}


@pytest.mark.parametrize("case", TV["invalid"], ids=lambda c: c["name"])
def test_a_leaf_that_names_a_tenant_wrongly_is_refused(case: dict[str, Any]) -> None:
    leaf = independent_verify(case["receipt"], VECTOR["jwk"], ORIGIN, LEDGER_ID)
    with pytest.raises((ValueError, KeyError)):
        independent_tenant(leaf)
    with pytest.raises(IntegrityError):
        server_verify(case["receipt"], JWKS, ORIGIN)
    with pytest.raises(ReceiptInvalid):
        client_verify(case["receipt"], JWKS, origin=ORIGIN, ledger_id=LEDGER_ID,
                      seq=leaf["seq"], entry_hash=leaf["entry_hash"], tenant="acme", tseq=3)


def test_a_tenant_receipt_for_another_tenant_or_place_is_refused() -> None:
    e = TV["entries"][1]
    for tenant, tseq in ((None, None), ("acme", 4), ("globex", 3)):
        with pytest.raises(ReceiptInvalid, match="tenant"):
            client_verify(e["receipt"], JWKS, origin=ORIGIN, ledger_id=LEDGER_ID, seq=e["seq"],
                          entry_hash=e["entry_hash"], tenant=tenant, tseq=tseq)
        with pytest.raises(IntegrityError, match="tenant"):
            server_verify(e["receipt"], JWKS, ORIGIN, entry={**e, "tenant": tenant,
                                                             "tseq": tseq})


def test_the_doc_shows_the_tenant_vector() -> None:
    text = DOC.read_text("utf-8")
    assert TV["per_entry"]["receipt"] in text and TV["batch"]["root"] in text
    for e in TV["entries"]:
        assert e["leaf_document"] in text
    assert TV["entries"][1]["receipt"] in text
