"""A recorded audit run as the console reads it (``ledger.ops.history``), on SQLite and
PostgreSQL: its label (command, scope, checkpoints, who ran it), its findings grouped into
incidents with their explanations, and the findings selected, sorted and paged."""

from __future__ import annotations

import pytest

from ledger import Ledger
from ledger.clock import FixedClock
from ledger.demo.samples import realistic
from ledger.errors import UsageError
from ledger.ops.audit import AuditOptions
from ledger.ops.history import FindingSelection
from tests import tamper as T


@pytest.fixture
def tampered(db_url: str) -> str:
    """40 results; the status column of entries 10..29 changed behind the ledger's back
    (one incident, 20 rows), the engine column of entry 35 (another)."""
    with Ledger.init(db_url, clock=FixedClock(T.FIXTURE_TIME_US, step_us=1000)) as L:
        L.append_many(realistic(40), producer="seed")
        L.audit(AuditOptions(command="ledger audit", actor="alice"))
    with T.unlocked(db_url) as conn:
        for seq in range(10, 30):
            conn.exec_driver_sql(
                "UPDATE entries SET status = CASE WHEN status = 'BLOCKED' THEN 'VERIFIED' "
                f"ELSE 'BLOCKED' END WHERE seq = {seq}")
        T.update_entry(conn, 35, engine="forged-engine")
    return db_url


def test_runs_carry_their_label(tampered: str, tmp_path) -> None:
    note = tmp_path / "cp-40.txt"
    note.write_text("not a checkpoint\n")
    with Ledger.open(tampered) as L:
        L.audit(AuditOptions(start=5, end=20))  # a library call: no command
        L.audit(AuditOptions(since_last=False, command="ledger audit", actor="bob",
                             checkpoints=(str(note),)))
        newest, partial, first = L.audit_runs()["runs"]
    assert first["label"] == {"command": "ledger audit", "actor": "alice",
                              "scope": "whole ledger: seqs [0, 40)", "checkpoints": []}
    assert partial["label"] == {"command": None, "actor": None, "scope": "seqs [5, 20)",
                                "checkpoints": []}
    assert newest["label"]["checkpoints"] == ["cp-40.txt"]
    assert newest["label"]["actor"] == "bob"


def test_findings_fold_into_incidents(tampered: str) -> None:
    with Ledger.open(tampered) as L:
        report = L.audit(AuditOptions(command="ledger audit"))
        run = L.audit_run(report.run_id)
    assert len(run["finding_list"]) == run["finding_total"] == 21
    by_field = {g["field"]: g for g in run["incidents"]}
    assert set(by_field) == {"status", "engine"}
    status = by_field["status"]
    assert (status["code"], status["class"], status["count"]) == (
        "column_mismatch", "payload_modified", 20)
    assert status["ranges"] == [[10, 29]] and (status["first_seq"], status["last_seq"]) == (10, 29)
    assert status["explain"]["severity"] == "critical"
    assert status["explain"]["doc"] == "docs/audit.md#code-column_mismatch"
    assert by_field["engine"]["ranges"] == [[35, 35]]
    assert run["incidents"][0] is status  # the larger incident of the same severity first


def test_findings_are_selected_sorted_and_paged(tampered: str) -> None:
    with Ledger.open(tampered) as L:
        run_id = L.audit(AuditOptions()).run_id
        page = L.audit_run(run_id, FindingSelection(field="status", sort="-seq", offset=5,
                                                    limit=4))
        assert page["finding_total"] == 20
        assert [f["seq"] for f in page["finding_list"]] == [24, 23, 22, 21]
        assert len(page["incidents"]) == 2  # incidents always cover the whole run
        one = L.audit_run(run_id, FindingSelection(code="column_mismatch", field="engine"))
        assert [f["seq"] for f in one["finding_list"]] == [35]
        none = L.audit_run(run_id, FindingSelection(cls="forked"))
        assert none["finding_total"] == 0 and none["finding_list"] == []
        with pytest.raises(UsageError) as err:
            L.audit_run(run_id, FindingSelection(sort="size"))
        assert err.value.field == "sort"
