"""Receipts and alerts are read strictly (docs/format-receipt.md and docs/format-alert.md,
"Strict reading"): a signature segment with padding or non-canonical trailing bits, a JSON
object with a duplicate key, a ``crit`` header or a leaf document member the format does not
define is refused by the server's verifier, the client's own and the alert check, even when
the Ed25519 signature itself verifies.  Each case is signed properly with the vector keys."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from ledger.api.receipts import verify_receipt as server_verify
from ledger.client.errors import ReceiptInvalid
from ledger.client.receipt import verify_receipt as client_verify
from ledger.core import receipt as batch
from ledger.crypto.alert_sign import check_alert
from ledger.errors import IntegrityError, UsageError

VECTORS = Path(__file__).resolve().parents[1] / "vectors"
RECEIPT = json.loads((VECTORS / "receipt.json").read_text(encoding="utf-8"))
ALERT = json.loads((VECTORS / "alert.json").read_text(encoding="utf-8"))
JWKS = {"keys": [RECEIPT["jwk"]]}
ORIGIN, LEDGER_ID, KID = RECEIPT["origin"], RECEIPT["ledger_id"], RECEIPT["jwk"]["kid"]
HASH = "sha256:" + "ab" * 32
KEY = Ed25519PrivateKey.from_private_bytes(bytes.fromhex(RECEIPT["private_key_seed_hex"]))


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def jws(header: str, claims: str, key: Ed25519PrivateKey = KEY) -> str:
    """A compact JWS over these exact JSON texts (so duplicate keys can be signed)."""
    signing_input = b64(header.encode()) + "." + b64(claims.encode())
    return signing_input + "." + b64(key.sign(signing_input.encode("ascii")))


def receipt_claims(**extra: Any) -> str:
    claims = {"iss": ORIGIN, "origin": ORIGIN, "ledger_id": LEDGER_ID, "seq": 7,
              "entry_hash": HASH, "recorded_at": "2026-01-01T00:00:00.000000Z",
              "producer": "p", "iat": 1764576000, **extra}
    return json.dumps(claims, separators=(",", ":"))


def header(typ: str = "ledger-receipt+jwt", **extra: Any) -> str:
    return json.dumps({"alg": "EdDSA", "kid": KID, "typ": typ, **extra}, separators=(",", ":"))


def verify_both(token: str) -> None:
    """Both verifiers must refuse ``token``."""
    with pytest.raises(IntegrityError):
        server_verify(token, JWKS, ORIGIN)
    with pytest.raises(ReceiptInvalid):
        client_verify(token, JWKS, origin=ORIGIN, ledger_id=LEDGER_ID, seq=7, entry_hash=HASH)


def test_a_well_formed_per_entry_receipt_verifies_in_both() -> None:
    token = jws(header(), receipt_claims())
    assert server_verify(token, JWKS, ORIGIN)["seq"] == 7
    assert client_verify(token, JWKS, origin=ORIGIN, ledger_id=LEDGER_ID, seq=7,
                         entry_hash=HASH)["seq"] == 7


def _non_canonical_last_char(segment: str) -> str:
    """The same bytes with non-zero unused low bits in the last character."""
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
    i = alphabet.index(segment[-1])
    return segment[:-1] + alphabet[i | 1 if not i & 1 else i & ~1]


@pytest.mark.parametrize("case", ["padded signature", "non-canonical signature",
                                  "duplicate claim", "duplicate header member", "crit"])
def test_a_per_entry_receipt_not_read_strictly_is_refused(case: str) -> None:
    token = jws(header(), receipt_claims())
    if case == "padded signature":
        token += "=="
    elif case == "non-canonical signature":
        token = token[:-1] + _non_canonical_last_char(token[-2:])[-1]
        assert base64.urlsafe_b64decode(token.split(".")[2] + "==") == \
            base64.urlsafe_b64decode(jws(header(), receipt_claims()).split(".")[2] + "==")
    elif case == "duplicate claim":  # a last-wins parser reads seq 7, a first-wins one 8
        token = jws(header(), '{"seq":8,' + receipt_claims()[1:])
    elif case == "duplicate header member":
        token = jws('{"alg":"none",' + header()[1:], receipt_claims())
    else:
        token = jws(header(crit=["exp"]), receipt_claims())
    verify_both(token)


def batch_receipt(leaf: bytes) -> str:
    root, paths = batch.batch_tree([leaf])
    claims = json.dumps(batch.batch_claims(origin=ORIGIN, ledger_id=LEDGER_ID, size=1,
                                           root=root, now_s=1764576000), separators=(",", ":"))
    return batch.encode(jws(header("ledger-batch-receipt+jwt"), claims), leaf, 0, paths[0])


def test_a_well_formed_batch_receipt_verifies_in_both() -> None:
    token = batch_receipt(batch.leaf_document(7, HASH, "2026-01-01T00:00:00.000000Z", "p"))
    assert server_verify(token, JWKS, ORIGIN)["seq"] == 7
    assert client_verify(token, JWKS, origin=ORIGIN, ledger_id=LEDGER_ID, seq=7,
                         entry_hash=HASH)["index"] == 0


@pytest.mark.parametrize("leaf", [
    # the same seq twice: the ledger signed a root over a leaf two parsers read differently
    b'{"entry_hash":"' + HASH.encode() + b'","recorded_at":"t","seq":8,"seq":7}',
    b'{"entry_hash":"' + HASH.encode() + b'","recorded_at":"t","seq":7,"size":1}',
    b'{"entry_hash":"' + HASH.encode() + b'","recorded_at":"t","seq":7,"x":NaN}',
], ids=["duplicate seq", "unknown member", "NaN"])
def test_a_batch_leaf_not_read_strictly_is_refused(leaf: bytes) -> None:
    verify_both(batch_receipt(leaf))


def test_a_padded_batch_signature_is_refused() -> None:
    token = batch_receipt(batch.leaf_document(7, HASH, "2026-01-01T00:00:00.000000Z", "p"))
    jws_part, leaf, proof = token.split("~")
    verify_both("~".join((jws_part + "==", leaf, proof)))


# -- alerts -----------------------------------------------------------------------------
ALERT_JWKS = {"keys": [ALERT["jwk"]]}


def test_the_alert_body_as_received_verifies() -> None:
    body = json.dumps(ALERT["envelope"]).encode("utf-8")
    assert check_alert(body, ALERT_JWKS) == ALERT["alert"]


@pytest.mark.parametrize("case", ["padded", "non-canonical", "short"])
def test_an_alert_signature_not_canonical_is_refused(case: str) -> None:
    env = json.loads(json.dumps(ALERT["envelope"]))
    sig = env["signature"]["sig"]
    env["signature"]["sig"] = {"padded": sig + "==",
                               "non-canonical": sig[:-1] + _non_canonical_last_char(sig)[-1],
                               "short": sig[:-4]}[case]
    with pytest.raises(UsageError) as exc:
        check_alert(env, ALERT_JWKS)
    assert (exc.value.code, exc.value.field) == ("bad_alert", "signature.sig")


def test_an_alert_body_with_a_duplicate_key_is_refused() -> None:
    body = json.dumps(ALERT["envelope"], separators=(",", ":"))
    # the signed kind first, a second "kind" after it: last-wins parsers read the second
    forged = body.replace('"kind":"audit_failed"',
                          '"kind":"audit_failed","kind":"checkpoint_overdue"', 1)
    assert forged != body
    with pytest.raises(UsageError) as exc:
        check_alert(forged.encode(), ALERT_JWKS)
    assert exc.value.code == "bad_alert"


def test_an_alert_with_a_float_is_refused_as_a_bad_alert() -> None:
    env = json.loads(json.dumps(ALERT["envelope"]))
    env["alert"]["detail"] = {"down_for_s": 1.5}  # the canonical form has no floats
    with pytest.raises(UsageError) as exc:
        check_alert(env, ALERT_JWKS)
    assert (exc.value.code, exc.value.field) == ("bad_alert", "alert")
