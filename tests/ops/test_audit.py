"""The audit job: honest dispositions (design §6), engine policy as data, and the job
features (workers, recorded runs, since-last, resume) — on SQLite and PostgreSQL.

Every check on every row ends verified, failed or abstained; a check that could not
be confirmed is never reported as passed, and a check that can be confirmed is never
abstained (the over-abstention guard: a row without an attestation is never
abstained).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text

import ledger.ops.audit.walk as audit_mod
from ledger import Ledger
from ledger.clock import FixedClock
from ledger.core.entry import hash_hex
from ledger.demo.samples import realistic
from ledger.errors import UsageError
from ledger.ops.audit import EXIT_CODES, AuditOptions, AuditReport, run_audit
from tests import tamper as T

ROOT = Path(__file__).resolve().parents[2]


def audit(L: Ledger, **kw: Any) -> AuditReport:
    return run_audit(L, AuditOptions(**kw))


def mix(url: str, *, trust: bool, n: int = 60) -> tuple[Ledger, list[int]]:
    """``realistic(n)`` and the upstream fixtures; returns the ledger and the seqs of the
    rows that carry an attestation."""
    L = Ledger.init(url, clock=FixedClock(T.FIXTURE_TIME_US, step_us=1000))
    if trust:
        L.trust_issuer(T.ISSUER, T.JWKS)
    subs = realistic(n) + T.fixtures()
    res = L.append_many(subs)
    assert all(r.ok for r in res), [r.error for r in res if not r.ok]
    attested = [r.seq for r, s in zip(res, subs, strict=True) if T.token_of(s)]
    assert len(attested) >= 14
    return L, attested


def abstained(report: AuditReport) -> dict[int, set[str]]:
    out: dict[int, set[str]] = {}
    for a in report.abstentions:
        out.setdefault(a.seq, set()).add(a.reason)
    return out


def finding_set(report: AuditReport) -> set[tuple[str, int]]:
    return {(f.code, f.seq) for f in report.findings}


# =============================================================================
# Dispositions
# =============================================================================

def test_clean_mixed_ledger_with_the_issuer_trusted_passes(db_url):
    L, attested = mix(db_url, trust=True)
    with L:
        size = L.head()["size"]
        report = audit(L)
        image_verified = [s for s in range(size) if L.get(s)["engine"] == "image"
                          and L.get(s)["status"] == "VERIFIED"]
        verdicts = {L.get(s)["attestation_verdict"] for s in attested}
    assert report.outcome == "passed" and EXIT_CODES[report.outcome] == 0
    assert report.summary.to_json() == {"rows": size, "verified": size, "failed": 0, "unverified": 0}
    assert report.findings == () and report.abstentions == ()
    assert report.attestations_checked is True
    assert verdicts == {"valid"}
    # upstream's image engine does emit VERIFIED: the default policy does not flag it
    assert image_verified


def test_untrusted_issuer_attestations_are_abstained_never_verified(db_url):
    L, attested = mix(db_url, trust=False)
    with L:
        report = audit(L)
        size = L.head()["size"]
    assert report.outcome == "unverified" and EXIT_CODES[report.outcome] == 3
    assert report.findings == ()
    assert abstained(report) == {s: {"unknown_issuer_key"} for s in attested}
    assert report.summary.to_json() == {"rows": size, "verified": size - len(attested), "failed": 0,
                                 "unverified": len(attested)}
    assert all(a.check == "attestation" for a in report.abstentions)


def test_trusting_the_key_later_lets_a_later_audit_verify_them(db_url):
    L, attested = mix(db_url, trust=False)
    with L:
        before = audit(L)
        assert before.outcome == "unverified" and set(abstained(before)) == set(attested)
        L.trust_issuer(T.ISSUER, T.JWKS, reason="published JWKS")
        report = audit(L)
        size = L.head()["size"]
    assert report.outcome == "passed"
    assert report.summary.to_json() == {"rows": size, "verified": size, "failed": 0, "unverified": 0}


def test_a_later_key_that_does_not_verify_leaves_them_abstained_never_failed(db_url):
    L, attested = mix(db_url, trust=False)
    with L:
        before = audit(L)
        # another key under the very kid the tokens name, and one under a kid of its own
        L.trust_issuer(T.ISSUER, T.jwks_of(T.new_key(), T.KID))
        L.trust_issuer(T.ISSUER, T.jwks_of(T.new_key()))
        after = audit(L)
    assert after.outcome == "unverified" and after.findings == ()
    assert abstained(after) == abstained(before) == {s: {"unknown_issuer_key"}
                                                     for s in attested}
    assert after.summary.unverified == len(attested)
    assert after.summary.verified == before.summary.verified + 2  # key events


def test_no_attestations_abstains_on_attested_rows_and_never_passes_them(db_url):
    L, attested = mix(db_url, trust=True)
    with L:
        report = audit(L, check_attestations=False)
        size = L.head()["size"]
    assert report.outcome == "unverified" and EXIT_CODES[report.outcome] == 3
    assert report.attestations_checked is False
    assert abstained(report) == {s: {"no_trust_store"} for s in attested}
    assert report.summary.verified == size - len(attested)


@pytest.mark.parametrize("check", [True, False], ids=["attestations", "no-attestations"])
def test_rows_without_an_attestation_are_never_abstained(db_url, check):
    with Ledger.init(db_url, clock=FixedClock(T.FIXTURE_TIME_US)) as L:
        subs = [s for s in T.fixtures() if not T.token_of(s)] + realistic(30)
        assert all(r.ok for r in L.append_many(subs))
        report = audit(L, check_attestations=check)
    assert report.outcome == "passed"
    assert report.abstentions == () and report.summary.unverified == 0
    assert report.summary.verified == len(subs)


# =============================================================================
# Engine policy
# =============================================================================

def fact_verified(i: int) -> dict[str, Any]:
    return T.verified_sub(i, engine="fact", query=None)


def test_verified_fact_row_is_a_policy_violation_under_the_default_policy(db_url, tmp_path):
    with Ledger.init(db_url) as L:
        L.append_many(realistic(6))
        res = L.append(fact_verified(1))  # the validator accepts it: policy is the audit's
        assert res.ok
        L.append_many(realistic(3, start=6))
        report = audit(L)
        no_rules = tmp_path / "none.json"
        no_rules.write_text(json.dumps({"format": "ledger-policy/1", "rules": []}))
        custom = audit(L, policy_path=str(no_rules))
    assert report.outcome == "failed"
    assert [(f.code, f.seq, f.cls) for f in report.findings] == [
        ("policy:fact-never-verified", res.seq, "policy_violation")]
    assert report.findings[0].actual == {"engine": "fact", "status": "VERIFIED"}
    assert custom.outcome == "passed" and custom.policy == str(no_rules)


def test_custom_policy_rules_match_engine_status_and_constraint_prefix(db_url, tmp_path):
    policy = tmp_path / "policy.json"
    policy.write_text(json.dumps({"format": "ledger-policy/1", "rules": [
        {"id": "no-blocked-sql", "engine": ["sql"], "status": "BLOCKED"},
        {"id": "no-schema-missing", "constraint_prefix": "schema_verifier.required"}]}))
    with Ledger.init(db_url) as L:
        L.append_many(realistic(12))
        report = audit(L, policy_path=str(policy))
        default = audit(L)
    # realistic: seq % 6 == 4 is a BLOCKED sql row, == 5 a schema required_missing row
    assert sorted((f.code, f.seq) for f in report.findings) == [
        ("policy:no-blocked-sql", 4), ("policy:no-blocked-sql", 10),
        ("policy:no-schema-missing", 5), ("policy:no-schema-missing", 11)]
    assert {f.cls for f in report.findings} == {"policy_violation"}
    assert default.outcome == "passed"


@pytest.mark.parametrize("content", [
    "{not json",
    json.dumps({"format": "ledger-policy/2", "rules": []}),
    json.dumps({"format": "ledger-policy/1", "rules": {}}),
    json.dumps({"format": "ledger-policy/1", "rules": [{"id": "x", "engines": "fact"}]}),
    json.dumps({"format": "ledger-policy/1", "rules": [{"id": "", "engine": "fact"}]}),
    json.dumps({"format": "ledger-policy/1", "rules": [{"id": "x", "engine": []}]}),
    None,  # no such file
], ids=["not-json", "format", "rules-object", "unknown-key", "empty-id", "empty-engine-list",
        "missing-file"])
def test_invalid_policy_file_is_a_usage_error(sqlite_url, tmp_path, content):
    path = tmp_path / "policy.json"
    if content is not None:
        path.write_text(content)
    with Ledger.init(sqlite_url) as L, pytest.raises(UsageError) as info:
        audit(L, policy_path=str(path))
    assert info.value.field == "policy" and info.value.exit_code == 2


# =============================================================================
# Jobs: workers
# =============================================================================

def tampered(url: str) -> Ledger:
    """120 realistic rows and 6 untrusted attested fixtures, then four kinds of tamper,
    none at a worker boundary."""
    L = Ledger.init(url, clock=FixedClock(T.FIXTURE_TIME_US, step_us=1000))
    for i in range(0, 120, 20):
        L.append_many(realistic(20, start=i))
    L.append_many([s for s in T.fixtures() if T.token_of(s)][:6])
    with T.unlocked(url) as conn:
        d = T.row(conn, 12).preimage_digest
        T.set_payload(conn, d, T.payload(conn, d) + b" ")
        T.update_entry(conn, 43, status="BLOCKED")
        conn.execute(text("DELETE FROM entries WHERE seq = 75"))
        old = T.row(conn, 100)
        cols, blobs = T.forged_result(T.ledger_id(conn), realistic(1, start=9000)[0])
        T.add_payloads(conn, blobs)
        T.write_linked(conn, 100, old.recorded_at, bytes(old.prev_hash), cols, replace=True)
    return L


def test_two_workers_report_what_one_worker_reports(db_url):
    with tampered(db_url) as L:
        one = audit(L)
        two = audit(L, workers=2)
        three = audit(L, workers=3)
    assert finding_set(one) == {("payload_digest_mismatch", 12), ("column_mismatch", 43),
                                ("seq_gap", 75), ("hash_not_committed", 100)}
    assert one.summary.unverified == 6
    for other in (two, three):
        assert other.summary == one.summary
        assert finding_set(other) == finding_set(one)
        assert abstained(other) == abstained(one)
        assert other.outcome == "failed"


def test_two_workers_agree_when_the_deleted_row_ends_a_worker_range(db_url):
    with Ledger.init(db_url) as L:
        L.append_many(realistic(60))
        with T.unlocked(db_url) as conn:
            conn.execute(text("DELETE FROM entries WHERE seq = 29"))  # bounds: [0,30) [30,60)
        one = audit(L)
        two = audit(L, workers=2)
    assert finding_set(one) == {("seq_gap", 29)}
    assert finding_set(two) == finding_set(one)
    assert two.summary == one.summary


# =============================================================================
# Jobs: recorded runs and since-last
# =============================================================================

def test_record_appends_an_audit_run_and_since_last_audits_only_new_rows(db_url):
    with Ledger.init(db_url, clock=FixedClock(T.FIXTURE_TIME_US, step_us=1000)) as L:
        L.append_many(realistic(20))
        first = audit(L, since_last=True)  # nothing recorded yet: everything
        assert first.summary.rows == 20 and first.range.to_json() == {"start": 0, "end": 20}
        recorded = audit(L, record=True)
        assert recorded.recorded_seq == 20
        run = L.get(20)
        assert run["kind"] == "audit_run" and run["status"] == "passed"
        doc = run["document"]
        assert doc["range"] == {"start": 0, "end": 20}
        assert doc["summary"] == recorded.summary.to_json()
        assert doc["head_hash"] == L.get(19)["entry_hash"]
        L.append_many(realistic(5, start=20))
        since = audit(L, since_last=True)
        full = audit(L)
    # the audit_run entry itself and the 5 new rows
    assert since.range.to_json() == {"start": 20, "end": 26}
    assert since.summary.to_json() == {"rows": 6, "verified": 6, "failed": 0, "unverified": 0}
    assert since.outcome == "passed"
    assert full.summary.rows == 26 and full.outcome == "passed"


def test_since_last_reports_the_last_audited_entry_rewritten(db_url):
    """Entry 19 (the last one a recorded audit verified) is replaced by another result and
    the chain from there recomputed, head included: a wholesale rewrite that a full audit
    cannot see (only checkpoints can), but since-last compares the hash it recorded."""
    with Ledger.init(db_url, clock=FixedClock(T.FIXTURE_TIME_US, step_us=1000)) as L:
        L.append_many(realistic(20))
        audit(L, record=True)
        L.append_many(realistic(5, start=20))
        with T.unlocked(db_url) as conn:
            old = T.row(conn, 19)
            cols, blobs = T.forged_result(T.ledger_id(conn), realistic(1, start=7000)[0])
            T.add_payloads(conn, blobs)
            T.write_linked(conn, 19, old.recorded_at, bytes(old.prev_hash), cols, replace=True)
            T.rechain(conn, 20)
        full = audit(L)
        since = audit(L, since_last=True)
        want = hash_hex(bytes(old.entry_hash))
    assert full.outcome == "passed"  # self-consistent: the chain alone cannot tell
    assert since.outcome == "failed"
    assert [(f.code, f.seq, f.cls) for f in since.findings] == [
        ("rewritten_since_audit", 19, "forked")]
    assert since.findings[0].expected == want
    assert since.summary.to_json() == {"rows": 6, "verified": 6, "failed": 0, "unverified": 0}


# =============================================================================
# Jobs: resume
# =============================================================================

class Interrupted(Exception):
    pass


def audit_runs(url: str) -> list[Any]:
    with T.connect(url) as conn:
        return conn.execute(text("SELECT id, state, next_seq, range_start, range_end "
                                 "FROM audit_runs ORDER BY id")).all()


def test_resume_after_an_interrupted_run_matches_a_fresh_run(db_url, monkeypatch):
    monkeypatch.setattr(audit_mod, "PAGE", 25)
    monkeypatch.setattr(audit_mod, "PROGRESS_EVERY", 100)
    with Ledger.init(db_url, clock=FixedClock(T.FIXTURE_TIME_US, step_us=1000)) as L:
        L.append_many(realistic(150))
        L.append_many([s for s in T.fixtures() if T.token_of(s)][:4])  # abstentions
        L.append_many(realistic(146, start=150))
        with T.unlocked(db_url) as conn:
            T.update_entry(conn, 48, status="UNVERIFIABLE")  # before the interruption
            conn.execute(text("DELETE FROM entries WHERE seq = 250"))  # after it
        seen = 0

        def progress(n: int) -> None:
            nonlocal seen
            seen += n
            if seen >= 175:
                raise Interrupted

        with pytest.raises(Interrupted):
            run_audit(L, AuditOptions(), progress=progress)
        (run,) = audit_runs(db_url)
        assert run.state == "running" and run.next_seq == 100  # saved after 100 rows
        resumed = audit(L, resume=True)
        fresh = audit(L)
        with pytest.raises(UsageError) as info:
            audit(L, resume=True)  # nothing left to resume
    assert info.value.code == "nothing_to_resume"
    assert resumed.run_id == run.id
    assert [r.state for r in audit_runs(db_url)] == ["complete", "complete"]
    # the deleted row is a ledger-level seq_gap finding; the row after it is intact
    assert resumed.summary.to_json() == fresh.summary.to_json() == {
        "rows": 299, "verified": 294, "failed": 1, "unverified": 4}
    assert sorted(resumed.findings, key=lambda f: (f.seq, f.code)) == sorted(
        fresh.findings, key=lambda f: (f.seq, f.code))
    assert finding_set(fresh) == {("column_mismatch", 48), ("seq_gap", 250)}
    assert abstained(resumed) == abstained(fresh) and len(abstained(fresh)) == 4


def test_resume_keeps_the_interrupted_runs_range(sqlite_url, monkeypatch):
    with Ledger.init(sqlite_url) as L:
        L.append_many(realistic(40))
        monkeypatch.setattr(audit_mod, "PAGE", 5)
        monkeypatch.setattr(audit_mod, "PROGRESS_EVERY", 5)

        class Stop(Exception):
            pass

        def progress(n: int) -> None:
            raise Stop

        try:
            run_audit(L, AuditOptions(end=20), progress=progress)
        except Stop:
            pass
        resumed = run_audit(L, AuditOptions(resume=True))
    assert resumed.range.end == 20
    assert resumed.summary.rows == 20


def _blocked(i: int) -> bytes:
    return json.dumps({"result": {"status": "BLOCKED", "agent_message": f"b{i}"},
                       "engine": "math"}).encode()


def test_more_workers_than_rows_runs_in_one_process(db_url):
    with Ledger.init(db_url) as L:
        L.append_many([_blocked(i) for i in range(2)])
        report = run_audit(L, AuditOptions(workers=4))
    assert report.summary.to_json() == {"rows": 2, "verified": 2, "failed": 0, "unverified": 0}


def test_two_interruptions_then_resume_count_every_row(sqlite_url, monkeypatch):
    monkeypatch.setattr(audit_mod, "PAGE", 5)
    monkeypatch.setattr(audit_mod, "PROGRESS_EVERY", 5)

    class Stop(Exception):
        pass

    def stop_after(limit: int):
        seen = [0]

        def progress(n: int) -> None:
            seen[0] += n
            if seen[0] >= limit:
                raise Stop
        return progress

    with Ledger.init(sqlite_url) as L:
        L.append_many([_blocked(i) for i in range(30)])
        for limit, resume in ((15, False), (10, True)):
            try:
                run_audit(L, AuditOptions(resume=resume), progress=stop_after(limit))
            except Stop:
                pass
        report = run_audit(L, AuditOptions(resume=True))
    assert report.summary.to_json() == {"rows": 30, "verified": 30, "failed": 0, "unverified": 0}


def test_since_last_needs_a_baseline_from_seq_zero(sqlite_url):
    with Ledger.init(sqlite_url) as L:
        L.append_many([_blocked(i) for i in range(10)])
        partial = run_audit(L, AuditOptions(start=5, record=True))
        assert partial.outcome == "passed"
        after_partial = run_audit(L, AuditOptions(since_last=True))
        assert after_partial.range.start == 0  # rows 0..4 were never verified
        run_audit(L, AuditOptions(record=True))
        after_full = run_audit(L, AuditOptions(since_last=True))
    assert after_full.range.start == 11 and after_full.summary.rows == 1


def test_a_range_whose_predecessor_is_missing_reports_the_gap_not_a_broken_link(db_url):
    """``--from 10`` with row 9 deleted: row 10 has nothing to link to, so it is not a
    ``prev_hash`` finding; the gap is the range before's to report."""
    with Ledger.init(db_url) as L:
        L.append_many([_blocked(i) for i in range(20)])
        with T.unlocked(db_url) as conn:
            conn.execute(text("DELETE FROM entries WHERE seq = 9"))
        tail = audit(L, start=10)
        whole = audit(L)
    assert tail.summary.to_json() == {"rows": 10, "verified": 10, "failed": 0, "unverified": 0}
    assert tail.findings == () and tail.outcome == "passed"
    assert ("seq_gap", 9) in finding_set(whole)


