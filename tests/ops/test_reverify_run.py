"""The ``reverify_run`` entry (docs/format.md section 10.4): ``ledger reverify --record``
commits the run's summary in the chain; every reader checks it like any other entry, and a
change made with raw SQL behind the ledger's back is found by the audit, the read check and
both export verifiers (the bundle's own script and ``ledger verify-export``), on SQLite and
PostgreSQL."""

from __future__ import annotations

import contextlib
import importlib.util
import io
import json
from pathlib import Path
from typing import Any

from click.testing import CliRunner

import tests.tamper as T
from ledger import Ledger
from ledger.cli.main import cli
from ledger.clock import FixedClock
from ledger.core.canonical import canonical_json
from ledger.core.reverify_run import outcomes_digest
from ledger.crypto.keys import Keyring
from ledger.ops.audit import AuditOptions, run_audit
from ledger.ops.export import ExportOptions
from ledger.verify.export import verify_export

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "verify_bundle.py"
ORIGIN = "test.ledger/reverify"
T0 = T.FIXTURE_TIME_US


def _script() -> Any:
    spec = importlib.util.spec_from_file_location("verify_bundle_reverify", SCRIPT)
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


VB = _script()


def _sub(query: str) -> dict[str, Any]:
    return {"result": {"status": "BLOCKED", "agent_message": "no", "developer_fields": {},
                       "proof_ref": None}, "engine": "acme-math", "query": query}


def _recorded(url: str, tmp: Path) -> tuple[int, dict[str, Any]]:
    """A ledger of two results and one recorded re-verification run (by the command)."""
    with Ledger.init(url, clock=FixedClock(T0, 1000), origin=ORIGIN) as led:
        assert all(r.ok for r in led.append_many([_sub("1 + 1"), _sub("2 + 2")]))
    out = tmp / "reverify.json"
    r = CliRunner().invoke(cli, ["--db", url, "reverify", "--record", "--producer", "cron",
                                 "--json-report", str(out)], catch_exceptions=False)
    assert r.exit_code == 3, r.stderr  # nothing re-executable: no re-executor for acme-math
    report = json.loads(out.read_text())
    assert "recorded as entry 2 (reverify_run)" in r.stderr
    return report["recorded_seq"], report


def _export(url: str, tmp: Path, name: str) -> tuple[Path, Path]:
    ring = Keyring.load(tmp / "keys")
    if not ring.path.joinpath("jwks.json").exists():
        ring.generate(ORIGIN, T0)
    with Ledger.open(url) as led:
        led.export(tmp / name, ExportOptions(keys=ring.path))
    return tmp / name, ring.path / "jwks.json"


def _script_codes(bundle: Path, jwks: Path) -> tuple[int, set[str]]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = VB.main([str(bundle), "--jwks", str(jwks), "--json"])
    report = json.loads(out.getvalue())
    return code, {f["code"] for f in report["findings"]}


def _codes(report: dict[str, Any]) -> set[str]:
    return {f["code"] for f in report["findings"]}


def test_a_recorded_run_is_an_entry_every_reader_checks(db_url: str, tmp_path: Path) -> None:
    seq, report = _recorded(db_url, tmp_path)
    with Ledger.open(db_url) as led:
        got = led.get(seq)
        assert got["kind"] == "reverify_run" and got["status"] == "not_reexecutable"
        assert got["integrity"]["verified"] and got["producer"] == "cron"
        doc = got["document"]
        assert doc["format"] == "ledger-reverify-run/1" and doc["run_id"] == report["run_id"]
        assert doc["outcomes_digest"] == outcomes_digest(report["outcomes"])
        page = led.query(kind=["reverify_run"], layer="auditor")
        (row,) = page.rows
        assert row["seq"] == seq and row["integrity"]["verified"] and row["document"] == doc
        audit = run_audit(led, AuditOptions())
    assert audit.outcome == "passed" and audit.summary.rows == 3
    bundle, jwks = _export(db_url, tmp_path, "bundle")
    ours = verify_export(bundle, jwks)
    assert ours["outcome"] == "passed", ours["findings"]
    assert _script_codes(bundle, jwks) == (0, set())


