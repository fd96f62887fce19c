"""The signed alert format (docs/format-alert.md): the worked vector, and every way a
forged or altered alert is refused."""

from __future__ import annotations

import base64
import copy
import hashlib
import json
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from ledger.core.alert import alert_document, findings_by_class, first_findings, signing_input
from ledger.crypto.alert_sign import check_alert, sign_alert
from ledger.errors import UsageError

VECTOR = json.loads((Path(__file__).parents[1] / "vectors" / "alert.json").read_text("utf-8"))
DOC = Path(__file__).parents[2] / "docs" / "format-alert.md"


def _key() -> Ed25519PrivateKey:
    return Ed25519PrivateKey.from_private_bytes(bytes.fromhex(VECTOR["private_key_seed_hex"]))


def test_the_vector_signs_to_the_documented_bytes() -> None:
    alert = VECTOR["alert"]
    si = signing_input(alert)
    assert base64.b64decode(VECTOR["signing_input_b64"]) == si
    assert hashlib.sha256(si).hexdigest() == VECTOR["signing_input_sha256"]
    assert si.startswith(b"ledger-alert/1\n{\"audit\":")
    assert sign_alert(alert, _key(), VECTOR["jwk"]["kid"]) == VECTOR["envelope"]
    assert check_alert(VECTOR["envelope"], {"keys": [VECTOR["jwk"]]}) == alert


def test_the_doc_shows_the_vector() -> None:
    text = DOC.read_text("utf-8")
    assert VECTOR["envelope"]["signature"]["sig"] in text
    assert VECTOR["signing_input_sha256"] in text
    assert VECTOR["jwk"]["x"] in text


@pytest.mark.parametrize("change", ["kind", "size", "finding", "extra", "sig", "kid", "alg"])
def test_an_altered_alert_is_refused(change: str) -> None:
    env = copy.deepcopy(VECTOR["envelope"])
    if change == "kind":
        env["alert"]["kind"] = "audit_needs_review"
    elif change == "size":
        env["alert"]["head"]["size"] = 4
    elif change == "finding":
        env["alert"]["audit"]["first_findings"] = []
    elif change == "extra":
        env["alert"]["note"] = "added"
    elif change == "sig":
        sig = bytearray(base64.urlsafe_b64decode(env["signature"]["sig"] + "=="))
        sig[0] ^= 1
        env["signature"]["sig"] = base64.urlsafe_b64encode(bytes(sig)).rstrip(b"=").decode()
    elif change == "kid":
        env["signature"]["kid"] = "another"
    else:
        env["signature"]["alg"] = "EdDSA"
    with pytest.raises(UsageError) as e:
        check_alert(env, {"keys": [VECTOR["jwk"]]})
    assert e.value.code in ("bad_alert", "bad_alert_signature")


def test_another_key_does_not_verify() -> None:
    other = Ed25519PrivateKey.from_private_bytes(b"\x01" * 32)
    env = sign_alert(VECTOR["alert"], other, VECTOR["jwk"]["kid"])
    with pytest.raises(UsageError, match="does not verify"):
        check_alert(env, {"keys": [VECTOR["jwk"]]})


def test_malformed_alerts_name_the_field() -> None:
    with pytest.raises(UsageError) as e:
        signing_input({"format": "ledger-alert/2", "kind": "audit_failed"})
    assert e.value.field == "alert.format"
    with pytest.raises(UsageError) as e:
        signing_input({"format": "ledger-alert/1", "kind": "nothing"})
    assert e.value.field == "alert.kind"
    with pytest.raises(UsageError):
        alert_document("nothing", origin="o", ledger_id="l", raised_at="t", head=None,
                       checkpoint=None)
    with pytest.raises(UsageError):
        check_alert({"alert": VECTOR["alert"]}, {"keys": [VECTOR["jwk"]]})


def test_a_float_cannot_be_signed() -> None:
    alert = dict(VECTOR["alert"], detail={"down_for_s": 1.5})
    with pytest.raises(Exception, match="float"):
        signing_input(alert)


def test_first_findings_drop_the_values_and_stop_at_ten() -> None:
    findings = [{"code": "c", "seq": i, "class": "forked" if i % 2 else "deleted",
                 "message": "m", "expected": "SECRET-EXPECTED", "actual": "SECRET-ACTUAL"}
                for i in range(25)]
    got = first_findings(findings)
    assert len(got) == 10 and "SECRET" not in json.dumps(got)
    assert findings_by_class(findings) == {"deleted": 13, "forked": 12}


# -- the body as received is read strictly ---------------------------------------------------
def _body() -> str:
    return json.dumps(VECTOR["envelope"])


def test_the_received_body_verifies() -> None:
    assert check_alert(_body().encode(), {"keys": [VECTOR["jwk"]]}) == VECTOR["alert"]
    assert check_alert(_body(), {"keys": [VECTOR["jwk"]]}) == VECTOR["alert"]


@pytest.mark.parametrize("where", ["alert", "signature", "head"])
def test_a_member_twice_is_refused(where: str) -> None:
    body = _body()
    if where == "alert":  # a forged kind first, the signed value last
        twice = body.replace('"kind": "audit_failed"',
                             '"kind": "store_unavailable", "kind": "audit_failed"')
    elif where == "signature":
        twice = body.replace('"alg": "Ed25519"', '"alg": "none", "alg": "Ed25519"')
    else:
        twice = body.replace('"size": 3', '"size": 9, "size": 3')
    assert twice != body and json.loads(twice) == VECTOR["envelope"]  # a lax reader: valid
    with pytest.raises(UsageError) as e:
        check_alert(twice.encode(), {"keys": [VECTOR["jwk"]]})
    assert e.value.code == "bad_alert" and "duplicate" in e.value.message


@pytest.mark.parametrize("how", ["padded", "spare_bits", "standard_alphabet"])
def test_a_non_canonical_sig_is_refused(how: str) -> None:
    sig = VECTOR["envelope"]["signature"]["sig"]
    if how == "padded":
        bad = sig + "=="
    elif how == "spare_bits":
        bad = sig[:-1] + chr(ord(sig[-1]) + 1)
    else:
        bad = sig.replace("-", "+").replace("_", "/")
    assert bad != sig
    assert base64.urlsafe_b64decode(bad.replace("+", "-").replace("/", "_").rstrip("=") + "==") \
        == base64.urlsafe_b64decode(sig + "==")  # the same bytes to a lax decoder
    env = copy.deepcopy(VECTOR["envelope"])
    env["signature"]["sig"] = bad
    for given in (env, json.dumps(env).encode()):
        with pytest.raises(UsageError) as e:
            check_alert(given, {"keys": [VECTOR["jwk"]]})
        assert e.value.code == "bad_alert" and e.value.field == "signature.sig"
