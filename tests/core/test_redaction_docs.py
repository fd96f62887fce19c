"""ledger-redaction/1, ledger-hold/1 and ledger-retention/1: build, parse strictly, validate,
and the audit's checks of redaction and hold entries (pure)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ledger.core.canonical import canonical_json
from ledger.core.digest import digest_text
from ledger.core.redaction import (
    MAX_TARGETS,
    build_hold,
    build_request,
    fold_holds,
    parse_hold,
    parse_request,
    payload_names,
)
from ledger.core.redaction_audit import CustodyEntry, check_custody
from ledger.core.retention import DAY_US, parse_retention
from ledger.errors import UsageError

names = st.lists(st.sampled_from(["result", "preimage", "attestation", "query", "meta",
                                  "subject"]), min_size=1, unique=True)


@given(st.dictionaries(st.integers(0, 2**40), names, min_size=1, max_size=20),
       st.text(min_size=1).filter(lambda t: t.strip() and "\x00" not in t
                                  and "\ud800" > max(t, default="a")))
def test_request_round_trips(targets, reason):
    req = build_request(targets, reason, reference="DSR-1")
    assert parse_request(canonical_json(req.to_doc())) == req
    assert [s for s, _ in req.targets] == sorted(targets)
    assert all(list(n) == sorted(n) for _, n in req.targets)


def test_request_document_is_exactly_the_spec():
    req = build_request({7: ["query", "attestation"]}, "GDPR Art. 17", reference="DSR-9",
                        requested_by="dpo@example.org")
    assert req.to_doc() == {
        "format": "ledger-redaction/1", "targets": [{"seq": 7, "payloads":
                                                     ["attestation", "query"]}],
        "reason": "GDPR Art. 17", "reference": "DSR-9", "requested_by": "dpo@example.org",
        "keep_attestation": False, "override_minimum": None}


@pytest.mark.parametrize("reason", ["", "   ", None, "a\x00b", "x" * 4097])
def test_empty_or_bad_reason_is_refused(reason):
    with pytest.raises(UsageError) as e:
        build_request({1: ["query"]}, reason)
    assert e.value.field == "reason"


def test_too_many_targets_and_bad_names_are_refused():
    with pytest.raises(UsageError):
        build_request({i: ["query"] for i in range(MAX_TARGETS + 1)}, "r")
    with pytest.raises(UsageError):
        build_request({1: ["secret"]}, "r")
    with pytest.raises(UsageError):
        build_request({}, "r")


@pytest.mark.parametrize("mutate", [
    lambda d: d.update(extra=1),
    lambda d: d.update(format="ledger-redaction/2"),
    lambda d: d.pop("reference"),
    lambda d: d["targets"].reverse(),
    lambda d: d["targets"][0].update(payloads=["query", "attestation"]),
    lambda d: d["targets"][0].update(seq=-1),
    lambda d: d["targets"][0].update(seq=True),
    lambda d: d.update(keep_attestation="no"),
    lambda d: d.update(reason=""),
])
def test_parse_request_is_strict(mutate):
    doc = build_request({1: ["query"], 2: ["attestation", "query"]}, "r").to_doc()
    mutate(doc)
    with pytest.raises(UsageError) as e:
        parse_request(json.dumps(doc).encode())
    assert e.value.code == "bad_redaction"


def test_duplicate_keys_are_refused():
    raw = b'{"format":"ledger-redaction/1","format":"ledger-redaction/1","targets":[],' \
          b'"reason":"r","reference":null,"requested_by":null,"keep_attestation":false,' \
          b'"override_minimum":null}'
    with pytest.raises(UsageError):
        parse_request(raw)


def test_payload_kinds():
    assert payload_names(["all"]) is None
    assert payload_names([]) is None
    assert payload_names(["evidence", "query"]) == ("preimage", "query")
    with pytest.raises(UsageError):
        payload_names(["passwords"])


def test_hold_documents_and_fold():
    add = build_hold("add", "litigation 42", reference="case 42", targets=[5, 3, 3])
    assert add.to_doc() == {"format": "ledger-hold/1", "action": "add", "targets": [3, 5],
                            "reason": "litigation 42", "reference": "case 42"}
    rel = build_hold("release", "case closed", hold_seq=10)
    assert parse_hold(canonical_json(add.to_doc())) == add
    assert parse_hold(canonical_json(rel.to_doc())) == rel
    holds = fold_holds([(10, add)])
    assert holds.holding(3) == [10] and holds.holding(4) == []
    assert holds.apply(11, rel) is None
    assert holds.holding(3) == []
    assert "already released" in holds.apply(12, rel)
    with pytest.raises(UsageError):
        build_hold("add", "", targets=[1])
    with pytest.raises(UsageError):
        parse_hold(b'{"format":"ledger-hold/1","action":"add","targets":[1],"reason":"r",'
                   b'"reference":null,"hold_seq":3}')


def test_retention_policy():
    pol = parse_retention(json.dumps({"format": "ledger-retention/1", "rules": [
        {"id": "prompts", "engine": "*", "payloads": ["query", "evidence"],
         "erase_after_days": 200, "minimum_days": 183},
        {"id": "sympy-min", "engine": "sympy", "payloads": ["all"], "minimum_days": 365},
    ]}))
    t0 = 0
    assert pol.minimum_days("sympy", "query") == 365
    assert pol.minimum_days("z3", "query") == 183
    assert pol.expired("z3", ["query", "preimage", "result"], t0, 201 * DAY_US) == \
        ["preimage", "query"]
    assert pol.expired("z3", ["query"], t0, 199 * DAY_US) == []
    assert pol.expired("sympy", ["query"], t0, 201 * DAY_US) == []  # the longer minimum
    assert pol.under_minimum("z3", "query", t0, 100 * DAY_US) == 183
    assert pol.under_minimum("z3", "meta", t0, 100 * DAY_US) is None


@pytest.mark.parametrize("doc", [
    {"format": "ledger-retention/2", "rules": []},
    {"format": "ledger-retention/1", "rules": [{"payloads": ["all"]}]},
    {"format": "ledger-retention/1", "rules": [{"erase_after_days": 10, "minimum_days": 20}]},
    {"format": "ledger-retention/1", "rules": [{"erase_after_days": -1}]},
    {"format": "ledger-retention/1", "rules": [{"erase_after_days": 1, "kind": "hold"}]},
    {"format": "ledger-retention/1", "rules": [{"erase_after_days": 1, "colour": "red"}]},
    {"format": "ledger-retention/1", "rules": [{"erase_after_days": 1, "payloads": ["x"]}]},
    {"format": "ledger-retention/1", "rules": [], "extra": 1},
])
def test_bad_retention_policies_are_refused(doc):
    with pytest.raises(UsageError) as e:
        parse_retention(json.dumps(doc))
    assert e.value.code == "bad_retention"


def _entry(seq, kind, doc, role="custodian", action=None):
    data = canonical_json(doc)
    env = {"role": role, **({"action": action} if action else {}),
           "payloads": {"order" if kind == "hold" else "request": digest_text(data)}}
    return CustodyEntry(seq, kind, env, data)


def test_custody_checks():
    kinds = {0: "result", 1: "result", 2: "key_event"}
    hold = build_hold("add", "case", targets=[1]).to_doc()
    good = build_request({0: ["query"]}, "r").to_doc()
    held = build_request({1: ["query"]}, "r").to_doc()
    wrong = build_request({2: ["query"], 9: ["meta"], 50: ["meta"]}, "r").to_doc()
    entries = [_entry(3, "hold", hold, action="add"), _entry(4, "redaction", good),
               _entry(5, "redaction", held), _entry(6, "redaction", wrong),
               _entry(7, "redaction", good, role="agent")]
    found = [(f.code, f.seq) for f in check_custody(entries, kinds.get)]
    assert found == [("redaction_of_held_entry", 5), ("redaction_target_invalid", 6),
                     ("redaction_target_invalid", 6), ("redaction_target_invalid", 6),
                     ("redaction_role_invalid", 7)]
    bad = CustodyEntry(8, "redaction", {"role": "operator"}, b'{"format": 1}')
    assert [f.code for f in check_custody([bad], kinds.get)] == ["redaction_invalid"]
    release_none = build_hold("release", "x", hold_seq=1).to_doc()
    assert [f.code for f in check_custody(
        [_entry(9, "hold", release_none, action="release")], kinds.get)] == \
        ["hold_target_invalid"]
