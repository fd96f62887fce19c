"""Parallel audits: parts joined as one worker reports them, recorded like any run, and
resumable part by part after an interruption -- on SQLite and PostgreSQL."""

from __future__ import annotations

import json
from itertools import pairwise
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlalchemy import text

import ledger.ops.audit.walk as audit_mod
from ledger import Ledger
from ledger.core.finding import Finding, FindingClass
from ledger.demo.samples import realistic
from ledger.errors import UsageError
from ledger.ops.audit import AuditOptions, join_gaps, run_audit, split
from tests import tamper as T
from tests.ops.test_audit import abstained, audit_runs, finding_set, tampered


# -- join_gaps against a model of what each part reports ---------------------------------
def _gaps(present: list[int], lo: int, hi: int) -> list[Finding]:
    """The seq_gap findings one walk over ``[lo, hi)`` reports (as ChainAuditor and
    audit_range word them): a gap before each row that does not follow its predecessor,
    and one open gap (actual None) when rows are missing up to ``hi``."""
    out, expected = [], lo
    for s in (s for s in present if lo <= s < hi):
        if s != expected:
            out.append(Finding("seq_gap", expected, FindingClass.DELETED,
                               f"entries {expected}..{s - 1} are missing", expected, s))
        expected = s + 1
    if expected < hi:
        out.append(Finding("seq_gap", expected, FindingClass.DELETED,
                           f"entries {expected}..{hi - 1} are missing", expected, None))
    return out


@settings(max_examples=400, deadline=None)
@given(n=st.integers(1, 40), workers=st.integers(2, 6), data=st.data())
def test_joined_parts_report_the_gaps_of_one_walk(n, workers, data):
    present = sorted(data.draw(st.sets(st.integers(0, n - 1))))
    bounds = [p["start"] for p in split(0, n, workers)] + [n]
    parts: list[Finding] = []
    for lo, hi in pairwise(bounds):
        parts += _gaps(present, lo, hi)
    parts.append(Finding("seq_gap_x", 0, FindingClass.DELETED, "not a gap"))
    join_gaps(parts, bounds)
    assert parts[:-1] == _gaps(present, 0, n)
    assert parts[-1].code == "seq_gap_x"  # other findings are left alone


def test_gaps_at_two_boundaries_that_do_not_touch_stay_two_findings(db_url):
    # parts [0,10) [10,20) [20,30): the first ends in a gap, the third starts with one;
    # the middle part between them is whole (before, the two were joined into one gap
    # that also called rows 10..19 missing)
    with Ledger.init(db_url) as L:
        L.append_many(realistic(30))
        with T.unlocked(db_url) as conn:
            conn.execute(text("DELETE FROM entries WHERE seq IN (8, 9, 20, 21)"))
        one, three = run_audit(L, AuditOptions()), run_audit(L, AuditOptions(workers=3))
    assert [(f.code, f.seq, f.actual, f.message) for f in one.findings] == [
        ("seq_gap", 8, 10, "entries 8..9 are missing"),
        ("seq_gap", 20, 22, "entries 20..21 are missing")]
    assert three.findings == one.findings and three.summary == one.summary


# -- interrupted and resumed ----------------------------------------------------------
class WorkerStopped(Exception):
    """Raised in a worker process to interrupt a parallel run (crosses the pool)."""


def _stop_part_after(monkeypatch: pytest.MonkeyPatch, pages: int) -> None:
    """Every part but the first stops after ``pages`` pages (the pool's workers are forked
    from this process, so they run the patched function)."""
    real = audit_mod.audit_range

    def flaky(engine: Any, ledger_id: str, start: int, end: int, *a: Any, on_page: Any = None,
              **kw: Any) -> Any:
        seen = [0]

        def hook(pos: int, tally: Any, auditor: Any) -> None:
            on_page(pos, tally, auditor)
            seen[0] += 1
            if seen[0] >= pages:
                raise WorkerStopped(f"stopped at {pos}")
        return real(engine, ledger_id, start, end, *a,
                    on_page=hook if start > 0 and on_page else on_page, **kw)

    monkeypatch.setattr(audit_mod, "audit_range", flaky)


def _saved(url: str, run_id: int) -> set[tuple[str, str, int]]:
    with T.connect(url) as conn:
        rows = conn.execute(text("SELECT kind, body FROM audit_findings WHERE run_id = :r"),
                            {"r": run_id}).all()
    return {(k, json.loads(b).get("code") or json.loads(b)["reason"], json.loads(b)["seq"])
            for k, b in rows}


