"""The worked vector of a ``ledger-redaction/2`` signature (docs/format.md, "Redaction
signatures"), recomputed with ``hashlib``/``json`` and a bare Ed25519 check, and the
library pinned to it; a signature over anything else does not check."""

from __future__ import annotations

import base64
import hashlib
import json
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from ledger.core.finding import Disposition
from ledger.core.redaction import build_request, parse_request
from ledger.crypto.keys import PublicKeyRef, jwk_thumbprint, raw_public
from ledger.crypto.redaction_sign import check_signature, sign_request
from ledger.crypto.tokens import JwtSigner

ROOT = Path(__file__).resolve().parents[2]
V = json.loads((ROOT / "tests" / "vectors" / "redaction_signature.json").read_text())


def _b64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def test_the_vector_recomputes_with_hashlib_and_json():
    doc = json.loads(V["document"])
    body = {k: v for k, v in doc.items() if k != "signature"}
    canon = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    assert canon == V["signing_document"] and body["format"] == "ledger-redaction/2"
    assert "sha256:" + hashlib.sha256(canon.encode()).hexdigest() == V["request_digest"]
    head, claims, sig = doc["signature"].split(".")
    assert json.loads(_b64(head)) == {"alg": "EdDSA", "kid": V["kid"],
                                      "typ": "ledger-redaction+jwt"}
    assert json.loads(_b64(claims)) == V["claims"] == {
        "ledger": V["ledger_id"], "request_digest": V["request_digest"]}
    Ed25519PublicKey.from_public_bytes(_b64(V["public_key_b64url"])).verify(
        _b64(sig), f"{head}.{claims}".encode())


def test_the_library_writes_and_checks_exactly_the_vector():
    key = Ed25519PrivateKey.from_private_bytes(bytes.fromhex(V["private_seed_hex"]))
    assert jwk_thumbprint(raw_public(key)) == V["kid"]
    req = build_request({1: ["query", "subject"]}, "GDPR Art. 17 request",
                        reference="DSR-2026-001", requested_by="dpo@example.org")
    signed = sign_request(JwtSigner(V["kid"], key, {}), V["ledger_id"], req)
    assert signed.signature == V["signature"]
    assert json.dumps(signed.to_doc(), sort_keys=True, separators=(",", ":")) == V["document"]
    keys = [PublicKeyRef(None, raw_public(key))]
    parsed = parse_request(V["document"].encode())
    assert check_signature(parsed, V["ledger_id"], keys).disposition == Disposition.VERIFIED
    # the same signature on another ledger, or on other targets, does not check
    other = check_signature(parsed, "00000000-0000-4000-8000-000000000009", keys)
    assert (other.disposition, other.code) == (Disposition.FAILED, "redaction_signature_invalid")
    moved = build_request({2: ["query"]}, "GDPR Art. 17 request").signed(V["signature"])
    assert check_signature(moved, V["ledger_id"], keys).disposition == Disposition.FAILED
    stranger = [PublicKeyRef(None, raw_public(Ed25519PrivateKey.generate()))]
    assert check_signature(parsed, V["ledger_id"], stranger).disposition == Disposition.FAILED
    assert check_signature(parsed, V["ledger_id"], None).code == "no_ledger_key"


def test_the_format_document_shows_the_vector():
    text = (ROOT / "docs" / "format.md").read_text()
    for value in (V["request_digest"], V["signature"], V["kid"], V["public_key_b64url"],
                  V["private_seed_hex"]):
        assert value in text
