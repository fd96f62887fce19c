"""The audit report as a value: one key order, one ``to_json`` / ``from_json`` pair.

``from_json(to_json(r)) == r`` for every report (a property), through JSON text as well;
the object is the one docs/format.md shows for the worked ``audit_run`` vector, key for
key, and its compact sorted serialization has the digest recorded there.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.core.audit_report import AuditRange, AuditReport, RowCounts, report_outcome
from ledger.core.digest import digest_text
from ledger.core.finding import (
    BUNDLE_FINDING_KEYS,
    CHECKPOINT_FINDING_KEYS,
    FINDING_KEYS,
    Abstention,
    Finding,
    FindingClass,
    summary_line,
)
from ledger.errors import UsageError

# JSON values as a finding's expected/actual hold them
json_scalars = st.none() | st.booleans() | st.integers(-2**63, 2**63) | st.text(max_size=12)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=3)
    | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=8)
seqs = st.none() | st.integers(0, 10**9)
extra_keys = st.sampled_from(["checkpoint", "range", "file", "note"])


@st.composite
def findings(draw: st.DrawFn) -> Finding:
    keys = draw(st.sampled_from([FINDING_KEYS, CHECKPOINT_FINDING_KEYS, BUNDLE_FINDING_KEYS]))
    extra = draw(st.dictionaries(extra_keys, json_values, max_size=2))
    return Finding(draw(st.text(min_size=1, max_size=20)), draw(seqs),
                   draw(st.sampled_from(list(FindingClass))), draw(st.text(max_size=30)),
                   draw(json_values), draw(json_values), tuple(extra.items()), keys)


@st.composite
def abstentions(draw: st.DrawFn) -> Abstention:
    extra = draw(st.dictionaries(extra_keys, json_values, max_size=2))
    return Abstention(draw(seqs), draw(st.text(max_size=12)), draw(st.text(max_size=12)),
                      draw(st.text(max_size=30)), tuple(extra.items()))


counts = st.builds(RowCounts, *[st.integers(0, 10**9)] * 4)
texts = st.text(max_size=20)


@st.composite
def reports(draw: st.DrawFn) -> AuditReport:
    start = draw(st.integers(0, 10**6))
    summary = draw(counts)
    found = tuple(draw(st.lists(findings(), max_size=4)))
    abstained = tuple(draw(st.lists(abstentions(), max_size=4)))
    return AuditReport(
        draw(texts), draw(texts), AuditRange(start, start + draw(st.integers(0, 10**6))),
        summary, found, abstained, draw(texts), draw(st.booleans()), draw(st.integers(1, 64)),
        draw(texts), draw(texts), draw(st.none() | st.integers(1, 10**6)),
        draw(st.sampled_from([report_outcome(summary, found, abstained), "passed"])),
        read_only_replica=draw(st.booleans()),
        checkpoints=draw(st.none() | st.lists(texts, max_size=2).map(tuple)),
        anchors=draw(st.none() | st.lists(
            st.dictionaries(st.text(max_size=6), json_values, max_size=3),
            max_size=2).map(tuple)),
        recorded_seq=draw(st.none() | st.integers(0, 10**6)))


@settings(max_examples=300, deadline=None)
@given(reports())
def test_from_json_of_to_json_is_the_report(r: AuditReport) -> None:
    assert AuditReport.from_json(r.to_json()) == r
    text = json.dumps(r.to_json())
    assert AuditReport.from_json(json.loads(text)) == r
    assert json.dumps(AuditReport.from_json(json.loads(text)).to_json()) == text


@settings(max_examples=300, deadline=None)
@given(findings(), abstentions())
def test_findings_and_abstentions_round_trip_in_their_key_order(f: Finding,
                                                                a: Abstention) -> None:
    assert Finding.from_json(f.to_json()) == f
    assert list(f.to_json())[:6] == list(f.keys)
    assert Abstention.from_json(a.to_json()) == a


@settings(max_examples=200, deadline=None)
@given(reports())
def test_the_typed_summary_line_is_the_one_of_the_json_object(r: AuditReport) -> None:
    assert r.summary_line() == summary_line(r.to_json())


def test_reported_values_are_json() -> None:
    f = Finding("entry_hash_mismatch", 3, FindingClass.PAYLOAD_MODIFIED, "m", b"\x01\x02",
                (1, b"\xff"), (("range", (0, 2)),))
    r = f.reported()
    assert json.dumps(r.to_json()) == json.dumps(f.to_json())
    assert r.to_json() == {
        "code": "entry_hash_mismatch", "seq": 3, "message": "m", "expected": "0x0102",
        "actual": [1, "0xff"], "class": "payload_modified", "range": [0, 2]}
    assert Finding.from_json(json.loads(json.dumps(r.to_json()))) == r


@pytest.mark.parametrize("obj", [
    {"code": "x", "seq": 1, "message": "m", "expected": None, "class": "deleted"},
    {"code": "x", "seq": 1, "message": "m", "expected": None, "actual": None,
     "class": "no_such_class"},
    {"note": 1, "code": "x", "seq": 1, "message": "m", "expected": None, "actual": None,
     "class": "deleted"},
])
def test_a_malformed_finding_is_refused(obj: dict[str, object]) -> None:
    with pytest.raises(UsageError):
        Finding.from_json(obj)


def test_a_report_of_another_format_is_refused() -> None:
    with pytest.raises(UsageError):
        AuditReport.from_json({"format": "ledger-audit-report/2"})


# the worked vector of docs/format.md §10.2 (entry 8: audit-run)
VECTOR = (
    '{"format": "ledger-audit-report/1", "ledger_id": "00000000-0000-4000-8000-000000000001",'
    ' "origin": "example.org/verification-ledger", "range": {"start": 0, "end": 8},'
    ' "summary": {"rows": 8, "verified": 7, "failed": 0, "unverified": 1}, "findings": [],'
    ' "abstentions": [{"seq": 2, "check": "attestation", "reason": "unknown_issuer_key",'
    ' "message": "no key of issuer \'did:qwed:node:local\' was trusted at this position"}],'
    ' "policy": "default policy", "attestations_checked": true, "workers": 1,'
    ' "started_at": "2026-01-04T00:00:57.623456Z",'
    ' "finished_at": "2026-01-04T00:00:59.123456Z", "run_id": 1, "outcome": "unverified"}')


def test_the_format_vector_reads_and_writes_back_byte_for_byte() -> None:
    r = AuditReport.from_json(json.loads(VECTOR))
    assert json.dumps(r.to_json()) == VECTOR
    assert r.outcome == report_outcome(r.summary, r.findings, r.abstentions) == "unverified"
    body = json.dumps(r.to_json(), sort_keys=True, separators=(",", ":")).encode()
    assert len(body) == 575
    assert digest_text(body) == ("sha256:5ae00beaf362a6ff03ebf83c93931f6a4cf548b1e5326039a4f"
                                 "42cab3b185b8f")
