"""The HTML reports (``ledger/ops/report.py``, ``ledger audit --html``, ``ledger report``) on
SQLite and PostgreSQL: self-contained, escaped, honest about scope and checkpoint, and
refusing bad input without writing a file."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from ledger.cli.main import cli
from ledger.core.audit_report import AuditRange, AuditReport, RowCounts
from ledger.core.finding import Abstention, Finding
from ledger.crypto.keys import Keyring
from ledger.demo.samples import realistic
from ledger.facade import Ledger
from ledger.report import render_html
from tests import tamper

# an in-page anchor (href="#findings") is no external resource
EXTERNAL = re.compile(r"""src\s*=|href\s*=\s*(?!["']?#)|url\(\s*['"]?(?:https?:|//)|@import"""
                      r"""|<script|<link""", re.I)


def _seed(db_url: str, tmp_path: Path, n: int = 12, checkpoint: bool = True) -> Keyring:
    ring = Keyring.load(tmp_path / "keys")
    with Ledger.init(db_url, origin="report.example/ledger") as ledger:
        ring.generate(ledger.meta.origin, ledger.clock.now_us())
        ledger.append_many(realistic(n), producer="seed")
        if checkpoint:
            ledger.checkpoint(ring)
    return ring


def test_audit_html_is_self_contained_and_complete(db_url: str, tmp_path: Path) -> None:
    _seed(db_url, tmp_path)
    with tamper.unlocked(db_url) as conn:
        tamper.update_entry(conn, 2, status="<b>x</b>")
    out = tmp_path / "audit.html"
    r = CliRunner().invoke(cli, ["--db", db_url, "audit", "--html", str(out)])
    assert r.exit_code == 1, r.output
    page = out.read_text(encoding="utf-8")
    assert not EXTERNAL.search(page), EXTERNAL.search(page)
    assert "<b>x</b>" not in page  # the tampered value, escaped
    assert "&lt;b&gt;x&lt;/b&gt;" in page
    assert "report.example/ledger" in page and "Outcome: failed" in page
    assert "column_mismatch" in page and "payload_modified" in page
    assert "entries [0, 12)" in page and "tree size</dt><dd>12" in page
    assert "covers the whole scope" in page
    assert "ledger audit --from 0 --to 12 --checkpoint checkpoint-12.txt --key jwks.json" in page
    assert "ledger prove 11 --checkpoint checkpoint-12.txt --out proof.json" in page
    assert page.count("<svg") == 3 and "@media print" in page
    assert "— report.example/ledger " in page  # the signed note, to save and re-check


def test_report_scopes_by_time_and_says_what_the_checkpoint_covers(db_url: str,
                                                                     tmp_path: Path) -> None:
    ring = _seed(db_url, tmp_path)
    with Ledger.open(db_url) as ledger:
        ledger.append_many(realistic(3, start=50), producer="seed")  # after the checkpoint
        first = ledger.get(0)["recorded_at"]
    out = tmp_path / "r.html"
    r = CliRunner().invoke(cli, ["--db", db_url, "report", "--html", str(out),
                                 "--since", first])
    assert r.exit_code == 0, r.output
    page = out.read_text(encoding="utf-8")
    assert "entries [0, 15)" in page and "Outcome: passed" in page
    assert "does NOT cover the scope&#x27;s last 3 entries" in page
    assert "ledger report --html report.html --since " in page
    r = CliRunner().invoke(cli, ["--db", db_url, "report", "--html", str(out),
                                 "--since", "2999-01-01"])
    assert r.exit_code == 0, r.output
    assert "entries [0, 0)" in out.read_text() and "No findings." in out.read_text()
    del ring


def test_report_without_a_checkpoint_says_so(db_url: str, tmp_path: Path) -> None:
    _seed(db_url, tmp_path, n=3, checkpoint=False)
    out = tmp_path / "r.html"
    r = CliRunner().invoke(cli, ["--db", db_url, "report", "--html", str(out)])
    assert r.exit_code == 0, r.output
    page = out.read_text()
    assert "No checkpoint is signed yet" in page and "--checkpoint" not in page


def test_bad_input_is_refused_and_writes_nothing(db_url: str, tmp_path: Path) -> None:
    _seed(db_url, tmp_path, n=2, checkpoint=False)
    out = tmp_path / "r.html"
    for args in (["--since", "yesterday"], ["--until", "2026-13-45"]):
        r = CliRunner().invoke(cli, ["--db", db_url, "report", "--html", str(out), *args])
        assert r.exit_code == 2, r.output
        assert "since" in r.output or "until" in r.output
        assert "Traceback" not in r.output and not out.exists()
    r = CliRunner().invoke(cli, ["--db", db_url, "report"])
    assert r.exit_code == 2 and "--html" in r.output


def test_render_escapes_every_value() -> None:
    evil = '"><img src=x onerror=alert(1)>'
    # every text of the report is the attacker's, the finding's class too (the page takes
    # the report as it is given)
    audit = AuditReport(
        evil, evil, AuditRange(0, 1), RowCounts(1, 0, 1, 0),
        (Finding(evil, 0, evil, evil, evil, evil),),  # type: ignore[arg-type]
        (Abstention(0, evil, evil, evil),), evil, True, 1, evil, evil, None, "failed")
    data = {"format": "x", "title": evil, "command": "ledger audit", "generated_at": evil,
            "ledger_id": evil, "origin": evil,
            "scope": {"start": 0, "end": 1, "since": evil, "until": None, "entries": 1,
                      "first_recorded_at": evil, "last_recorded_at": evil},
            "checkpoint": {"size": 1, "created_at": evil, "root_b64": evil, "signers": [evil],
                           "note": evil, "covers_scope": True, "cosigners": [evil],
                           "timestamps": [evil]},
            "kinds": {evil: 1}, "status_engine": [[evil, evil, 1]], "verdicts": {evil: 1},
            "over_time": {evil: {evil: 1}}, "verdict_time": {}, "findings_time": {evil: {evil: 1}},
            "audit": audit, "summary_line": evil}
    page = render_html(data)
    assert "<img" not in page and "onerror=alert(1)>" not in page
    assert "&quot;&gt;&lt;img src=x onerror=alert(1)&gt;" in page


def _blocked_math(query: str) -> dict:
    return {"result": {"status": "BLOCKED", "agent_message": "no", "developer_fields": {},
                       "proof_ref": None}, "engine": "math", "query": query}


@pytest.mark.slow  # one real re-execution worker (an interpreter, SymPy and Z3 imported)
def test_report_shows_reverify_disagreements_as_their_own_class(db_url: str,
                                                                 tmp_path: Path) -> None:
    pytest.importorskip("qwed_new")
    _seed(db_url, tmp_path, n=4)
    with Ledger.open(db_url) as ledger:  # a true identity stored as BLOCKED: it disagrees
        assert all(r.ok for r in ledger.append_many([_blocked_math("(x + 1)**2 = "
                                                                   "x**2 + 2*x + <1>")]))
        assert all(r.ok for r in ledger.append_many([_blocked_math("(x + 1)**2 = "
                                                                   "x**2 + 2*x + 1")]))
    rv = tmp_path / "rv.json"
    r = CliRunner().invoke(cli, ["--db", db_url, "reverify", "--engine", "math",
                                 "--json-report", str(rv)])
    assert r.exit_code == 1, r.output
    out = tmp_path / "r.html"
    r = CliRunner().invoke(cli, ["--db", db_url, "report", "--html", str(out),
                                 "--reverify-report", str(rv)])
    assert r.exit_code == 0, r.output  # the audit passes: every hash checks
    page = out.read_text(encoding="utf-8")
    assert not EXTERNAL.search(page)
    assert "Outcome: passed" in page and "No findings." in page
    assert 'href="#reexecution"' in page  # in the contents
    sec = page[page.index('<section id="reexecution">'):]
    sec = sec[:sec.index("</section>")]
    assert 'class="outcome outcome-failed" id="reexecution-outcome">Re-execution: disagrees' \
        in sec
    assert "4 entries re-verified: 0 agree, 1 disagree, 1 not re-executable, 2 engine " \
        "error(s)" in sec  # the seeded math results' inputs and the unparsable "<1>"
    row = re.search(r'<tr><td>5</td><td>math</td><td>status</td><td>BLOCKED</td>'
                    r'<td>VERIFIED</td><td>qwed qwed 8.0.0</td></tr>', sec)
    assert row, sec
    assert "<td>engine_error</td><td>raised</td><td>2</td>" in sec
    assert "&lt;absent&gt;" in sec and "<absent>" not in sec  # every value escaped
    assert page.index('id="findings"') < page.index('id="reexecution"')


def test_a_bad_reverify_report_is_refused_and_writes_nothing(db_url: str,
                                                             tmp_path: Path) -> None:
    _seed(db_url, tmp_path, n=2, checkpoint=False)
    out = tmp_path / "r.html"
    cases = {"notjson.json": ("{", "not a readable JSON document"),
             "audit.json": (json.dumps({"format": "ledger-audit-report/1"}),
                            "not a ledger-reverify-report/1 document"),
             "other.json": (json.dumps({"format": "ledger-reverify-report/1",
                                        "ledger_id": "another", "outcomes": []}),
                            "ledger_id 'another' is not this ledger's"),
             "outcomes.json": (None, "outcomes must be a list")}
    with Ledger.open(db_url) as ledger:
        lid = ledger.meta.ledger_id
    for name, (text, rule) in cases.items():
        if text is None:
            text = json.dumps({"format": "ledger-reverify-report/1", "ledger_id": lid,
                               "outcomes": [{"seq": "0", "outcome": "agrees"}]})
        (tmp_path / name).write_text(text)
        r = CliRunner().invoke(cli, ["--db", db_url, "report", "--html", str(out),
                                     "--reverify-report", str(tmp_path / name)])
        assert r.exit_code == 2, (name, r.output)
        assert "--reverify-report" in r.output and rule in r.output, (name, r.output)
        assert "Traceback" not in r.output and not out.exists()
