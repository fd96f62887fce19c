"""The audit's clean-case shortcut of the contract rules (``ledger.core.contract``), pinned
to the rules: for the rule sets the audit and submission validation apply to every row, ``violations`` with the
shortcut equals the rules run one by one, on arbitrary documents."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.core import contract as c

REF = "sha256:" + "ab" * 32
scalars = st.one_of(st.none(), st.booleans(), st.integers(-2, 2), st.floats(allow_nan=False),
                    st.text(max_size=4), st.sampled_from([REF, "VERIFIED", "BLOCKED",
                                                          "UNVERIFIABLE", "verified", " ", ""]))
values = st.recursive(scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=3), inner, max_size=3)),
    max_leaves=6)
checks = st.lists(st.one_of(values, st.fixed_dictionaries({}, optional={
    "advisory_only": st.one_of(st.just(True), st.just(1), st.just(1.0), st.just(False),
                               values), "name": st.text(max_size=3)})), max_size=3)
documents = st.fixed_dictionaries({}, optional={
    "status": st.one_of(st.sampled_from(c.STATUSES), values),
    "proof_ref": st.one_of(st.just(REF), st.none(), values),
    "agent_message": st.one_of(st.text(max_size=5), values),
    "is_authoritative": st.one_of(st.booleans(), values),
    "developer_fields": st.one_of(st.fixed_dictionaries({}, optional={
        "advisory_checks": st.one_of(checks, values)}), values),
    "attestation": st.one_of(st.none(), st.text(max_size=3)),
})


def plain(view, rules):
    return [(v.rule.rejection, v.field, v.expected, v.actual, v.params)
            for rule in rules for v in [c.Violation(rule, *t) for t in rule.find(view)]]


def fast(view, rules):
    return [(v.rule.rejection, v.field, v.expected, v.actual, v.params)
            for v in c.violations(view, rules)]


@settings(max_examples=1500, deadline=None)
@given(documents)
def test_the_shortcut_agrees_with_the_rules(doc):
    for rules in (c.ENVELOPE_RULES, c.DOCUMENT_RULES, c.SUBMISSION_RULES, c.RULES,
                  c.ATTESTATION_RULES):
        assert fast(doc, rules) == plain(doc, rules)


def test_the_clean_cases_are_taken_and_each_rule_still_fires():
    good = {"status": "VERIFIED", "proof_ref": REF, "is_authoritative": True,
            "agent_message": "ok", "developer_fields": {"advisory_checks": [
                {"advisory_only": True}, {"advisory_only": 1}]}}
    assert c.envelope_clean(good) and c.document_clean(good)
    assert c.violations(good, c.ENVELOPE_RULES) == c.violations(good, c.DOCUMENT_RULES) == []
    for change, rule in (({"status": "verified"}, "invalid_status"),
                         ({"proof_ref": None}, "verified_without_proof"),
                         ({"status": "BLOCKED"}, "proof_on_non_verified")):
        assert [v.rule.rejection for v in c.violations({**good, **change}, c.ENVELOPE_RULES)] \
            [:1] == [rule]
    for change, rule in (({"is_authoritative": 1}, "authoritative_inconsistent"),
                         ({"agent_message": "  "}, "empty_agent_message"),
                         ({"developer_fields": {"advisory_checks": [{"advisory_only": 1.0}]}},
                          "non_advisory_check")):
        assert [v.rule.rejection for v in c.violations({**good, **change}, c.DOCUMENT_RULES)] \
            == [rule]
