"""The triage table (ledger/core/explain.py): written once, it covers every code the audit
can report and nothing else, docs/audit.md shows exactly it, and findings fold into
incidents by code, class and field."""

from __future__ import annotations

import re
from pathlib import Path

from ledger.core import explain as ex
from ledger.core.redaction_audit import CODES as CUSTODY_CODES
from tests.cli.test_docs import abstention_reasons, finding_codes

DOCS = Path(__file__).resolve().parents[2] / "docs"
# the anchoring policy's codes (docs/anchoring.md#findings) and the erasure abstention
ANCHORING = {"cosignature_invalid", "witness_quorum_not_met", "timestamp_missing",
             "timestamp_invalid", "timestamp_before_entry"}


def documented_codes() -> set[str]:
    """The codes of the tables of docs/audit.md's Findings and Abstentions sections."""
    doc = (DOCS / "audit.md").read_text(encoding="utf-8")
    part = doc[doc.index("## Findings"):doc.index("## Triage")]
    return {c.split(":")[0] + (":" if ":" in c else "")
            for c in re.findall(r"^\| `([a-z_:]+)(?:<rule id>)?` \|", part, re.M)}


def every_code() -> set[str]:
    return (finding_codes() | abstention_reasons() | set(CUSTODY_CODES) | ANCHORING
            | {"redacted"} | documented_codes())


def test_every_code_is_explained_and_nothing_else() -> None:
    codes = every_code()
    assert codes - set(ex.EXPLANATIONS) == set(), "codes without an explanation"
    assert set(ex.EXPLANATIONS) - codes == set(), "explanations of no code"
    for code, e in ex.EXPLANATIONS.items():
        assert e.severity in ex.SEVERITIES, code
        assert e.explanation.endswith(".") and e.next_step.endswith((".", ")")), code


def test_the_anchoring_codes_are_the_documented_ones() -> None:
    doc = (DOCS / "anchoring.md").read_text(encoding="utf-8")
    assert ANCHORING == set(re.findall(r"^\| `(\w+)` \| `\w+` \|", doc, re.M))


def test_docs_audit_md_shows_the_table_of_the_code() -> None:
    doc = (DOCS / "audit.md").read_text(encoding="utf-8")
    start = doc.index(ex.MARK_BEGIN)
    end = doc.index(ex.MARK_END) + len(ex.MARK_END)
    assert doc[start:end] == ex.render_markdown(), \
        "docs/audit.md's triage table differs: paste ledger.core.explain.render_markdown()"
    for code in ex.EXPLANATIONS:  # every served link lands on its row
        assert f'<a id="{ex.anchor(code)}"></a>' in doc, code


def test_explain_policy_rules_and_unknown_codes() -> None:
    p = ex.explain("policy:fact-never-verified")
    assert p["severity"] == ex.MEDIUM and p["code"] == "policy:fact-never-verified"
    assert p["doc"] == "docs/audit.md#code-policy"
    assert ex.explain("column_mismatch")["doc"] == "docs/audit.md#code-column_mismatch"
    assert ex.explain("redacted")["severity"] == ex.INFO  # a lawful erasure is no alarm
    assert ex.explain("no_such_code_yet")["severity"] == ex.MEDIUM


def _col(seq: int, column: str) -> dict:
    return {"code": "column_mismatch", "class": "payload_modified", "seq": seq,
            "message": f"column {column} differs from the hashed envelope",
            "expected": "BLOCKED", "actual": "VERIFIED"}


def test_findings_fold_into_incidents() -> None:
    found = [_col(s, "status") for s in [*range(10, 145), 200, 201, 7]]
    found += [_col(5, "engine"),
              {"code": "payload_digest_mismatch", "class": "payload_modified", "seq": 9,
               "message": "payload result does not hash to its commitment"},
              {"code": "policy:fact-never-verified", "class": "policy_violation", "seq": 11,
               "message": "The fact engine is heuristic"},
              {"code": "seq_gap", "class": "deleted", "seq": 300, "message": "missing"},
              {"code": "x", "class": "forked", "seq": None, "message": 3}]
    got = ex.group_findings(found)
    status = next(g for g in got if g["field"] == "status")
    assert status["count"] == 138 and (status["first_seq"], status["last_seq"]) == (7, 201)
    assert status["ranges"] == [[7, 7], [10, 144], [200, 201]] and status["range_count"] == 3
    assert status["explain"]["severity"] == ex.CRITICAL
    assert [(g["code"], g["field"], g["count"]) for g in got] == [
        ("column_mismatch", "status", 138), ("column_mismatch", "engine", 1),
        ("payload_digest_mismatch", "result", 1), ("seq_gap", None, 1),
        ("policy:fact-never-verified", None, 1), ("x", None, 1)]
    assert got[-1]["first_seq"] is None and got[-1]["ranges"] == []
    capped = ex.group_findings([_col(s, "status") for s in range(0, 20, 2)], max_ranges=3)
    assert capped[0]["ranges"] == [[0, 0], [2, 2], [4, 4]] and capped[0]["range_count"] == 10


def test_finding_field_reads_the_first_words() -> None:
    assert ex.finding_field(_col(1, "att_verdict")) == "att_verdict"
    assert ex.finding_field({"message": "result.status differs from the envelope"}) == \
        "result.status"
    assert ex.finding_field({"message": "entries 3..4 are missing"}) is None
    assert ex.finding_field({}) is None
