"""Verified reads at the use-case level: every kind of entry reads clean, old (v1) ledgers
too; a lawful erasure is named, not flagged; a column or payload changed behind the
ledger's back is flagged with the envelope's value served; findings of the audit runs in
scope are attached to the entries they name (docs/reads.md)."""

from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ledger.clock import FixedClock
from ledger.core.readcheck import INDEXED_COLUMNS, check_entry
from ledger.demo.samples import realistic
from ledger.facade import Ledger
from ledger.ops.audit import AuditOptions
from ledger.ops.custody import Ask
from ledger.ops.lifecycle import upgrade_schema
from ledger.ops.query import make_filters
from ledger.store import entries as repo
from tests import tamper as T
from tests.keyrings import ledger_keyring
from tests.store.test_migrate_v2 import FIXTURE, load_v1_ledger


def _all_layers_clean(L: Ledger) -> int:
    n = 0
    for layer in ("agent", "developer", "auditor"):
        page = L.query_page(make_filters(), limit=1000, layer=layer)
        assert page.flagged == 0, [r["integrity"] for r in page.rows
                                   if not r["integrity"]["verified"]]
        assert page.matched == len(page.rows)
        n = max(n, len(page.rows))
    return n


def test_every_kind_of_entry_reads_verified(db_url, tmp_path):
    with Ledger.init(db_url) as L:
        L.trust_issuer(T.ISSUER, T.JWKS, reason="issuer")  # key_event
        res = L.append_many(realistic(8), producer="p")
        L.audit(AuditOptions(record=True))  # audit_run
        L.hold_add(Ask("litigation hold", "case 1"), seqs=[res[0].seq])  # hold
        L.redact(Ask("GDPR Art. 17", "DSR-1"), seqs=[res[1].seq],  # redaction
                 keyring=ledger_keyring(L, tmp_path / "keys"))
        kinds = {r["kind"] for r in L.query_page(make_filters(), limit=1000,
                                                  layer="auditor").rows}
        assert {"result", "key_event", "audit_run", "hold", "redaction"} <= kinds
        assert _all_layers_clean(L) >= 10
        for r in L.query_page(make_filters(), limit=1000, layer="auditor").rows:
            assert L.get(r["seq"])["integrity"]["verified"], r["seq"]


def test_a_migrated_v1_ledger_reads_verified(db_url):
    load_v1_ledger(db_url)
    upgrade_schema(db_url)
    with Ledger.open(db_url, clock=FixedClock(FIXTURE["clock_us"], 1000)) as L:
        n = _all_layers_clean(L)
        assert n == len(FIXTURE["tables"]["entries"]["rows"])
        page = L.query_page(make_filters(), limit=1000, layer="auditor")
        seq = next(r["seq"] for r in page.rows if r["kind"] == "result")
        envelope_status = json.loads(L.get(seq)["envelope"])["status"]
    with T.unlocked(db_url) as conn:
        T.update_entry(conn, seq, status="VERIFIED" if envelope_status != "VERIFIED"
                       else "BLOCKED")
    with Ledger.open(db_url) as L:
        got = L.get(seq)
        assert got["integrity"]["codes"] == ["column_mismatch"]
        assert got["status"] == envelope_status  # the envelope's value, not the column


def test_a_lawfully_erased_payload_is_named_redacted_not_flagged(sqlite_url, tmp_path):
    with Ledger.init(sqlite_url) as L:
        L.append_many(realistic(4), producer="p")
        seq = next(r["seq"] for r in L.query_page(make_filters(), layer="auditor").rows
                   if r["query"] is not None)
        L.redact(Ask("GDPR Art. 17", "DSR-2"), seqs=[seq], payloads=["query"],
                 keyring=ledger_keyring(L, tmp_path / "keys"))
        got = L.get(seq)
        assert got["integrity"] == {"verified": True, "codes": [], "fields": [],
                                    "redacted": ["query"], "problems": []}
        assert got["payloads"]["query"]["redacted"] and got["payloads"]["query"]["missing"]
        row = next(r for r in L.query_page(make_filters(), layer="developer").rows
                   if r["seq"] == seq)
        assert row["integrity"]["verified"] and row["integrity"]["redacted"] == ["query"]


