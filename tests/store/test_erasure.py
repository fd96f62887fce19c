"""Erasure in the store (SQLite and PostgreSQL): a payload row is deleted only when a
redaction names it, in the transaction that appends the redaction entry; the audit then
abstains ``redacted`` on it, and still fails a payload missing without a redaction or
present although a redaction erased it."""

from __future__ import annotations

import random

import pytest
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError

from ledger.core.canonical import canonical_json
from ledger.demo.samples import bench_submission
from ledger.ops.append import commit_redaction, prepare_event
from ledger.ops.audit import AuditOptions
from ledger.store import db
from ledger.store import entries as repo
from tests import tamper as T


def mix(n: int) -> list[dict]:
    """Submissions with every payload (result, evidence, query, meta, subject)."""
    rng = random.Random(1)
    return [bench_submission(i, rng) for i in range(n)]


def redaction(targets: list[tuple[int, list[str]]], reason: str = "erasure request"):
    doc = {"format": "ledger-redaction/1",
           "targets": [{"seq": s, "payloads": sorted(n)} for s, n in targets],
           "reason": reason, "reference": None, "requested_by": None,
           "keep_attestation": False, "override_minimum": None}
    return prepare_event("redaction", {"producer": "test", "role": "operator"}, "request", doc)


def redact(ledger, targets):
    pairs = [(s, n) for s, names in targets for n in names]
    return commit_redaction(ledger.ctx, [redaction(targets)], [pairs])[0]


def stored_slots(ledger, seq):
    with db.connect(ledger.engine) as conn:
        return sorted(repo.get_payloads(conn, seq))


def test_a_raw_delete_without_a_redaction_is_refused(ledger):
    ledger.append_many(mix(3))
    for sql in ("DELETE FROM payloads WHERE pid = 8", "DELETE FROM payloads",
                "UPDATE payloads SET data = data"):
        with pytest.raises(DBAPIError, match="not allowed"), ledger.engine.begin() as conn:
            conn.execute(text(sql))
    assert stored_slots(ledger, 1) == [0, 1, 3, 4, 5]


def test_redaction_erases_in_one_transaction_and_the_audit_abstains(ledger):
    ledger.append_many(mix(6))
    before = stored_slots(ledger, 2)
    assert {3, 5} <= set(before)  # query and subject stored
    got = redact(ledger, [(2, ["query", "subject"]), (4, ["meta"])])
    assert got.result.ok and got.result.seq == 6
    assert got.erased == [(2, "query"), (2, "subject"), (4, "meta")]
    assert stored_slots(ledger, 2) == [s for s in before if s not in (3, 5)]
    with ledger.engine.connect() as conn:
        guard = conn.execute(text("SELECT seq, slot, redaction_seq FROM redacted_payloads "
                                  "ORDER BY seq, slot")).all()
    assert [tuple(r) for r in guard] == [(2, 3, 6), (2, 5, 6), (4, 4, 6)]
    report = ledger.audit(AuditOptions())
    assert report.summary.failed == 0 and report.findings == ()
    redacted = [(a.seq, a.check, a.reason, a.to_json()["redaction_seq"])
                for a in report.abstentions if a.reason == "redacted"]
    assert redacted == [(2, "payload:query", "redacted", 6), (2, "payload:subject", "redacted", 6),
                        (4, "payload:meta", "redacted", 6)]
    # the request is a ledger-redaction/1 with no ledger signature: unconfirmed on its own row
    assert {(a.seq, a.reason) for a in report.abstentions
            if a.reason != "redacted"} == {(6, "redaction_unsigned")}
    assert report.outcome == "unverified"
    # the subject is gone: its entry is no longer found by it
    with db.connect(ledger.engine) as conn:
        assert repo.subject_seqs(conn, "req-000002") == []
        assert repo.subject_seqs(conn, "req-000003") == [3]


def test_redacting_an_erased_payload_again_is_a_noop(ledger):
    ledger.append_many(mix(3))
    redact(ledger, [(1, ["query"])])
    again = redact(ledger, [(1, ["query", "meta"])])
    assert again.erased == [(1, "meta")] and again.already_erased == [(1, "query")]
    report = ledger.audit(AuditOptions())
    assert report.summary.failed == 0
    cited = {(a.check, a.to_json()["redaction_seq"]) for a in report.abstentions
             if a.reason == "redacted"}
    assert cited == {("payload:query", 3), ("payload:meta", 4)}  # the first redaction


def test_a_target_not_earlier_than_its_redaction_is_refused_and_nothing_written(ledger):
    ledger.append_many(mix(2))
    with pytest.raises(Exception, match="not earlier"):
        commit_redaction(ledger.ctx, [redaction([(2, ["query"])])], [[(2, "query")]])
    assert ledger.head()["size"] == 2


def test_a_payload_deleted_behind_the_ledger_is_still_a_failure(ledger, db_url):
    ledger.append_many(mix(3))
    with T.unlocked(db_url) as conn:
        conn.execute(text("DELETE FROM payloads WHERE pid = 11"))  # seq 1, slot 3 (query)
    report = ledger.audit(AuditOptions())
    assert [(f.code, f.seq) for f in report.findings] == [("payload_missing", 1)]


def test_a_payload_put_back_after_its_redaction_is_a_policy_violation(ledger, db_url):
    ledger.append_many(mix(3))
    with ledger.engine.connect() as conn:
        salt, how, data = conn.execute(text("SELECT salt, codec, data FROM payloads "
                                            "WHERE pid = 11")).one()
    redact(ledger, [(1, ["query"])])
    with ledger.engine.begin() as conn:  # inserts are allowed: the row comes back as it was
        conn.execute(text("INSERT INTO payloads (pid, salt, codec, data) "
                          "VALUES (11, :s, :c, :d)"), {"s": salt, "c": how, "d": data})
    report = ledger.audit(AuditOptions())
    assert [(f.code, f.seq, f.cls) for f in report.findings] == [
        ("redaction_not_applied", 1, "policy_violation")]


def test_the_guard_table_is_insert_only(ledger):
    ledger.append_many(mix(2))
    redact(ledger, [(0, ["meta"])])
    for sql in ("DELETE FROM redacted_payloads", "UPDATE redacted_payloads SET slot = 1"):
        with pytest.raises(DBAPIError, match="not allowed"), ledger.engine.begin() as conn:
            conn.execute(text(sql))


def test_sqlite_connections_zero_deleted_bytes(sqlite_url):
    from ledger import Ledger

    with Ledger.init(sqlite_url) as L, L.engine.connect() as conn:
        assert conn.exec_driver_sql("PRAGMA secure_delete").scalar() == 1


def test_the_redaction_document_is_a_plain_digest_v2_entry(ledger):
    import json

    ledger.append_many(mix(1))
    got = redact(ledger, [(0, ["query"])])
    env = json.loads(ledger.get(got.result.seq)["envelope"])
    assert env["v"] == 2 and set(env) == {"v", "ledger", "kind", "producer", "role", "payloads"}
    doc = ledger.get(got.result.seq)["payloads"]["request"]["text"].encode()
    assert env["payloads"] == {"request": T.sha(doc.decode())}
    assert canonical_json(json.loads(doc)) == doc
