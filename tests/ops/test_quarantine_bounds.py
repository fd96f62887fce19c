"""The quarantine is bounded (in all and per producer), counts the rejects it does not keep,
and is pruned only through ``prune``; on SQLite and PostgreSQL."""

from __future__ import annotations

import json

import pytest
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError

from ledger.clock import FixedClock
from ledger.errors import UsageError
from ledger.facade import Ledger
from ledger.ops.limits import QuarantineLimits

T0 = 1_800_000_000_000_000


def bad(i: int) -> bytes:
    return json.dumps({"engine": "logic", "bogus": i,
                       "result": {"status": "BLOCKED", "agent_message": "m"}}).encode()


def good(i: int) -> dict:
    return {"engine": "logic", "subject": f"ok-{i}",
            "result": {"status": "BLOCKED", "agent_message": f"fine {i}"}}


def rows(L: Ledger) -> list[tuple[str | None, str]]:
    with L.engine.connect() as conn:
        return [tuple(r) for r in conn.execute(text(
            "SELECT producer, code FROM quarantine ORDER BY id"))]


def test_bounds_in_all_and_per_producer_count_what_is_not_kept(db_url):
    limits = QuarantineLimits(max_rows=5, max_per_producer=2)
    with Ledger.init(db_url, quarantine=limits) as L:
        for producer in ("alice", "bob", None):
            res = L.append_many([bad(0), good(0), bad(1), bad(2)], producer=producer)
            assert [r.ok for r in res] == [False, True, False, False]  # all still reported
        assert [p for p, _ in rows(L)] == ["alice", "alice", "bob", "bob", None]
        st = L.quarantine_status()
        assert (st["rows"], st["dropped"], st["max_rows"], st["max_per_producer"]) == (5, 4, 5, 2)
        assert {p: (c["rows"], c["dropped"]) for p, c in st["producers"].items()} == {
            "": (1, 2), "alice": (2, 1), "bob": (2, 1)}
        assert L.head()["size"] == 3


def test_zero_keeps_nothing_and_counts_everything(db_url):
    with Ledger.init(db_url, quarantine=QuarantineLimits(0, 0)) as L:
        L.append_many([bad(i) for i in range(7)], producer="p")
        assert rows(L) == [] and L.quarantine_status()["dropped"] == 7


def test_defaults_come_from_the_environment(db_url, monkeypatch):
    monkeypatch.setenv("LEDGER_QUARANTINE_MAX_ROWS", "3")
    monkeypatch.setenv("LEDGER_QUARANTINE_MAX_PER_PRODUCER", "2")
    with Ledger.init(db_url) as L:
        L.append_many([bad(i) for i in range(3)], producer="p")
        L.append_many([bad(i) for i in range(3)], producer="q")
        st = L.quarantine_status()
        assert (st["rows"], st["dropped"], st["max_rows"]) == (3, 3, 3)


@pytest.mark.parametrize("limits", [(-1, 1), (1, -1), ("10", 1), (True, 1)])
def test_bad_bounds_are_usage_errors(limits):
    with pytest.raises(UsageError):
        QuarantineLimits(*limits)


def test_a_bad_environment_value_is_a_usage_error(monkeypatch):
    monkeypatch.setenv("LEDGER_QUARANTINE_MAX_ROWS", "many")
    with pytest.raises(UsageError):
        QuarantineLimits.from_env()


def test_prune_removes_old_rows_only_and_makes_room(db_url):
    clock = FixedClock(T0)
    with Ledger.init(db_url, clock=clock, quarantine=QuarantineLimits(3, 3)) as L:
        L.append_many([bad(0), bad(1)], producer="p")
        clock.advance(10_000_000)
        L.append_many([bad(2), bad(3)], producer="p")  # one kept, one dropped
        assert len(rows(L)) == 3
        assert L.prune_quarantine(T0 + 1) == 2
        assert len(rows(L)) == 1
        L.append_many([bad(4)], producer="p")
        st = L.quarantine_status()
        assert (st["rows"], st["dropped"], st["pruned"]) == (2, 1, 2)
        assert L.prune_quarantine(T0 + 1) == 0
        assert L.prune_quarantine(T0 + 20_000_000, producer="other") == 0
        assert L.prune_quarantine(T0 + 20_000_000, producer="p") == 2
        assert L.head()["size"] == 0


def test_prune_by_producer_and_rows_without_one(db_url):
    clock = FixedClock(T0)
    with Ledger.init(db_url, clock=clock) as L:
        L.append_many([bad(0)], producer="p")
        L.append_many([bad(1)])
        clock.advance(1)
        assert L.prune_quarantine(T0 + 1, producer="") == 1
        assert rows(L) == [("p", "unknown_field")]


def test_a_delete_outside_prune_is_still_refused(db_url):
    clock = FixedClock(T0)
    with Ledger.init(db_url, clock=clock) as L:
        L.append_many([bad(0), bad(1)])
        clock.advance(1)
        L.prune_quarantine(T0 + 1)  # the gate is closed again after a prune
        L.append_many([bad(2)])
        with L.engine.connect() as conn, pytest.raises(DBAPIError, match="append-only"):
            conn.execute(text("DELETE FROM quarantine"))
        with L.engine.connect() as conn, pytest.raises(DBAPIError, match="append-only"):
            conn.execute(text("UPDATE quarantine SET code = 'x'"))
        assert len(rows(L)) == 1