def test_an_interrupted_parallel_run_resumes_to_the_report_of_a_fresh_run(db_url, monkeypatch):
    monkeypatch.setattr(audit_mod, "PAGE", 5)
    monkeypatch.setattr(audit_mod, "PROGRESS_EVERY", 5)
    with tampered(db_url) as L:
        fresh = run_audit(L, AuditOptions())
        for pages in (3, 2):  # interrupted, then interrupted again while resuming
            with monkeypatch.context() as m:
                _stop_part_after(m, pages)
                with pytest.raises(WorkerStopped):
                    run_audit(L, AuditOptions(workers=3, resume=pages == 2))
            run = audit_runs(db_url)[-1]
            assert run.state == "running"
        with T.connect(db_url) as conn:
            parts = json.loads(conn.execute(text("SELECT options FROM audit_runs WHERE id = :r"),
                                            {"r": run.id}).scalar_one())["parts"]
        assert len(parts) == 3 and any(p["start"] < p["next_seq"] < p["end"] for p in parts)
        resumed = run_audit(L, AuditOptions(resume=True))
        after = audit_runs(db_url)[-1]
    assert resumed.run_id == run.id == after.id and after.state == "complete"
    assert resumed.workers == 3
    assert resumed.summary == fresh.summary
    assert finding_set(resumed) == finding_set(fresh) == {
        ("payload_digest_mismatch", 12), ("column_mismatch", 43), ("seq_gap", 75),
        ("hash_not_committed", 100)}
    assert abstained(resumed) == abstained(fresh)
    # what the run saved is the joined report, each finding and abstention once
    want = {("finding", f.code, f.seq) for f in fresh.findings}
    want |= {("abstention", a.reason, a.seq) for a in fresh.abstentions}
    assert _saved(db_url, run.id) == want
    with T.connect(db_url) as conn:
        n = conn.execute(text("SELECT COUNT(*) FROM audit_findings WHERE run_id = :r"),
                         {"r": run.id}).scalar_one()
    assert n == len(fresh.findings) + len(fresh.abstentions)


def test_a_gap_across_a_boundary_is_one_finding_after_a_resume(sqlite_url, monkeypatch):
    monkeypatch.setattr(audit_mod, "PAGE", 3)
    monkeypatch.setattr(audit_mod, "PROGRESS_EVERY", 3)
    with Ledger.init(sqlite_url) as L:
        L.append_many(realistic(40))
        with T.unlocked(sqlite_url) as conn:  # parts [0,20) [20,40): rows 17..24 gone
            conn.execute(text("DELETE FROM entries WHERE seq >= 17 AND seq < 25"))
        fresh = run_audit(L, AuditOptions())
        with monkeypatch.context() as m:
            _stop_part_after(m, 2)
            with pytest.raises(WorkerStopped):
                run_audit(L, AuditOptions(workers=2))
        resumed = run_audit(L, AuditOptions(resume=True))
    assert [(f.code, f.seq, f.actual) for f in fresh.findings] == [
        ("seq_gap", 17, 25)]
    assert resumed.findings == fresh.findings
    assert resumed.summary == fresh.summary


def test_a_run_stopped_after_its_parts_but_before_it_completed_resumes_to_the_same(db_url):
    with tampered(db_url) as L:
        done = run_audit(L, AuditOptions(workers=2))
        with T.connect(db_url) as conn:
            conn.execute(text("UPDATE audit_runs SET state = 'running' WHERE id = :r"),
                         {"r": done.run_id})
        again = run_audit(L, AuditOptions(resume=True))
    assert again.run_id == done.run_id
    assert again.summary == done.summary and again.findings == done.findings
    assert audit_runs(db_url)[-1].state == "complete"


@pytest.mark.parametrize("parts", [
    "not a list", [], [{"start": 0, "end": 20, "next_seq": 5}],  # does not cover the range
    [{"start": 0, "end": 20, "next_seq": 25}, {"start": 20, "end": 40, "next_seq": 20}],
    [{"start": 0, "end": 20, "next_seq": 5}, {"start": 21, "end": 40, "next_seq": 21}],
    [{"start": 0, "end": 20, "next_seq": "5"}, {"start": 20, "end": 40, "next_seq": 20}],
    [{"start": 0, "end": 20, "next_seq": 5, "state": []}, {"start": 20, "end": 40,
                                                          "next_seq": 20}]])
def test_a_run_whose_saved_parts_were_edited_is_refused_naming_the_rule(sqlite_url, parts):
    with Ledger.init(sqlite_url) as L:
        L.append_many(realistic(40))
        run_id = run_audit(L, AuditOptions(workers=2)).run_id
        with T.connect(sqlite_url) as conn:
            opts = json.loads(conn.execute(text("SELECT options FROM audit_runs WHERE id = :r"),
                                           {"r": run_id}).scalar_one())
            opts["parts"] = parts
            conn.execute(text("UPDATE audit_runs SET state = 'running', options = :o "
                              "WHERE id = :r"), {"o": json.dumps(opts), "r": run_id})
        with pytest.raises(UsageError) as info:
            run_audit(L, AuditOptions(resume=True))
    assert info.value.code == "resume_state_invalid" and info.value.field == "resume"
    assert "contiguous" in str(info.value)