def test_findings_are_attached_to_the_entries_they_name(db_url):
    with Ledger.init(db_url) as L:
        L.append_many(realistic(10), producer="p")
    with T.unlocked(db_url) as conn:
        T.update_entry(conn, 3, engine="sql-v2")
    with Ledger.open(db_url) as L:
        assert L.query_page(make_filters(has_findings=True), layer="auditor").rows == []
        report = L.audit(AuditOptions())
        assert report.outcome == "failed"
        page = L.query_page(make_filters(has_findings=True), layer="auditor")
        assert [r["seq"] for r in page.rows] == [3] and page.with_findings == 1
        [row] = page.rows
        assert row["findings"][0]["code"] == "column_mismatch"
        assert row["findings"][0]["run_id"] >= 1
        dev = L.query_page(make_filters(has_findings=True), layer="developer").rows[0]
        assert dev["findings"] == ["column_mismatch"]
        assert "findings" not in L.query_page(make_filters(), layer="agent").rows[0]
        assert L.get(3)["findings"][0]["code"] == "column_mismatch"
        assert L.get(2)["findings"] == []
    # the row mended, a new complete audit is clean: the findings in scope are its own
    with T.unlocked(db_url) as conn:
        T.update_entry(conn, 3, engine=json.loads(bytes(T.row(conn, 3).envelope))["engine"])
    with Ledger.open(db_url) as L:
        assert L.audit(AuditOptions()).outcome == "passed"
        assert L.query_page(make_filters(has_findings=True), layer="auditor").rows == []
        assert L.get(3)["findings"] == []


_ONE: list = []


def _one_entry(tmp_path_factory) -> tuple:
    """(row, blobs, ledger id) of one stored v2 result, made once."""
    if not _ONE:
        url = f"sqlite:///{tmp_path_factory.mktemp('col') / 'l.db'}"
        with Ledger.init(url) as L:
            L.append_many(realistic(3), producer="p")
            with L.engine.connect() as conn:
                row = repo.EntryRow(*repo.get_entry(conn, 1))
                blobs = repo.get_payloads(conn, 1)
            _ONE.append((row, blobs, L.ctx.ledger_id))
    return _ONE[0]


@settings(max_examples=80, deadline=None, suppress_health_check=[
    HealthCheck.function_scoped_fixture])
@given(column=st.sampled_from(INDEXED_COLUMNS), value=st.text(min_size=1, max_size=40))
def test_any_rewritten_column_is_flagged_and_served_from_the_envelope(
        tmp_path_factory, column, value):
    row, blobs, ledger_id = _one_entry(tmp_path_factory)
    clean = check_entry(row, blobs, ledger_id)
    assert clean.integrity.verified
    got = check_entry(row._replace(**{column: value}), blobs, ledger_id)
    if getattr(row, column) == value:
        assert got.integrity.verified
        return
    assert got.integrity.codes == ["column_mismatch"]
    assert got.integrity.fields == [column]
    assert got.values == clean.values  # served from the envelope, whatever the column says
    [p] = got.integrity.problems
    # a v2 result's subject is a payload: its column must be empty
    assert p.expected == (None if column == "subject" else clean.values[column])
    assert p.actual == value


@settings(max_examples=80, deadline=None, suppress_health_check=[
    HealthCheck.function_scoped_fixture])
@given(slot=st.integers(0, 5), data=st.binary(max_size=64))
def test_any_rewritten_payload_is_flagged_and_not_served(tmp_path_factory, slot, data):
    row, blobs, ledger_id = _one_entry(tmp_path_factory)
    if slot not in blobs or blobs[slot].data == data:
        return
    clean = check_entry(row, blobs, ledger_id)
    got = check_entry(row, {**blobs, slot: blobs[slot]._replace(data=data)}, ledger_id)
    name = {0: "result", 1: "preimage", 2: "attestation", 3: "query", 4: "meta",
            5: "subject"}[slot]
    assert "payload_digest_mismatch" in got.integrity.codes and name in got.integrity.fields
    assert name not in got.texts and got.stored[name] == data
    if name == "result":
        assert got.document is None
    if name == "subject":
        assert got.values["subject"] is None and clean.values["subject"] is not None


def test_a_row_of_unreadable_types_is_flagged_not_raised(tmp_path_factory):
    row, blobs, ledger_id = _one_entry(tmp_path_factory)
    got = check_entry(row._replace(recorded_at="yesterday"), blobs, ledger_id)
    assert got.integrity.codes == ["row_unreadable"]
    got = check_entry(row._replace(envelope=b"\xff not json"), blobs, ledger_id)
    assert {"envelope_hash_mismatch", "envelope_unreadable"} <= set(got.integrity.codes)
    # every envelope value unproven; the tenant is bound by the entry hash, which still
    # recomputes from the stored body hash
    assert got.values == {**dict.fromkeys(INDEXED_COLUMNS), "tenant": "default"}


def test_an_agent_page_counts_no_findings(sqlite_url):
    with Ledger.init(sqlite_url) as L:
        L.append_many(realistic(3), producer="p")
        assert set(L.query_page(make_filters(), layer="agent").counts()) == {
            "flagged", "matched"}
        assert "with_findings" in L.query_page(make_filters(), layer="developer").counts()