def test_an_empty_ledger_passes_and_records_a_run_without_a_head_hash(db_url):
    with Ledger.init(db_url) as L:
        report = audit(L, record=True)
        assert report.summary.to_json() == {"rows": 0, "verified": 0, "failed": 0, "unverified": 0}
        assert report.outcome == "passed" and report.findings == ()
        doc = json.loads(L.get(report.recorded_seq)["payloads"]["report"]["text"])
    assert doc["range"] == {"start": 0, "end": 0} and doc["head_hash"] is None


def test_parallel_workers_report_progress_for_every_row_and_record_the_run(db_url):
    seen: list[int] = []
    with Ledger.init(db_url) as L:
        L.append_many([_blocked(i) for i in range(12)])
        report = run_audit(L, AuditOptions(workers=3), progress=seen.append)
        run = L.audit_run(report.run_id)
    assert report.summary.rows == 12 and sum(seen) == 12 and len(seen) == 3
    assert run["state"] == "complete" and run["summary"] == report.summary.to_json()
    assert run["range"] == {"start": 0, "end": 12} and run["next_seq"] == 12


@pytest.mark.parametrize("doc", [b"not json", b'{"range": {"start": 0}}',
                                 b'{"range": {"start": 0, "end": "x"}}'])
def test_an_unreadable_recorded_run_is_no_baseline(db_url, doc):
    with Ledger.init(db_url, clock=FixedClock(T.FIXTURE_TIME_US, step_us=1000)) as L:
        L.append_many([_blocked(i) for i in range(5)])
        seq = audit(L, record=True).recorded_seq
        with T.unlocked(db_url) as conn:
            T.set_payload(conn, T.row(conn, seq).doc_digest, doc)
        report = audit(L, since_last=True)
    assert report.range.start == 0  # everything again, the modified run included
    assert ("payload_digest_mismatch", seq) in finding_set(report)


