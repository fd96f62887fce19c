"""Store faults: a lost connection is StoreUnavailable (never a raw driver error) and the
pool recovers by itself; a value the database refuses is its item's 4xx only."""

from __future__ import annotations

import threading

import pytest
from sqlalchemy import text

from ledger import Ledger
from ledger.demo.samples import realistic
from ledger.errors import StoreDataError, StoreUnavailable
from ledger.store import db
from ledger.store.append import append_transaction
from tests.store.pgadmin import terminate_backends


def test_an_append_in_flight_when_its_backend_dies_is_unavailable(own_pg):
    with Ledger.init(own_pg) as L:
        subs = realistic(4)
        L.append(subs[0])
        with pytest.raises(StoreUnavailable) as caught, append_transaction(L.engine) as txn:
            txn.lock_head()
            assert terminate_backends(own_pg) >= 1
            txn.lock_head()
        assert caught.value.http_status == 503
        assert L.head()["size"] == 1  # nothing of the failed transaction
        assert L.append(subs[1]).seq == 1  # the pool recovered: no restart, no retry loop
        assert L.append_many(subs[2:])[-1].seq == 3


def test_a_read_connection_that_dies_is_unavailable_then_reads_work(own_pg):
    with Ledger.init(own_pg) as L:
        L.append(realistic(1)[0])
        with pytest.raises(StoreUnavailable), db.connect(L.engine) as conn:
            conn.execute(text("SELECT 1"))
            terminate_backends(own_pg)
            conn.execute(text("SELECT size FROM head"))
        assert L.head()["size"] == 1


def test_idle_pooled_connections_killed_between_appends_are_replaced(own_pg):
    with Ledger.init(own_pg) as L:
        subs = realistic(4)
        L.append(subs[0])  # the one-statement path
        L.append_many(subs[1:3])  # the locked path
        terminate_backends(own_pg)
        assert L.append(subs[3]).seq == 3  # the pool pings before handing a connection out
        terminate_backends(own_pg)
        assert [r.seq for r in L.append_many(subs[1:3])] == [4, 5]


def test_appends_under_load_while_backends_die_fail_only_as_unavailable(own_pg):
    with Ledger.init(own_pg) as L:
        subs = realistic(160)
        errors: list[BaseException] = []
        done: list[int] = []

        def writer(chunk: list) -> None:
            for s in chunk:
                try:
                    r = L.append(s)
                    done.append(r.seq)  # type: ignore[arg-type]
                except BaseException as exc:  # noqa: BLE001 - what escapes is the point
                    errors.append(exc)

        threads = [threading.Thread(target=writer, args=(subs[i::4],)) for i in range(4)]
        for t in threads:
            t.start()
        for _ in range(3):
            terminate_backends(own_pg)
        for t in threads:
            t.join(120)
        assert all(isinstance(e, StoreUnavailable) for e in errors), errors
        size = L.head()["size"]
        assert size == len(done)  # every reported failure stored nothing
        assert L.append(realistic(161)[160]).seq == size  # and the next append succeeds


@pytest.fixture
def nul_batch():
    subs = realistic(3)
    bad = {**subs[1], "subject": "a\x00b"}  # PostgreSQL text cannot hold NUL
    return [subs[0], bad, subs[2]]


def test_validation_refuses_nul_with_the_same_rule_on_both_engines(db_url, nul_batch):
    with Ledger.init(db_url) as L:
        res = L.append_many(nul_batch)
        assert [r.ok for r in res] == [True, False, True]
        assert (res[1].error["code"], res[1].error["field"]) == ("invalid_text", "subject")
        assert L.head()["size"] == 2


def test_a_value_the_database_refuses_rejects_its_item_and_not_its_batch_mates(pg_url):
    """The store's own defence, below validation: an item whose column the database
    refuses (built here without validation) is its own 422, its batch-mates commit, and
    the one-statement path refuses it alike."""
    from ledger.core.submission import parse_submission
    from ledger.ops.append import commit_batch, commit_one_pg, default_judge, prepare_result

    with Ledger.init(pg_url) as L:
        def prepared(i, constraint_id=None):
            # constraint_id is a text column of its own (in format v2 the subject is a
            # committed payload: bytes the database never refuses)
            p = prepare_result(parse_submission(realistic(3)[i]), None, default_judge)
            if constraint_id is not None:
                p.fields["constraint_id"] = constraint_id
            p.index = i
            return p.seal(L.meta.ledger_id)

        batch = [prepared(0), prepared(1, "a\x00b"), prepared(2)]
        res = commit_batch(L.engine, L.meta.ledger_id, L.clock, batch)
        assert [r.ok for r in res] == [True, False, True]
        assert [r.seq for r in res if r.ok] == [0, 1]
        assert res[1].error["code"] == StoreDataError.default_code
        assert StoreDataError("x").http_status == 422
        assert L.head()["size"] == 2
        single = commit_one_pg(L.engine, L.meta.ledger_id, L.clock, prepared(1, "x\x00"))
        assert single is not None and not single.ok
        assert single.error["code"] == "unstorable_value"
        assert L.head()["size"] == 2
