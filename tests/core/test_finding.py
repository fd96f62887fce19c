"""ledger.core.finding: the one finding type, dispositions, outcome, exit codes and the
summary line of ``ledger audit`` and ``ledger verify-export``; the registry of finding codes,
which docs/audit.md's tables show and the checks follow."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from ledger.core import contract
from ledger.core.finding import (
    AUDIT_SUMMARY,
    BUNDLE_FINDING_KEYS,
    CHECKPOINT_FINDING_KEYS,
    EXIT_CODES,
    EXPORT_SUMMARY,
    FINDING_CODES,
    LEDGER_LEVEL_CODES,
    Abstention,
    Disposition,
    Finding,
    FindingClass,
    code_table_marks,
    outcome,
    render_code_table,
    row_disposition,
    summary_line,
)
from ledger.core.finding import CODE_TABLES as TABLES
from tests.cli.test_docs import PKG, attestation_codes, finding_codes

AUDIT_MD = (Path(__file__).resolve().parents[2] / "docs" / "audit.md").read_text("utf-8")


def _report(rows=0, verified=0, failed=0, unverified=0, findings=(), abstentions=()):
    report = {"summary": {"rows": rows, "verified": verified, "failed": failed,
                          "unverified": unverified},
              "findings": list(findings), "abstentions": list(abstentions)}
    report["outcome"] = outcome(report)
    return report


def test_the_classes_are_the_documented_ones():
    line = next(ln for ln in AUDIT_MD.split("\n\n") if ln.startswith("Classes (stable)"))
    documented = set(re.findall(r"`([a-z_]+)`", line))
    assert {c.value for c in FindingClass} == documented
    assert "signature_invalid" in documented and "signature invalid" not in documented


def test_a_finding_keeps_each_report_key_order():
    f = Finding("column_mismatch", 4, FindingClass.PAYLOAD_MODIFIED, "differs", b"\x01", (1, 2))
    assert list(f.to_dict()) == ["code", "seq", "message", "expected", "actual", "class"]
    assert f.to_dict() == {"code": "column_mismatch", "seq": 4, "message": "differs",
                           "expected": "0x01", "actual": [1, 2], "class": "payload_modified"}
    assert list(f.with_extra(file="entries.jsonl").to_dict(BUNDLE_FINDING_KEYS)) == [
        "code", "seq", "class", "message", "expected", "actual", "file"]
    cp = f.with_extra(range=[0, 1]).with_extra(checkpoint="cp.txt")
    assert list(cp.to_dict(CHECKPOINT_FINDING_KEYS)) == [
        "code", "class", "seq", "message", "expected", "actual", "range", "checkpoint"]
    assert json.dumps(cp.to_dict(CHECKPOINT_FINDING_KEYS))  # plain JSON, no enum objects
    assert type(cp.to_dict()["class"]) is str


def test_an_abstention_is_seq_check_reason_message_then_extras():
    a = Abstention(3, "attestation", "no_trust_store", "not checked").with_extra(file="e")
    assert list(a.to_dict()) == ["seq", "check", "reason", "message", "file"]


def test_row_disposition_and_outcome():
    assert row_disposition(True, True) is Disposition.FAILED
    assert row_disposition(False, True) is Disposition.ABSTAINED
    assert row_disposition(False, False) is Disposition.VERIFIED
    assert outcome(_report(2, 2)) == "passed"
    assert outcome(_report(2, 1, unverified=1)) == "unverified"
    assert outcome(_report(2, 2, abstentions=[{"seq": None}])) == "unverified"
    assert outcome(_report(2, 1, 1, findings=[{"seq": 1}])) == "failed"
    assert EXIT_CODES == {"passed": 0, "failed": 1, "unverified": 3}


def test_summary_lines():
    assert summary_line(_report(12, 12)) == \
        "audit complete: 12 rows, 12 verified, 0 failed, 0 unverified"
    gap = {"code": "seq_gap", "seq": 5}
    assert summary_line(_report(7, 7, findings=[gap])) == \
        "audit complete: 7 rows, 7 verified, 0 failed, 0 unverified; 1 ledger-level finding(s)"
    unrowed = {"seq": None, "check": "checkpoint_signature"}
    assert summary_line(_report(3, 3, abstentions=[unrowed])) == (
        "audit complete: 3 rows, 3 verified, 0 failed, 0 unverified (human review needed)"
        "; 1 ledger-level check(s) not verified")
    bundle = {"code": "file_missing", "seq": None}
    assert summary_line(_report(30, 29, unverified=1, findings=[bundle]), EXPORT_SUMMARY) == (
        "verify-export complete: 30 rows, 29 verified, 0 failed, 1 unverified"
        " (human review needed); 1 bundle-level finding(s)")


def test_a_failed_report_asks_for_review_only_in_verify_export():
    row = {"seq": 1, "check": "attestation"}
    failed = _report(2, 1, 1, findings=[{"code": "payload_missing", "seq": 1}],
                     abstentions=[row])
    assert "human review" not in summary_line(failed, AUDIT_SUMMARY)
    assert "human review" in summary_line(failed, EXPORT_SUMMARY)


@given(st.integers(0, 50), st.integers(0, 50), st.integers(0, 50))
def test_summary_line_states_the_counts(verified, failed, unverified):
    rows = verified + failed + unverified
    findings = [{"code": "x", "seq": 0}] * (failed > 0)
    for style in (AUDIT_SUMMARY, EXPORT_SUMMARY):
        line = summary_line(_report(rows, verified, failed, unverified, findings), style)
        assert re.match(rf"^[a-z-]+ complete: {rows} rows, {verified} verified, {failed} "
                        rf"failed, {unverified} unverified", line)
        assert ("(human review needed)" in line) == (unverified > 0)



# -- the registry of finding codes ------------------------------------------------------

def test_docs_audit_md_shows_the_tables_of_the_registry():
    for name in TABLES:
        begin, end = code_table_marks(name)
        start, stop = AUDIT_MD.index(begin), AUDIT_MD.index(end) + len(end)
        assert AUDIT_MD[start:stop] == render_code_table(name), (
            f"docs/audit.md's {name} findings differ from ledger/core/finding.py: paste "
            f"render_code_table({name!r})")


def test_a_changed_registry_changes_the_rendered_table(monkeypatch):
    """The doc test would notice an edit on either side."""
    before = render_code_table("audit")
    d = TABLES["audit"]["seq_gap"]
    monkeypatch.setitem(TABLES["audit"], "seq_gap",
                        type(d)(FindingClass.FORKED, d.seq, d.meaning, d.ledger_level))
    assert render_code_table("audit") != before
    assert "| `seq_gap` | `forked` |" in render_code_table("audit")


def test_the_registry_holds_every_code_the_checks_report_and_no_other():
    custody = {"redaction_signature_invalid", "redaction_unsigned"}  # crypto/redaction_sign.py
    from ledger.core.redaction_audit import CODES as CUSTODY

    assert set(FINDING_CODES) == finding_codes() | set(CUSTODY) | custody
    assert LEDGER_LEVEL_CODES == {c for c, d in FINDING_CODES.items() if d.ledger_level}
    assert set(TABLES["checkpoint"]) <= LEDGER_LEVEL_CODES


def _class_of(node: ast.AST) -> FindingClass | None:
    """The class an argument names: ``FindingClass.X`` or a constant ``X`` bound to it."""
    name = node.attr if isinstance(node, ast.Attribute) else getattr(node, "id", None)
    return FindingClass[name] if name in FindingClass.__members__ else None


def constructed() -> set[tuple[str, FindingClass]]:
    """(code, class) of every finding a check of ``ledger audit`` builds with a literal code
    (``Finding(code, seq, cls, ...)``, ``_finding(code, cls, ...)`` of the checkpoint check;
    ``policy:`` for ``f"policy:{rule}"``); verify/ builds the export's and anchoring's."""
    out = set()
    for path in sorted(PKG.rglob("*.py")):
        if "verify" in path.relative_to(PKG).parts:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Call) or not node.args:
                continue
            fn = getattr(node.func, "id", getattr(node.func, "attr", None))
            at = {"Finding": 2, "_finding": 1}.get(fn or "")
            if at is None or len(node.args) <= at:
                continue
            first = node.args[0]
            code = first.value if isinstance(first, ast.Constant) else \
                "policy:" if isinstance(first, ast.JoinedStr) else None
            if isinstance(code, str) and (cls := _class_of(node.args[at])) is not None:
                out.add((code, cls))
    return out


def test_each_check_builds_its_code_with_the_registered_class():
    built = constructed()
    assert len(built) > 30 and ("seq_gap", FindingClass.DELETED) in built
    assert ("checkpoint_unverified", FindingClass.SIGNATURE_INVALID) in built
    wrong = sorted((c, k.value, FINDING_CODES[c].cls.value) for c, k in built
                   if FINDING_CODES[c].cls is not k)
    assert wrong == []
    # codes built from a variable: the contract's rules and the attestation check
    assert {FINDING_CODES[r.code].cls for r in contract.RULES if r.code} == {
        FindingClass.CONTRACT_VIOLATION}
    assert {FINDING_CODES[c].cls for c in attestation_codes()} == {
        FindingClass.SIGNATURE_INVALID}
