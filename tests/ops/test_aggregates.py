"""Counts over the whole ledger (``ledger.ops.aggregates``) on SQLite and PostgreSQL: the
audit's stored counts plus the entries after its run checked live, never an indexed
column's value as an entry's value, and an answer that says what it covers."""

from __future__ import annotations

from collections import Counter

import pytest

from ledger import Ledger
from ledger.clock import FixedClock
from ledger.demo.samples import realistic
from ledger.errors import UsageError
from ledger.ops.audit import AuditOptions
from ledger.ops.query import make_filters
from tests import tamper as T

HOUR = 3_600_000_000


def _envelope_counts(L: Ledger, keys: tuple[str, ...]) -> tuple[Counter, int]:
    """What the charts must show, from the checked reads: verified results by their proven
    values, and how many rows did not verify."""
    good, bad = Counter(), 0
    for row in L.iter_query(make_filters(), layer="auditor"):
        if not row["integrity"]["verified"]:
            bad += 1
        elif row["kind"] == "result":
            good[tuple(row[k] for k in keys)] += 1
    return good, bad


def _flat(doc: dict, keys: tuple[str, ...]) -> tuple[Counter, int]:
    got, flagged = Counter(), 0
    for b in doc["buckets"]:
        flagged += b["flagged"]
        for *values, n in b["results"]:
            got[tuple(values)] += n
    assert doc["series"] == list(keys)
    return got, flagged


@pytest.fixture
def ledger(db_url: str):
    # 60 results over 60 hours (one an hour), a key event
    with Ledger.init(db_url, clock=FixedClock(T.FIXTURE_TIME_US, step_us=HOUR)) as L:
        L.append_many(realistic(30), producer="seed")
        L.trust_issuer(T.ISSUER, T.JWKS, reason="k", producer="ops")
        L.append_many(realistic(29), producer="other")
        yield L


def test_counts_are_the_envelopes_and_flagged_rows_count_apart(ledger, db_url) -> None:
    true5 = ledger.get(5)["status"]
    with T.unlocked(db_url) as conn:  # entry 5's status column says otherwise
        T.update_entry(conn, 5, status="BLOCKED" if true5 != "BLOCKED" else "VERIFIED")
    report = ledger.audit(AuditOptions())
    keys = ("status", "engine", "producer")
    doc = ledger.aggregates("auditor", bucket="hour")
    assert doc["covers"]["run_id"] == report.run_id
    assert doc["covers"]["audited"] == {"start": 0, "end": 60}
    assert doc["covers"]["live"]["rows"] == 0 and doc["covers"]["complete"] is True
    got, flagged = _flat(doc, keys)
    want, bad = _envelope_counts(ledger, keys)
    assert got == want and flagged == bad == 1
    # the flagged row is counted in its hour, under no status
    [hour5] = [b for b in doc["buckets"] if b["flagged"]]
    assert hour5["start"] == ledger.get(5)["recorded_at"][:13] + ":00:00.000000Z"
    assert sum(n for b in doc["buckets"] for _, n in b["findings"]) == len(report.findings)
    # agents: by status only, no findings, no producers
    agent = ledger.aggregates("agent")
    assert agent["series"] == ["status"] and "findings" not in agent["buckets"][0]
    assert "producers" not in agent and "engines" not in agent
    by_status = Counter()
    for k, n in want.items():
        by_status[(k[0],)] += n
    assert _flat(agent, ("status",)) == (by_status, 1)


def test_entries_after_the_run_are_counted_live_and_said_so(ledger, db_url) -> None:
    ledger.audit(AuditOptions())
    ledger.append_many(realistic(7), producer="late")
    with T.unlocked(db_url) as conn:  # a row after the run, rewritten: the read check flags it
        T.update_entry(conn, 62, engine="forged")
    doc = ledger.aggregates("auditor", bucket="day")
    live = doc["covers"]["live"]
    assert (live["start"], live["end"], live["rows"], live["truncated"]) == (60, 67, 7, False)
    got, flagged = _flat(doc, ("status", "engine", "producer"))
    want, bad = _envelope_counts(ledger, ("status", "engine", "producer"))
    assert got == want and flagged == bad == 1
    assert "forged" not in doc["engines"]  # a rewritten column is never a value
    only = ledger.aggregates("auditor", producers=["late"])
    assert sum(_flat(only, ("status", "engine", "producer"))[0].values()) == 6
    assert doc["producers"] == ["late", "other", "seed"]


def test_no_run_yet_means_everything_live_and_bad_input_is_usage(ledger) -> None:
    doc = ledger.aggregates("developer")
    assert doc["covers"]["run_id"] is None and doc["covers"]["live"]["rows"] == 60
    assert doc["series"] == ["status", "engine"]
    since = ledger.get(40)["recorded_at"]
    part = ledger.aggregates("developer", since=since, bucket="hour")
    later = [r for r in ledger.iter_query(make_filters(since=since), layer="developer")
             if r["kind"] == "result"]
    assert 0 < len(later) < 59
    assert sum(n for b in part["buckets"] for *_, n in b["results"]) == len(later)
    for bad in ({"bucket": "minute"}, {"since": "yesterday"}):
        with pytest.raises(UsageError):
            ledger.aggregates("developer", **bad)