def test_a_changed_run_document_is_found_by_the_audit_and_the_read_check(
        db_url: str, tmp_path: Path) -> None:
    seq, _ = _recorded(db_url, tmp_path)
    with T.unlocked(db_url) as conn:
        stored = T.stored_payload(conn, seq, "result")  # slot 0: the report document
        assert stored is not None
        doc = json.loads(stored[1])
        doc["summary"]["disagrees"] = 0
        doc["outcome"] = "agrees"
        T.set_payload(conn, T.row(conn, seq).doc_digest, canonical_json(doc))
    with Ledger.open(db_url) as led:
        got = led.get(seq)
        audit = run_audit(led, AuditOptions())
    assert not got["integrity"]["verified"] and got["document"] is None
    assert "payload_digest_mismatch" in got["integrity"]["codes"]
    assert audit.outcome == "failed"
    assert [(f.seq, f.code) for f in audit.findings] == [
        (seq, "payload_digest_mismatch")]


def test_a_rewritten_run_whose_document_denies_its_envelope_is_found_everywhere(
        db_url: str, tmp_path: Path) -> None:
    """A self-consistent rewrite (document digest, envelope and chain recomputed, head
    moved) whose document says ``agrees`` under an envelope that still says
    ``not_reexecutable``: only the document check sees it, in every verifier."""
    seq, _ = _recorded(db_url, tmp_path)
    with T.unlocked(db_url) as conn:
        r = T.row(conn, seq)
        stored = T.stored_payload(conn, seq, "result")
        assert stored is not None
        doc = json.loads(stored[1])
        doc["outcome"] = "agrees"
        cols, blobs = T.forged_columns(T.ledger_id(conn), "reverify_run",
                                       {"outcome": "not_reexecutable", "producer": "cron"},
                                       {"report": canonical_json(doc)})
        T.add_payloads(conn, blobs)
        T.write_linked(conn, seq, r.recorded_at, bytes(r.prev_hash), cols, replace=True)
        T.rechain(conn, seq)
    with Ledger.open(db_url) as led:
        got = led.get(seq)
        audit = run_audit(led, AuditOptions())
    assert "document_envelope_mismatch" in got["integrity"]["codes"]
    assert [(f.seq, f.code) for f in audit.findings] == [
        (seq, "document_envelope_mismatch")]
    code = CliRunner().invoke(cli, ["--db", db_url, "audit"]).exit_code
    assert code == 1
    bundle, jwks = _export(db_url, tmp_path, "rewritten")
    assert "document_envelope_mismatch" in _codes(verify_export(bundle, jwks))
    code, codes = _script_codes(bundle, jwks)
    assert code == 1 and "document_envelope_mismatch" in codes


# -- ledger report --reverify-run: the section from the recorded run --------------------


def _report(url: str, out: Path, *args: str) -> tuple[int, str]:
    r = CliRunner().invoke(cli, ["--db", url, "report", "--html", str(out), *args])
    return r.exit_code, r.stderr


def test_the_report_renders_the_recorded_run_and_flags_unproven_outcomes(
        db_url: str, tmp_path: Path) -> None:
    seq, report = _recorded(db_url, tmp_path)
    out = tmp_path / "r.html"
    for which in (str(seq), "latest"):
        code, err = _report(db_url, out, "--reverify-run", which)
        assert code == 0, err
        page = out.read_text()
        assert 'id="reexecution-recorded"' in page and f"entry {seq} (reverify_run" in page
        assert "reexecution-unproven" not in page
        assert "2 entries re-verified: 0 agree, 0 disagree, 2 not re-executable" in page
    # an outcome kept beside the ledger changed with raw SQL: shown, and flagged unproven
    with T.connect(db_url) as conn:
        conn.execute(T.text("UPDATE reverify_outcomes SET outcome = :o WHERE run_id = :r "
                            "AND seq = 0"),
                     {"o": json.dumps({**report["outcomes"][0], "reason": "redacted"}),
                      "r": report["run_id"]})
    code, err = _report(db_url, out, "--reverify-run", str(seq))
    assert code == 0, err
    page = out.read_text()
    assert 'id="reexecution-unproven"' in page and "NOT PROVEN" in page
    assert 'id="reexecution-recorded"' not in page


