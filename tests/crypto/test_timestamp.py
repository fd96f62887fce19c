"""RFC 3161 tokens from a real TSA (OpenSSL's ``openssl ts -reply`` on loopback)."""

from __future__ import annotations

import urllib.request

import pytest

from ledger.crypto.timestamp import (
    REQUEST_TYPE,
    TimestampError,
    load_tsa_trust,
    make_request,
    read_token,
    verify_token,
)
from ledger.errors import UsageError
from ledger.witness.local_tsa import POLICY, LocalTsa, make_tsa_certs

MESSAGE = b"ledger.example/log\n5\n" + b"A" * 43 + b"=\n"


@pytest.fixture(scope="module")
def tsa():
    with LocalTsa() as t:
        yield t


def _token(tsa, message=MESSAGE):
    query, nonce = make_request(message)
    req = urllib.request.Request(tsa.url, data=query, headers={"Content-Type": REQUEST_TYPE})
    with urllib.request.urlopen(req, timeout=10) as resp:
        return resp.read(), nonce


def test_a_real_token_verifies(tsa):
    token, nonce = _token(tsa)
    info = verify_token(token, MESSAGE, load_tsa_trust(tsa.ca_file, POLICY), nonce)
    assert info.policy == POLICY and info.nonce == nonce
    assert info.gen_time.tzinfo is not None


@pytest.mark.parametrize("case,code", [
    ("other message", "timestamp_imprint"),
    ("other nonce", "timestamp_nonce"),
    ("other policy", "timestamp_policy"),
    ("other CA", "timestamp_signature"),
    ("flipped byte", None),
    ("garbage", "timestamp_invalid"),
])
def test_every_defect_is_refused(tsa, tmp_path, case, code):
    token, nonce = _token(tsa)
    trust, message = load_tsa_trust(tsa.ca_file), MESSAGE
    if case == "other message":
        message = MESSAGE + b"x"
    elif case == "other nonce":
        nonce += 1
    elif case == "other policy":
        trust = load_tsa_trust(tsa.ca_file, "1.2.3.4")
    elif case == "other CA":
        make_tsa_certs(tmp_path)
        trust = load_tsa_trust(tmp_path / "ca.pem")
    elif case == "flipped byte":
        token = token[:-40] + bytes([token[-40] ^ 0xFF]) + token[-39:]  # in the signature
    else:
        token = b"\x30\x03\x02\x01\x00"
    with pytest.raises(TimestampError) as exc:
        verify_token(token, message, trust, nonce)
    if code:
        assert exc.value.code == code


def test_read_token_checks_imprint_and_nonce_without_trust(tsa):
    token, nonce = _token(tsa)
    assert read_token(token, MESSAGE, nonce).nonce == nonce
    with pytest.raises(TimestampError, match="imprint"):
        read_token(token, b"other", nonce)


def test_trust_files(tmp_path, tsa):
    with pytest.raises(UsageError, match="no self-signed"):
        load_tsa_trust(tsa.folder / "tsa.pem")
    with pytest.raises(UsageError, match="cannot read"):
        load_tsa_trust(tmp_path / "missing.pem")
    with pytest.raises(UsageError, match="not an OID"):
        load_tsa_trust(tsa.ca_file, "policy")
    trust = load_tsa_trust(tsa.folder / "chain.pem")
    assert len(trust.roots) == 1 and len(trust.intermediates) == 1
