"""The offline anchoring policy: quorum, invalid cosignatures, and real RFC 3161 tokens
(OpenSSL's TSA on loopback) that are missing, invalid or earlier than an entry."""

from __future__ import annotations

import base64
import urllib.request

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from ledger.core.cosignature import parse_vkey
from ledger.core.note import Checkpoint, format_checkpoint_body
from ledger.crypto.cosign import cosign, cosigner_vkey
from ledger.crypto.note_sign import sign_note
from ledger.crypto.timestamp import REQUEST_TYPE, load_tsa_trust, make_request
from ledger.verify.anchor import AnchorPolicy, check_anchors
from ledger.witness.local_tsa import LocalTsa

ORIGIN = "ledger.example/policy"
BODY = format_checkpoint_body(Checkpoint(ORIGIN, 3, bytes(32)))
BODY_BYTES = BODY.encode()


@pytest.fixture(scope="module")
def tsa():
    with LocalTsa() as t:
        yield t


@pytest.fixture
def witnesses():
    return [(f"w{i}.example/w", Ed25519PrivateKey.generate()) for i in range(3)]


def _note(lines):
    return BODY + "\n" + sign_note(BODY, ORIGIN, Ed25519PrivateKey.generate()) + "".join(lines)


def _policy(witnesses, quorum, tsa=None):
    return AnchorPolicy(tuple(parse_vkey(cosigner_vkey(n, k)) for n, k in witnesses), quorum,
                        load_tsa_trust(tsa.ca_file) if tsa else None)


def _token(tsa, message=BODY_BYTES):
    query, nonce = make_request(message)
    req = urllib.request.Request(tsa.url, data=query, headers={"Content-Type": REQUEST_TYPE})
    with urllib.request.urlopen(req, timeout=10) as resp:
        return {"token_b64": base64.b64encode(resp.read()).decode(), "nonce": str(nonce)}


def _codes(check):
    return [f["code"] for f in check.findings]


def test_quorum_met_and_not_met(witnesses):
    note = _note(cosign(BODY, n, k, 100 + i) for i, (n, k) in enumerate(witnesses[:2]))
    assert _codes(check_anchors(note, 3, [], _policy(witnesses, 2))) == []
    check = check_anchors(note, 3, [], _policy(witnesses, 3))
    assert _codes(check) == ["witness_quorum_not_met"]
    assert check.findings[0]["class"] == "unwitnessed" and check.findings[0]["seq"] == 2


def test_an_invalid_cosignature_is_a_finding_and_does_not_count(witnesses):
    (n0, k0), (n1, k1) = witnesses[:2]
    name, blob = cosign(BODY, n1, k1, 5)[2:].split(" ")
    raw = base64.b64decode(blob)
    forged = f"\u2014 {name} " + base64.b64encode(raw[:-1] + bytes([raw[-1] ^ 1])).decode() + "\n"
    check = check_anchors(_note([cosign(BODY, n0, k0, 1), forged]), 3, [],
                          _policy(witnesses, 2))
    assert _codes(check) == ["cosignature_invalid", "witness_quorum_not_met"]
    assert check.findings[0]["class"] == "signature_invalid"


def test_a_valid_token_dates_the_checkpoint(witnesses, tsa):
    check = check_anchors(_note([]), 3, [_token(tsa)], _policy(witnesses, 0, tsa), 1)
    assert _codes(check) == [] and check.to_dict()["recorded_no_later_than"]


def test_missing_invalid_and_backdating_tokens(witnesses, tsa):
    policy = _policy(witnesses, 0, tsa)
    assert _codes(check_anchors(_note([]), 3, [], policy)) == ["timestamp_missing"]
    other = _token(tsa, b"another checkpoint\n")
    check = check_anchors(_note([]), 3, [other], policy)
    assert _codes(check) == ["timestamp_invalid"]
    assert check.findings[0]["reason"] == "timestamp_imprint"
    wrong_nonce = {**_token(tsa), "nonce": "1"}
    assert check_anchors(_note([]), 3, [wrong_nonce], policy).findings[0]["reason"] == \
        "timestamp_nonce"
    garbage = {"token_b64": "!!", "nonce": None}
    assert _codes(check_anchors(_note([]), 3, [garbage], policy)) == ["timestamp_invalid"]
    future_us = 2**62  # an entry "recorded" long after the token's time
    check = check_anchors(_note([]), 3, [_token(tsa)], policy, future_us)
    assert _codes(check) == ["timestamp_before_entry"]
    assert check.findings[0]["class"] == "backdated" and check.timestamp is None


def test_the_quorum_counts_distinct_witnesses_not_key_lines(witnesses, tmp_path):
    from ledger.errors import UsageError
    from ledger.ops.checkpoint import anchor_policy_from

    one = tmp_path / "w0.vkey"
    one.write_text(cosigner_vkey(*witnesses[0]) + "\n")
    policy = anchor_policy_from([str(one), str(one)], None, None, None)
    assert policy is not None and policy.quorum == 1 and len(policy.witness_keys) == 1
    note = _note([cosign(BODY, witnesses[0][0], witnesses[0][1], 7)])
    assert _codes(check_anchors(note, 3, [], policy)) == []
    with pytest.raises(UsageError) as exc:
        anchor_policy_from([str(one), str(one)], 2, None, None)
    assert exc.value.field == "quorum"
