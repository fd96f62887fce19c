"""Charts of one tenant (``ledger.ops.aggregates`` with ``tenant``) on SQLite and PostgreSQL:
the counts of that tenant's entries only, equal to what its checked reads give, unchanged by
whatever another tenant appends or breaks, and no number of the whole ledger in the answer."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import pytest

from ledger import Ledger
from ledger.clock import FixedClock
from ledger.demo.samples import realistic
from ledger.ops import aggregates as aggregates_ops
from ledger.ops.audit import AuditOptions
from ledger.ops.query import make_filters
from tests import tamper as T

HOUR = 3_600_000_000
A, B = "acme", "globex"
KEYS = ("status", "engine", "producer")


@pytest.fixture
def ledger(db_url: str):
    """acme 10 entries, globex 17, default 5 and a key event: an audit run recorded after the
    first 26 entries, the rest appended after it (one entry an hour)."""
    with Ledger.init(db_url, clock=FixedClock(T.FIXTURE_TIME_US, step_us=HOUR)) as L:
        L.append_many(realistic(7), producer="acme-bot", tenant=A)
        L.append_many(realistic(13, seed=3), producer="globex-bot", tenant=B)
        L.append_many(realistic(5, seed=5), producer="seed")
        L.trust_issuer(T.ISSUER, T.JWKS, reason="k", producer="ops")
        L.audit(AuditOptions())
        L.append_many(realistic(3, seed=9, start=7), producer="acme-bot", tenant=A)
        L.append_many(realistic(4, seed=11, start=13), producer="globex-bot", tenant=B)
        yield L


def expected(L: Ledger, tenant: str) -> tuple[Counter[Any], Counter[Any]]:
    """(hour, status, engine, producer) -> verified results, and hour -> unverified rows,
    from an operator-level read filtered by the tenant (each row checked on the way out)."""
    good: Counter[Any] = Counter()
    bad: Counter[Any] = Counter()
    for row in L.iter_query(make_filters(tenant=[tenant]), layer="auditor"):
        hour = row["recorded_at"][:13]
        if not row["integrity"]["verified"]:
            bad[hour] += 1
        elif row["kind"] == "result":
            good[(hour, *(row[k] for k in KEYS))] += 1
    return good, bad


def flat(doc: dict[str, Any]) -> tuple[Counter[Any], Counter[Any]]:
    got: Counter[Any] = Counter()
    flagged: Counter[Any] = Counter()
    for b in doc["buckets"]:
        if b["flagged"]:
            flagged[b["start"][:13]] += b["flagged"]
        for *values, n in b["results"]:
            got[(b["start"][:13], *values)] += n
    return got, flagged


def numbers(doc: Any) -> list[int]:
    """Every integer in the answer."""
    if isinstance(doc, bool):
        return []
    if isinstance(doc, int):
        return [doc]
    if isinstance(doc, dict):
        return [n for v in doc.values() for n in numbers(v)]
    if isinstance(doc, list):
        return [n for v in doc for n in numbers(v)]
    return []


def test_a_tenants_counts_are_its_entries_only(ledger: Ledger) -> None:
    for tenant, count, mine, other in ((A, 10, "acme-bot", "globex-bot"),
                                       (B, 17, "globex-bot", "acme-bot")):
        doc = ledger.aggregates("auditor", bucket="hour", tenant=tenant)
        got, flagged = flat(doc)
        want, bad = expected(ledger, tenant)
        assert got == want and sum(got.values()) == count and not flagged and not bad
        assert doc["producers"] == [mine]
        assert doc["covers"]["tenant"] == tenant
        assert doc["covers"]["live"]["rows"] == count
        assert doc["covers"]["complete"] is True and doc["covers"]["audited"] is None
        text = json.dumps(doc)
        assert other not in text and "seed" not in text and "ops" not in text
        # no number of the ledger: not its size (33), not another tenant's count, nothing
        # above the tenant's own count (the run id and the key event's are small)
        assert max(n for n in numbers(doc) if n != doc["covers"]["run_id"]) <= count
        assert 33 not in numbers(doc) and (27 - count) not in numbers(doc)


def test_the_default_tenant_is_a_tenant_like_the_others(ledger: Ledger) -> None:
    """Its chain began before the others' (tseq stored): 5 results and a key event, which
    is no result; nothing of acme or globex."""
    doc = ledger.aggregates("auditor", bucket="hour", tenant="default")
    got, flagged = flat(doc)
    want, bad = expected(ledger, "default")
    assert got == want and sum(got.values()) == 5 and not flagged and not bad
    assert doc["covers"]["live"]["rows"] == 6 and doc["producers"] == ["seed"]


def test_every_layer_and_filter_stays_in_the_tenant(ledger: Ledger) -> None:
    want, _ = expected(ledger, A)
    agent = ledger.aggregates("agent", bucket="hour", tenant=A)
    assert agent["series"] == ["status"] and "producers" not in agent
    by_status: Counter[Any] = Counter()
    for (hour, status, _e, _p), n in want.items():
        by_status[(hour, status)] += n
    assert flat(agent)[0] == by_status
    dev = ledger.aggregates("developer", bucket="day", tenant=A)
    assert sum(n for b in dev["buckets"] for *_, n in b["results"]) == 10
    # a filter naming another tenant's producer selects nothing of it
    only_b = ledger.aggregates("auditor", producers=["globex-bot"], tenant=A)
    assert all(not b["results"] for b in only_b["buckets"])
    # a time window: the tenant's entries in it, nothing of the others
    first_a = list(ledger.iter_query(make_filters(tenant=[A]), layer="auditor"))
    since = first_a[7]["recorded_at"]
    late = ledger.aggregates("auditor", since=since, bucket="hour", tenant=A)
    assert sum(n for b in late["buckets"] for *_, n in b["results"]) == 3
    assert late["covers"]["live"]["rows"] == 3


def test_another_tenants_appends_and_breakage_change_nothing(ledger: Ledger,
                                                             db_url: str) -> None:
    before = ledger.aggregates("auditor", bucket="hour", tenant=A)
    b_seqs = [r["seq"] for r in ledger.iter_query(make_filters(tenant=[B]), layer="auditor")]
    with T.unlocked(db_url) as conn:  # a globex row's status column says otherwise
        T.update_entry(conn, b_seqs[2], status="UNKNOWN_X")
    ledger.append_many(realistic(6, seed=13), producer="globex-bot", tenant=B)
    ledger.audit(AuditOptions())
    after = ledger.aggregates("auditor", bucket="hour", tenant=A)
    for doc in (before, after):
        doc["covers"].pop("run_id"), doc["covers"].pop("run_started_at")
    assert after == before
    b_doc = ledger.aggregates("auditor", bucket="hour", tenant=B)
    assert sum(b["flagged"] for b in b_doc["buckets"]) == 1
    assert sum(n for b in b_doc["buckets"] for _, n in b["findings"]) >= 1


def test_a_broken_row_is_flagged_in_its_own_tenant(ledger: Ledger, db_url: str) -> None:
    a_seqs = [r["seq"] for r in ledger.iter_query(make_filters(tenant=[A]), layer="auditor")]
    with T.unlocked(db_url) as conn:
        T.update_entry(conn, a_seqs[8], status="UNKNOWN_X")
    doc = ledger.aggregates("auditor", bucket="hour", tenant=A)
    got, flagged = flat(doc)
    want, bad = expected(ledger, A)
    assert got == want and flagged == bad and sum(flagged.values()) == 1
    assert all(b["flagged"] == 0 for b in ledger.aggregates("auditor", tenant=B)["buckets"])
    # the whole-ledger charts still count the audited part from the stored run
    whole = ledger.aggregates("auditor")
    assert whole["covers"]["audited"] == {"start": 0, "end": 26}


def test_more_than_the_live_bound_is_said(ledger: Ledger,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(aggregates_ops, "LIVE_MAX", 4)
    doc = ledger.aggregates("auditor", bucket="hour", tenant=B)
    assert doc["covers"]["live"] == {"rows": 4, "checked": aggregates_ops.LIVE_CHECK,
                                     "truncated": True}
    assert doc["covers"]["complete"] is False
    assert sum(n for b in doc["buckets"] for *_, n in b["results"]) == 4
    empty = ledger.aggregates("auditor", tenant="nobody")
    assert empty["buckets"] == [] and empty["covers"]["live"]["rows"] == 0


def test_a_row_moved_to_another_tenant_is_flagged_on_both_sides(ledger: Ledger,
                                                                db_url: str) -> None:
    """A row's tenant column rewritten behind the ledger's back: counted, flagged, in the
    tenant it now names (its hash binds its real tenant), and its real predecessor no longer
    links on, so its old tenant shows a flagged row too; neither shows its values."""
    a_seqs = [r["seq"] for r in ledger.iter_query(make_filters(tenant=[A]), layer="auditor")]
    with T.unlocked(db_url) as conn:
        T.update_entry(conn, a_seqs[4], tenant=B)
    a_doc = ledger.aggregates("auditor", bucket="hour", tenant=A)
    b_doc = ledger.aggregates("auditor", bucket="hour", tenant=B)
    assert sum(b["flagged"] for b in a_doc["buckets"]) == 1
    assert sum(b["flagged"] for b in b_doc["buckets"]) == 1
    assert a_doc["covers"]["live"]["rows"] == 9 and b_doc["covers"]["live"]["rows"] == 18
    assert "acme-bot" not in json.dumps(b_doc)


def test_a_ledger_level_finding_at_a_tenants_seq_is_not_the_tenants(ledger: Ledger,
                                                                    db_url: str) -> None:
    """The audit places a ledger-level finding (a checkpoint's tenants line, the stored
    tree, a head) at some seq, which may be one of acme's: acme's charts count the row
    findings on its entries, never such a finding (it may be about the other tenants)."""
    from sqlalchemy import create_engine, text

    a_seq = next(r["seq"] for r in ledger.iter_query(make_filters(tenant=[A]),
                                                       layer="auditor"))
    eng = create_engine(db_url.replace("postgresql://", "postgresql+psycopg://", 1))
    with eng.begin() as conn:
        run_id = conn.execute(text("SELECT max(id) FROM audit_runs")).scalar_one()
        for code, cls in (("tenant_heads_mismatch", "forked"),
                          ("entry_hash_mismatch", "payload_modified")):
            body = json.dumps({"code": code, "seq": a_seq, "message": "m", "expected": None,
                               "actual": None, "class": cls})
            conn.execute(text("INSERT INTO audit_findings (run_id, seq, kind, body) VALUES "
                              "(:r, :s, 'finding', :b)"), {"r": run_id, "s": a_seq, "b": body})
    eng.dispose()
    found: Counter[str] = Counter()
    for b in ledger.aggregates("auditor", bucket="hour", tenant=A)["buckets"]:
        found.update(dict(b.get("findings") or []))
    assert found == Counter({"payload_modified": 1})  # the row finding, not the ledger's
    whole: Counter[str] = Counter()
    for b in ledger.aggregates("auditor", bucket="hour")["buckets"]:
        whole.update(dict(b.get("findings") or []))
    assert whole["forked"] == 1  # the operator's charts still show it
