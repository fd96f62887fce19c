"""Format v2: hiding payload commitments, the v2 envelope, the redaction map and the
audit's decisions about absent payloads (pure)."""

from __future__ import annotations

import hashlib
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ledger.core.entry import (
    PAYLOAD_TAG,
    SLOTS,
    build_envelope,
    commitment,
    payload_commitment,
    version_of,
)
from ledger.core.erasure import absent_payload, fold_redactions, present_payload
from ledger.core.finding import Abstention, Finding

SALT = bytes(range(32))


def test_the_tag_and_the_slots_are_fixed():
    assert PAYLOAD_TAG == b"ledger.payload.v2\x00" and len(PAYLOAD_TAG) == 18
    assert SLOTS == {"result": 0, "preimage": 1, "attestation": 2, "query": 3, "meta": 4,
                     "subject": 5}
    assert [version_of(k) for k in ("result", "redaction", "hold", "key_event", "audit_run")] \
        == [2, 2, 2, 1, 1]


@given(st.binary(min_size=32, max_size=32), st.binary(max_size=200))
def test_commitment_is_the_tagged_salted_sha256(salt, data):
    want = "sha256:" + hashlib.sha256(b"ledger.payload.v2\x00" + salt + data).hexdigest()
    assert commitment(salt, data) == want
    assert payload_commitment("result", 2, salt, data) == want
    assert payload_commitment("result", 1, None, data) == \
        "sha256:" + hashlib.sha256(data).hexdigest()
    assert payload_commitment("redaction", 2, None, data) == \
        "sha256:" + hashlib.sha256(data).hexdigest()


def test_a_salt_is_32_bytes():
    with pytest.raises(ValueError):
        commitment(b"short", b"x")
    with pytest.raises(ValueError):
        payload_commitment("result", 2, None, b"x")


def test_a_v2_result_envelope_has_exactly_its_keys():
    fields = {k: None for k in ("engine", "status", "constraint_id", "proof_ref", "producer",
                                "idempotency_key", "admission", "att_verdict", "att_kid",
                                "att_iss")}
    payloads = {n: None for n in SLOTS}
    env = json.loads(build_envelope("L", "result", fields, payloads, 2))
    assert env["v"] == 2 and "subject" not in env and set(env["payloads"]) == set(SLOTS)
    with pytest.raises(ValueError):
        build_envelope("L", "result", {**fields, "subject": "s"}, payloads, 2)
    with pytest.raises(ValueError):
        build_envelope("L", "result", fields, {"result": None}, 2)
    with pytest.raises(ValueError):
        build_envelope("L", "key_event", {}, {"event": None}, 2)


def _doc(targets):
    return json.dumps({"format": "ledger-redaction/1", "targets": targets}).encode()


def test_fold_redactions_keeps_earlier_targets_and_the_first_redaction():
    entries = [
        (1, "result", b"{}"),
        (5, "redaction", _doc([{"seq": 1, "payloads": ["query", "subject"]},
                               {"seq": 5, "payloads": ["query"]},  # itself: ignored
                               {"seq": 9, "payloads": ["query"]}])),  # later: ignored
        (7, "redaction", _doc([{"seq": 1, "payloads": ["query", "meta", "nope"]}])),
        (8, "redaction", b"not json"),
        (9, "key_event", _doc([{"seq": 1, "payloads": ["result"]}])),
    ]
    assert fold_redactions(entries) == {(1, "query"): 5, (1, "subject"): 5, (1, "meta"): 7}


def test_absent_and_present_payloads():
    rmap = {(3, "query"): 8}
    got = absent_payload(3, "query", "sha256:" + "0" * 64, rmap)
    assert isinstance(got, Abstention) and got.reason == "redacted"
    assert got.to_dict()["redaction_seq"] == 8
    missing = absent_payload(3, "meta", "sha256:" + "0" * 64, rmap)
    assert isinstance(missing, Finding) and missing.code == "payload_missing"
    late = present_payload(3, "query", rmap)
    assert late is not None and late.code == "redaction_not_applied"
    assert late.cls == "policy_violation"
    assert present_payload(3, "meta", rmap) is None
