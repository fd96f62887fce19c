"""RFC 3161 tokens from a real TSA (OpenSSL's ``openssl ts -reply`` on loopback)."""

from __future__ import annotations

import subprocess
import urllib.request

import pytest

from ledger.crypto.timestamp import (
    REQUEST_TYPE,
    TimestampError,
    der_set_order,
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


@pytest.fixture(scope="module")
def chain_tsa():
    """A real ``openssl ts`` TSA whose certificate an intermediate CA issued under a root,
    answering with ``-chain`` (the intermediate and the root in every token)."""
    with LocalTsa(chain=True) as t:
        yield t


def _openssl_verify(tmp_path, token, ca_file):
    (tmp_path / "t.tsr").write_bytes(token)
    (tmp_path / "m.txt").write_bytes(MESSAGE)
    return subprocess.run(["openssl", "ts", "-verify", "-data", str(tmp_path / "m.txt"),
                           "-in", str(tmp_path / "t.tsr"), "-CAfile", str(ca_file)],
                          capture_output=True, text=True, timeout=30)


def test_a_token_carrying_its_certificate_chain_verifies(chain_tsa, tmp_path):
    """Before: ASN.1 InvalidSetOrdering (OpenSSL puts the certificates in the order given,
    not in DER's SET OF order), although ``openssl ts -verify`` accepts the token."""
    token, nonce = _token(chain_tsa)
    assert _openssl_verify(tmp_path, token, chain_tsa.ca_file).returncode == 0
    info = verify_token(token, MESSAGE, load_tsa_trust(chain_tsa.ca_file, POLICY), nonce)
    assert der_set_order(token) != token  # the case at hand: the TSA's order is not DER's
    assert info.nonce == nonce and read_token(token, MESSAGE, nonce).serial == info.serial
    # the root alone is trusted; the intermediate came with the token. Another root: refused
    make_tsa_certs(tmp_path)
    with pytest.raises(TimestampError) as exc:
        verify_token(token, MESSAGE, load_tsa_trust(tmp_path / "ca.pem"), nonce)
    assert exc.value.code == "timestamp_signature"
    flipped = token[:-40] + bytes([token[-40] ^ 0xFF]) + token[-39:]  # in the signature
    with pytest.raises(TimestampError):
        verify_token(flipped, MESSAGE, load_tsa_trust(chain_tsa.ca_file), nonce)


def test_der_set_order_moves_only_the_sets_of_the_signed_data(chain_tsa, tsa):
    token, _ = _token(chain_tsa)
    ordered = der_set_order(token)
    assert len(ordered) == len(token) and sorted(ordered) == sorted(token)
    assert der_set_order(ordered) == ordered
    plain, _ = _token(tsa)  # one certificate: already in DER order
    assert der_set_order(plain) == plain
    for junk in (b"", b"\x30\x80\x00\x00", b"\x30\x03\x02\x01\x00", token[:100]):
        assert der_set_order(junk) == junk  # not a TimeStampResp: left to the parser