def test_a_recorded_run_whose_document_was_modified_is_no_baseline(db_url):
    # Only a run document that matches its committed digest can set the since-last
    # baseline: whoever can rewrite the stored document cannot move the baseline with it.
    with Ledger.init(db_url, clock=FixedClock(T.FIXTURE_TIME_US, step_us=1000)) as L:
        L.append_many([_blocked(i) for i in range(5)])
        seq = audit(L, record=True).recorded_seq
        with T.unlocked(db_url) as conn:
            digest = json.loads(bytes(T.row(conn, seq).envelope))["payloads"]["report"]
            doc = json.loads(T.payload(conn, digest))
            T.set_payload(conn, digest, json.dumps({**doc, "head_hash": "sha256:zz"}).encode())
        report = audit(L, since_last=True)
    assert report.range.start == 0  # everything again, the modified run included
    assert "rewritten_since_audit" not in {f.code for f in report.findings}
    assert ("payload_digest_mismatch", seq) in finding_set(report)


def test_a_gap_wider_than_a_page_is_one_finding_and_the_rows_after_it_are_audited(
        db_url, monkeypatch):
    # the reader reads windows of seqs; a deleted run longer than a window must neither end
    # the walk nor hide the rows after it
    monkeypatch.setattr(audit_mod, "PAGE", 4)
    with Ledger.init(db_url) as L:
        L.append_many(realistic(30))
        with T.unlocked(db_url) as conn:
            conn.execute(text("DELETE FROM entries WHERE seq >= 5 AND seq < 17"))
            conn.execute(text("DELETE FROM entries WHERE seq >= 26"))
            T.update_entry(conn, 20, status="BLOCKED")
        rep = audit(L)
        two = audit(L, workers=2)
    assert finding_set(rep) == {("seq_gap", 5), ("column_mismatch", 20), ("seq_gap", 26),
                                ("head_beyond_entries", 26)}
    assert rep.summary.rows == 5 + 9
    assert finding_set(two) == finding_set(rep) and two.summary == rep.summary
    gaps = [f for f in rep.findings if f.code == "seq_gap"]
    assert [f for f in two.findings if f.code == "seq_gap"] == gaps
    assert gaps[0].message == "entries 5..16 are missing" and gaps[0].actual == 17


