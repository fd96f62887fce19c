"""Audit and re-verification runs of one tenant (docs/tenants.md, "Recorded runs of a
tenant"): ``ledger audit --tenant T --record`` and ``ledger reverify --tenant T --record``
record the run in T's own chain (``ledger-audit-run/3``, ``ledger-reverify-run/2``, each
naming T), only T's readers see it, no whole-ledger reader takes it for an audit of the
ledger, and every verifier accepts the new documents -- and finds them changed.  A
two-tenant ledger (and the default tenant), on SQLite and PostgreSQL."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import tests.tamper as T
from ledger import Ledger
from ledger.cli.main import cli
from ledger.clock import FixedClock
from ledger.core.canonical import canonical_json
from ledger.core.digest import digest_text
from ledger.core.reverify_run import outcomes_digest
from ledger.crypto.keys import Keyring
from ledger.errors import NotFound
from ledger.ops.audit import AuditOptions, run_audit
from ledger.ops.export import ExportOptions
from ledger.ops.monitor import status
from ledger.verify.export import verify_export
from tests.ops.test_reverify_run import _script_codes, _sub  # the same helpers

ORIGIN = "test.ledger/tenant-runs"
T0 = T.FIXTURE_TIME_US
A, B = "acme", "globex"
PLAN = [A, B, "default", A, B, A]


def _ledger(url: str) -> dict[str, list[int]]:
    seqs: dict[str, list[int]] = {A: [], B: [], "default": []}
    with Ledger.init(url, clock=FixedClock(T0, 1000), origin=ORIGIN) as led:
        for i, t in enumerate(PLAN):
            r = led.append(_sub(f"{i} + {i}"), tenant=t)
            assert r.ok
            seqs[t].append(int(r.seq))  # type: ignore[arg-type]
    return seqs


def _cli(url: str, *args: str) -> tuple[int, str]:
    r = CliRunner().invoke(cli, ["--db", url, *args])
    return r.exit_code, r.stderr


def _audit_tenant(url: str, tmp: Path, tenant: str) -> dict[str, Any]:
    out = tmp / f"audit-{tenant}-{len(list(tmp.glob('audit-*')))}.json"
    code, err = _cli(url, "audit", "--tenant", tenant, "--record", "--producer", "cron",
                     "--json-report", str(out))
    assert code == 0, err
    return json.loads(out.read_text())  # type: ignore[no-any-return]


def _reverify(url: str, tmp: Path, *args: str) -> dict[str, Any]:
    out = tmp / f"reverify-{len(list(tmp.glob('reverify-*')))}.json"
    code, err = _cli(url, "reverify", "--record", "--producer", "cron", "--json-report",
                     str(out), *args)
    assert code == 3, err  # nothing re-executable: no re-executor for acme-math
    return json.loads(out.read_text())  # type: ignore[no-any-return]


def _stored_hash(url: str, seq: int) -> str:
    with T.connect(url) as conn:
        return "sha256:" + bytes(T.row(conn, seq).entry_hash).hex()


def test_a_recorded_tenant_audit_is_an_entry_of_the_tenants_chain(db_url: str,
                                                                   tmp_path: Path) -> None:
    seqs = _ledger(db_url)
    report = _audit_tenant(db_url, tmp_path, A)
    seq = report["recorded_seq"]
    assert report["tenant"] == A and report["outcome"] == "passed"
    assert report["summary"]["rows"] == len(seqs[A]) and report["run_id"] is not None
    with Ledger.open(db_url) as led:
        got = led.get(seq)
        assert got["kind"] == "audit_run" and got["tenant"] == A and got["producer"] == "cron"
        assert got["integrity"]["verified"]
        doc = got["document"]
        body = dict(report)
        del body["recorded_seq"]
        assert doc == {
            "format": "ledger-audit-run/3", "tenant": A, "range": {"start": 0, "end": 6},
            "summary": report["summary"], "findings": 0, "abstentions": 0, "redacted": 0,
            "outcome": "passed", "head_hash": _stored_hash(db_url, seqs[A][-1]),
            "report_digest": digest_text(json.dumps(body, sort_keys=True,
                                                    separators=(",", ":")).encode()),
            "finished_at": report["finished_at"]}
        # the whole ledger, and each tenant (acme with its own audit_run), audit clean
        assert run_audit(led, AuditOptions()).outcome == "passed"
        for t in (A, B, "default"):
            assert led.audit_tenant(t).outcome == "passed", t
        # not an audit of the ledger: no --since-last baseline, not the monitor's last audit
        assert status(led.ctx).last_audit.seq is None
    code, err = _cli(db_url, "audit", "--since-last")
    assert code == 0 and "audit complete: 7 rows" in err, err  # from seq 0


def test_tenant_audit_runs_are_listed_to_their_tenant_only(db_url: str,
                                                           tmp_path: Path) -> None:
    _ledger(db_url)
    whole = tmp_path / "whole.json"
    code, err = _cli(db_url, "audit", "--record", "--json-report", str(whole))
    assert code == 0, err
    whole_id = json.loads(whole.read_text())["run_id"]
    mine = _audit_tenant(db_url, tmp_path, A)["run_id"]
    with Ledger.open(db_url) as led:
        ids = [r["run_id"] for r in led.audit_runs()["runs"]]
        assert ids == [mine, whole_id]  # the operator sees every run
        (run,) = led.audit_runs(tenant=A)["runs"]
        assert run["run_id"] == mine and run["tenant"] == A and run["state"] == "complete"
        assert run["label"]["scope"].startswith("tenant acme: its chain")
        assert led.audit_runs(tenant=B) == {"runs": [], "next_before": None}
        assert led.audit_runs(tenant="default") == {"runs": [], "next_before": None}
        assert led.audit_run(mine, tenant=A)["tenant"] == A
        for tenant, run_id in ((B, mine), (A, whole_id), ("default", whole_id)):
            with pytest.raises(NotFound):
                led.audit_run(run_id, tenant=tenant)
        # the whole ledger's run still annotates reads and is the monitor's last audit
        assert status(led.ctx).last_audit.run_id == whole_id


def test_a_tenant_audits_findings_name_only_its_entries(db_url: str, tmp_path: Path) -> None:
    seqs = _ledger(db_url)
    with T.unlocked(db_url) as conn:  # globex's first result changed behind the ledger
        digest = T.row(conn, seqs[B][0]).doc_digest
        T.set_payload(conn, digest, T.payload(conn, digest).replace(b"BLOCKED", b"BLOCKEX"))
    clean = _audit_tenant(db_url, tmp_path, A)
    assert clean["findings"] == []
    out = tmp_path / "b.json"
    code, _ = _cli(db_url, "audit", "--tenant", B, "--record", "--json-report", str(out))
    assert code == 1
    with Ledger.open(db_url) as led:
        (run,) = led.audit_runs(tenant=B)["runs"]
        found = led.audit_run(run["run_id"], tenant=B)["finding_list"]
        assert {f["seq"] for f in found} == {seqs[B][0]}
        assert led.audit_run(clean["run_id"], tenant=A)["finding_list"] == []


def test_a_changed_tenant_audit_run_is_found(db_url: str, tmp_path: Path) -> None:
    _ledger(db_url)
    seq = _audit_tenant(db_url, tmp_path, A)["recorded_seq"]
    with T.unlocked(db_url) as conn:
        stored = T.stored_payload(conn, seq, "result")  # slot 0: the report document
        assert stored is not None
        doc = json.loads(stored[1])
        doc["tenant"] = B
        T.set_payload(conn, T.row(conn, seq).doc_digest, canonical_json(doc))
    with Ledger.open(db_url) as led:
        got = led.get(seq)
        whole = run_audit(led, AuditOptions())
        mine = led.audit_tenant(A)
    assert not got["integrity"]["verified"] and got["document"] is None
    assert "payload_digest_mismatch" in got["integrity"]["codes"]
    for report in (whole, mine):
        assert report.outcome == "failed"
        assert [(f.seq, f.code) for f in report.findings] == [(seq, "payload_digest_mismatch")]


def test_a_tenant_reverify_run_covers_and_is_recorded_for_the_tenant(db_url: str,
                                                                    tmp_path: Path) -> None:
    seqs = _ledger(db_url)
    report = _reverify(db_url, tmp_path, "--tenant", A)
    assert report["tenant"] == A
    assert [o["seq"] for o in report["outcomes"]] == seqs[A]
    whole = _reverify(db_url, tmp_path)
    assert "tenant" not in whole and len(whole["outcomes"]) == 6
    with Ledger.open(db_url) as led:
        got = led.get(report["recorded_seq"])
        assert got["tenant"] == A and got["integrity"]["verified"]
        doc = got["document"]
        assert doc["format"] == "ledger-reverify-run/2" and doc["tenant"] == A
        assert doc["head_hash"] == _stored_hash(db_url, seqs[A][-1])
        assert doc["outcomes_digest"] == outcomes_digest(report["outcomes"])
        plain = led.get(whole["recorded_seq"])
        assert plain["tenant"] == "default"
        assert plain["document"]["format"] == "ledger-reverify-run/1"
        assert "tenant" not in plain["document"]
        listed = [r["seq"] for r in led.reverify_runs()["runs"]]
        assert listed == [whole["recorded_seq"], report["recorded_seq"]]
        (run,) = led.reverify_runs(tenant=A)["runs"]
        assert run["seq"] == report["recorded_seq"] and run["outcomes_proven"]
        # the whole ledger's run is in the default chain, but is not the default tenant's
        assert led.reverify_runs(tenant="default")["runs"] == []
        assert led.reverify_runs(tenant=B)["runs"] == []
        assert run_audit(led, AuditOptions()).outcome == "passed"
    # a later tenant audit covers the run in its chain
    assert _audit_tenant(db_url, tmp_path, A)["summary"]["rows"] == len(seqs[A]) + 1


def test_a_changed_tenant_reverify_run_is_found(db_url: str, tmp_path: Path) -> None:
    _ledger(db_url)
    seq = _reverify(db_url, tmp_path, "--tenant", A)["recorded_seq"]
    with T.unlocked(db_url) as conn:
        stored = T.stored_payload(conn, seq, "result")
        assert stored is not None
        doc = json.loads(stored[1])
        doc["tenant"] = B
        T.set_payload(conn, T.row(conn, seq).doc_digest, canonical_json(doc))
    with Ledger.open(db_url) as led:
        assert led.audit_tenant(A).findings[0].code == "payload_digest_mismatch"
        (run,) = led.reverify_runs(tenant=A)["runs"]  # listed to acme, without a document
        assert run["document"] is None and not run["integrity"]["verified"]
        assert led.reverify_runs(tenant=B)["runs"] == []


def test_exports_with_tenant_runs_verify(db_url: str, tmp_path: Path) -> None:
    _ledger(db_url)
    _audit_tenant(db_url, tmp_path, A)
    _reverify(db_url, tmp_path, "--tenant", A)
    ring = Keyring.load(tmp_path / "keys")
    ring.generate(ORIGIN, T0)
    jwks = ring.path / "jwks.json"
    with Ledger.open(db_url) as led:
        led.export(tmp_path / "acme", ExportOptions(keys=ring.path, tenant=A))
        led.export(tmp_path / "all", ExportOptions(keys=ring.path))
    kinds = {json.loads(x)["kind"] for x in (tmp_path / "acme" / "entries.jsonl")
             .read_text().splitlines()}
    assert kinds == {"result", "audit_run", "reverify_run"}
    for name in ("acme", "all"):
        ours = verify_export(tmp_path / name, jwks)
        assert ours["outcome"] == "passed" and ours["complete"] is True, ours["findings"]
        assert _script_codes(tmp_path / name, jwks) == (0, set())


def test_a_tenant_run_resumes_only_as_the_same_tenant(db_url: str, tmp_path: Path) -> None:
    from tests.cli.test_reverify import _interrupt

    seqs = _ledger(db_url)
    first = _reverify(db_url, tmp_path, "--tenant", A)
    _interrupt(db_url, first["run_id"], seqs[A][1])
    for args in ([], ["--tenant", B]):
        code, err = _cli(db_url, "reverify", "--resume", *args)
        assert code == 2 and "--tenant differs" in err, (args, err)
    resumed = _reverify(db_url, tmp_path, "--resume", "--tenant", A)
    assert resumed["run_id"] == first["run_id"] and resumed["resumed"] is True
    assert resumed["tenant"] == A and [o["seq"] for o in resumed["outcomes"]] == seqs[A]
    with Ledger.open(db_url) as led:
        assert [r["seq"] for r in led.reverify_runs(tenant=A)["runs"]] == [
            resumed["recorded_seq"], first["recorded_seq"]]


def test_a_run_is_never_recorded_for_a_tenant_without_entries(db_url: str,
                                                              tmp_path: Path) -> None:
    """A mistyped tenant: ``--record`` refuses before anything is written (exit 2, field
    tenant), so no chain starts with a run and the tenant stays provably absent."""
    _ledger(db_url)
    with Ledger.open(db_url) as led:
        size = led.head()["size"]
    for args in (("audit", "--tenant", "acmee", "--record"),
                 ("reverify", "--tenant", "acmee", "--record")):
        r = CliRunner().invoke(cli, ["--db", db_url, *args])
        assert r.exit_code == 2, r.output
        assert "acmee" in r.stderr and "no entry" in r.stderr
        assert "Traceback" not in r.output
    with Ledger.open(db_url) as led:
        assert led.head()["size"] == size
        assert led.audit_runs(tenant="acmee") == {"runs": [], "next_before": None}
        with led.engine.connect() as conn:
            from sqlalchemy import text
            assert conn.execute(text("SELECT count(*) FROM tenant_heads WHERE tenant = "
                                     "'acmee'")).scalar_one() == 0


def test_the_monitor_finds_the_ledgers_audit_behind_many_tenant_audits(db_url: str) -> None:
    """More recorded tenant audits than the monitor looks past one by one (a nightly audit
    of each of many tenants): its last audit is still the whole ledger's."""
    from ledger.ops.monitor import TENANT_RUNS_SKIPPED

    _ledger(db_url)
    with Ledger.open(db_url) as led:
        whole = run_audit(led.ctx, AuditOptions(record=True, producer="cron"))
        for _ in range(TENANT_RUNS_SKIPPED + 5):
            led.audit_tenant(A, record=True, producer="cron")
        last = status(led.ctx).last_audit
        assert last.seq == whole.recorded_seq and last.outcome == "passed"
