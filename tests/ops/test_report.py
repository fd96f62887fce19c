"""The HTML reports (``ledger/ops/report.py``, ``ledger audit --html``, ``ledger report``) on
SQLite and PostgreSQL: self-contained, escaped, honest about scope and checkpoint, and
refusing bad input without writing a file."""

from __future__ import annotations

import re
from pathlib import Path

from click.testing import CliRunner

from ledger.cli.main import cli
from ledger.crypto.keys import Keyring
from ledger.facade import Ledger
from ledger.ops.report import render_html
from ledger.ops.samples import realistic
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
    audit = {"range": {"start": 0, "end": 1}, "summary": {"rows": 1, "verified": 0,
             "failed": 1, "unverified": 0}, "outcome": "failed", "abstentions": [
             {"seq": 0, "check": evil, "reason": evil, "message": evil}],
             "findings": [{"seq": 0, "code": evil, "class": evil, "message": evil,
                           "expected": evil, "actual": evil}], "policy": evil}
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
