"""ledger.core.policy.load_policy: the one policy loader (audit and export verification)."""

from __future__ import annotations

import json

import pytest

from ledger.core.policy import load_policy
from ledger.errors import UsageError
from ledger.ops import audit
from ledger.verify import export as verify_export


def test_the_packaged_default_is_the_one_both_use():
    default = load_policy()
    assert default.source == "default policy" and default.rules
    assert audit.load_policy is load_policy
    assert verify_export.default_policy() == default


def test_a_policy_file_is_read_with_its_path_as_source(tmp_path):
    path = tmp_path / "p.json"
    path.write_text(json.dumps({"format": "ledger-policy/1", "rules": [
        {"id": "no-fact", "engine": "fact", "status": "VERIFIED"}]}))
    for given in (path, str(path)):
        policy = load_policy(given)
        assert policy.source == str(path)
        assert [r.id for r in policy.violations("fact", "VERIFIED", None)] == ["no-fact"]


@pytest.mark.parametrize("text", [None, "{", '{"format": "other"}',
                                  '{"format": "ledger-policy/1", "rules": [{"x": 1}]}'])
def test_unusable_policies_are_a_usage_error(tmp_path, text):
    path = tmp_path / "p.json"
    if text is not None:
        path.write_text(text)
    with pytest.raises(UsageError) as err:
        load_policy(path)
    assert (err.value.code, err.value.field) == ("bad_policy", "policy")
    assert err.value.message.startswith("cannot use policy: ")