def test_a_gap_across_three_worker_ranges_is_one_finding(db_url):
    with Ledger.init(db_url) as L:
        L.append_many(realistic(30))
        with T.unlocked(db_url) as conn:  # ranges [0,10) [10,20) [20,30): the middle one gone
            conn.execute(text("DELETE FROM entries WHERE seq >= 5 AND seq < 23"))
        one, three = audit(L), audit(L, workers=3)
    assert three.findings == one.findings
    assert [(f.code, f.seq, f.actual) for f in one.findings] == [("seq_gap", 5, 23)]
    assert three.summary.to_json() == one.summary.to_json() == {
        "rows": 12, "verified": 12, "failed": 0, "unverified": 0}


@pytest.mark.parametrize("workers", [1, 3])
def test_a_run_row_takes_its_times_from_the_ledger_clock(db_url, workers):
    """The run's row (started and last saved, sequential or in parts) is timed by the
    injected clock, never the wall clock."""
    t0 = 1_000_000_000_000_000  # 2001-09-09: far from any wall clock this runs under
    with Ledger.init(db_url, clock=FixedClock(t0, step_us=1)) as L:
        L.append_many(realistic(12))
        assert audit(L, workers=workers).outcome == "passed"
        with L.ctx.engine.connect() as conn:
            rows = conn.execute(text("SELECT started_at, updated_at FROM audit_runs")).all()
    assert rows and all(t0 <= t < t0 + 1_000_000 for row in rows for t in row)
