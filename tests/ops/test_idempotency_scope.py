"""Idempotency keys are scoped per producer (migration 0005): the same key from two producers
names two entries; a producer reusing its own key with other content gets a conflict naming
only its own entry.  On SQLite and PostgreSQL."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import text
from sqlalchemy.exc import IntegrityError

from ledger.facade import Ledger


def sub(msg: str, key: str = "req-1") -> dict[str, Any]:
    return {"engine": "logic", "idempotency_key": key,
            "result": {"status": "BLOCKED", "agent_message": msg}}


def test_the_same_key_from_two_producers_is_two_entries(db_url):
    with Ledger.init(db_url) as L:
        a = L.append(sub("from a"), producer="alice")
        b = L.append(sub("from b"), producer="bob")
        none = L.append(sub("from nobody"))
        assert (a.ok, b.ok, none.ok) == (True, True, True)
        assert len({a.seq, b.seq, none.seq}) == 3 and not (a.replayed or b.replayed)
        assert [L.get(r.seq)["producer"] for r in (a, b, none)] == ["alice", "bob", None]
        # each producer's retry replays its own entry
        assert L.append(sub("from b"), producer="bob").seq == b.seq
        assert L.append(sub("from nobody")).seq == none.seq


def test_a_reused_key_conflicts_only_with_the_producers_own_entry(db_url):
    with Ledger.init(db_url) as L:
        own = L.append(sub("mine"), producer="bob")
        other = L.append(sub("theirs"), producer="alice")
        res = L.append(sub("mine, changed"), producer="bob")
        assert not res.ok and res.error["code"] == "idempotency_conflict"
        assert res.error["detail"] == {"seq": own.seq}
        assert str(other.seq) not in res.error["message"].replace(str(own.seq), "")


def test_the_same_key_twice_in_one_batch_of_one_producer(db_url):
    with Ledger.init(db_url) as L:
        L.append(sub("elsewhere"), producer="alice")
        first, again, changed = L.append_many([sub("x"), sub("x"), sub("y")], producer="bob")
        assert first.ok and again.replayed and again.seq == first.seq
        assert changed.error["code"] == "idempotency_conflict"
        assert changed.error["detail"] == {"seq": first.seq}


@pytest.mark.parametrize("producers,unique", [
    (("alice", "bob"), True), (("alice", None), True),
    (("alice", "alice"), False), ((None, None), False),
])
def test_the_database_keeps_one_key_per_producer(db_url, producers, unique):
    """The indexes themselves: a raw second row is refused exactly when it repeats
    (COALESCE(producer, ''), idempotency_key)."""
    with Ledger.init(db_url) as L:
        first = L.append(sub("one"), producer=producers[0])
        row = {"seq": first.seq + 1, "producer": producers[1]}
        insert = text(
            "INSERT INTO entries (seq, kind, recorded_at, producer, idempotency_key, envelope,"
            " body_hash, prev_hash, entry_hash) SELECT :seq, kind, recorded_at, :producer,"
            " idempotency_key, envelope, body_hash, prev_hash, entry_hash FROM entries"
            " WHERE seq = 0")
        with L.engine.connect() as conn:
            if unique:
                conn.execute(insert, row)
                conn.rollback()
            else:
                with pytest.raises(IntegrityError):
                    conn.execute(insert, row)
