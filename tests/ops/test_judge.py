"""ledger.ops.append.judge_attestation: the one attestation judge of appends (without a
trust store, and with one)."""

from __future__ import annotations

import pytest

from ledger.core.submission import parse_submission
from ledger.crypto.trust import TrustStore
from ledger.errors import SubmissionError
from ledger.ops.append import default_judge, judge_attestation
from tests.ops.test_column_text import token, verified


def _sub(**top):
    return parse_submission(verified(**top))


def test_no_token_is_verdict_none_with_or_without_a_store():
    want = {"att_verdict": "none", "att_kid": None, "att_iss": None}
    assert judge_attestation(_sub()).fields == want == default_judge(_sub()).fields
    assert judge_attestation(_sub(), TrustStore(), 0, 1).fields == want


def test_an_untrusted_issuer_is_unchecked_with_its_hints_either_way():
    sub = _sub(attestation=token(kid="did:x#k", iss="did:x"))
    want = {"att_verdict": "unchecked", "att_kid": "did:x#k", "att_iss": "did:x"}
    assert judge_attestation(sub).fields == want == default_judge(sub).fields
    assert judge_attestation(sub, TrustStore(), 5, 1_000_000).fields == want


@pytest.mark.parametrize("store", [None, TrustStore()], ids=["no-store", "store"])
def test_an_undecodable_token_is_refused_either_way(store):
    sub = _sub(attestation="not.a.jwt")
    with pytest.raises(SubmissionError) as err:
        judge_attestation(sub, store, 0, 1)
    assert (err.value.code, err.value.field) == ("attestation_malformed", "attestation")