def test_the_report_refuses_what_is_no_checked_reverify_run(db_url: str,
                                                            tmp_path: Path) -> None:
    seq, _ = _recorded(db_url, tmp_path)
    out = tmp_path / "r.html"
    for args, rule in ((["--reverify-run", "0"], "not a reverify_run entry"),
                       (["--reverify-run", "x"], "neither a seq"),
                       (["--reverify-run", "99"], "no entry with seq 99"),
                       (["--reverify-run", "2", "--reverify-report", __file__], "not both")):
        code, err = _report(db_url, out, *args)
        assert code == 2 and "reverify" in err and rule in err, (args, err)
        assert not out.exists()
    with T.unlocked(db_url) as conn:
        digest = T.row(conn, seq).doc_digest
        T.set_payload(conn, digest, T.payload(conn, digest).replace(b'"resumed":false',
                                                                    b'"resumed":true'))
    code, err = _report(db_url, out, "--reverify-run", str(seq))
    assert code == 1 and "reverify_run_unverified" in err and "payload_digest_mismatch" in err
    assert not out.exists()


def test_each_layer_sees_its_share_of_a_recorded_run(db_url: str, tmp_path: Path) -> None:
    """The projection GET /v1/reverify-runs serves (the route itself: tests/system/
    test_console_reverify.py): agents never get an engine, a field or a value."""
    from ledger.ops.reverify_history import project

    seq, report = _recorded(db_url, tmp_path)
    with Ledger.open(db_url) as led:
        (run,) = led.reverify_runs()["runs"]
    run["outcomes"] = [{**run["outcomes"][0], "outcome": "disagrees", "differences": [
        {"field": "developer_fields.is_valid", "stored": True, "fresh": False},
        {"field": "proof_ref", "stored": "sha256:" + "a" * 64, "fresh": "sha256:" + "b" * 64},
        {"field": "evidence.x", "stored": "SECRET-1", "fresh": "SECRET-2"}]}]
    agent = project(run, "agent")
    assert agent["disagreements"] == [{"seq": 0}] and "acme" not in json.dumps(agent)
    assert set(agent) == {"seq", "recorded_at", "integrity", "outcome", "summary", "range",
                          "tenant", "outcomes_proven", "disagreements"}
    assert agent["tenant"] is None  # a run over every tenant (ledger reverify --tenant: T)
    assert set(agent["integrity"]) == {"verified", "codes"}
    dev = project(run, "developer")
    assert dev["disagreements"][0]["differences"] == [
        {"field": "developer_fields.is_valid", "stored": True, "fresh": False},
        {"field": "proof_ref", "withheld": "auditor layer"},
        {"field": "evidence.x", "withheld": "auditor layer"}]
    assert "SECRET" not in json.dumps(dev) and "document" not in dev
    aud = project(run, "auditor")
    assert "SECRET-1" in json.dumps(aud) and aud["document"]["run_id"] == report["run_id"]
    assert aud["entry_hash"].startswith("sha256:") and aud["seq"] == seq


def test_a_resumed_run_is_recorded_whole_and_its_outcomes_are_proven(
        db_url: str, tmp_path: Path) -> None:
    """``--resume --record``: the entry records the whole run (outcomes saved before the
    interruption and those of the resuming invocation); the outcomes read back from the
    database are the ones its digest proves."""
    from tests.cli.test_reverify import _interrupt

    with Ledger.init(db_url) as led:
        assert all(r.ok for r in led.append_many([_sub(f"{i} + 1") for i in range(3)]))
        run_id = led.reverify()["run_id"]
    _interrupt(db_url, run_id, 2)  # seqs 0 and 1 decided and saved, then killed
    r = CliRunner().invoke(cli, ["--db", db_url, "reverify", "--resume", "--record",
                                 "--json-report", "-"], catch_exceptions=False)
    assert r.exit_code == 3, r.stderr
    report = json.loads(r.stdout)
    assert report["resumed"] is True and [o["seq"] for o in report["outcomes"]] == [0, 1, 2]
    with Ledger.open(db_url) as led:
        run = led.reverify_run(report["recorded_seq"])
    assert run["integrity"]["verified"] and run["outcomes_proven"]
    assert run["document"]["resumed"] is True and run["document"]["run_id"] == run_id
    assert run["document"]["outcomes_digest"] == outcomes_digest(report["outcomes"])
    assert run["outcomes"] == report["outcomes"]
