"""The append transaction (SQLite and PostgreSQL): lock, insert, move the head, commit;
an error rolls everything back; idempotency keys are found.  Then appends through the
ledger: gapless chains, exact payload bytes, quarantined rejections, idempotent retries."""

from __future__ import annotations

import pytest
from sqlalchemy import text

from ledger import DiagnosticResult, Ledger
from ledger.clock import FixedClock
from ledger.demo.samples import realistic, rejected_examples
from ledger.errors import NotFound, StoreDataError
from ledger.store import db
from ledger.store import entries as repo
from ledger.store.append import append_transaction
from ledger.store.entries import ENTRY_COLUMNS, Head
from tests.chaincheck import recompute_chain
from tests.store.test_schema import raw_conn


def _row(seq: int, prev: bytes, key: str | None = None) -> dict:
    row = {c: None for c in ENTRY_COLUMNS}
    row.update(seq=seq, kind="result", recorded_at=1000 + seq, envelope=b"{}" + bytes([seq]),
               body_hash=b"b" * 32, prev_hash=prev, entry_hash=bytes([seq]) * 32,
               idempotency_key=key)
    return row


def test_insert_and_move_the_head_then_read_back(ledger):
    with append_transaction(ledger.engine) as txn:
        h = txn.lock_head()
        assert h.size == 0
        txn.insert_payloads([(0, None, 0, b"doc0"), (8, None, 0, b"d1")])  # pid = seq * 8 + slot
        txn.insert_entries([_row(0, h.head_hash, "k0"), _row(1, b"\x00" * 32)])
        txn.set_head(Head(2, b"\x01" * 32, 1001))
    with db.connect(ledger.engine) as conn:
        assert repo.read_head(conn) == Head(2, b"\x01" * 32, 1001)
        assert [r.seq for r in repo.iter_entries(conn)] == [0, 1]
        assert repo.get_payloads(conn, 0) == {0: repo.Payload(None, b"doc0")}



def test_empty_inserts_write_nothing(ledger):
    """A batch whose items were all rejected still runs its transaction: empty inserts are
    no-ops on every driver (``executemany`` of no rows is not valid everywhere)."""
    with append_transaction(ledger.engine) as txn:
        txn.lock_head()
        txn.insert_payloads({})
        txn.insert_entries([])
    with db.transaction(ledger.engine) as conn:
        repo.insert_quarantine(conn, [])
    with db.connect(ledger.engine) as conn:
        assert repo.max_seq(conn) is None and repo.read_head(conn).size == 0  # type: ignore


def test_a_schema_without_a_ledger_has_no_head(db_url):
    engine = db.make_engine(db_url)
    try:
        db.upgrade(engine)
        with db.connect(engine) as conn:
            assert repo.has_schema(conn) and repo.read_head(conn) is None
    finally:
        engine.dispose()

def test_an_error_inside_rolls_back_everything(ledger):
    with pytest.raises(RuntimeError), append_transaction(ledger.engine) as txn:
        h = txn.lock_head()
        txn.insert_payloads([(0, None, 0, b"x")])
        txn.insert_entries([_row(0, h.head_hash)])
        txn.set_head(Head(1, b"\x00" * 32, 1000))
        raise RuntimeError("caller failed")
    with db.connect(ledger.engine) as conn:
        assert repo.read_head(conn).size == 0  # type: ignore[union-attr]
        assert repo.max_seq(conn) is None
        assert repo.get_payloads(conn, 0) == {}


def test_payload_rows_are_keyed_by_entry_and_never_replaced(ledger):
    """(Revision 0005: payloads are laid out by entry, pid = seq * 8 + slot.)"""
    with append_transaction(ledger.engine) as txn:
        txn.lock_head()
        txn.insert_payloads([(3, b"s" * 32, 0, b"first")])
    with pytest.raises(StoreDataError), append_transaction(ledger.engine) as txn:
        txn.lock_head()
        txn.insert_payloads([(3, None, 0, b"second")])
    with db.connect(ledger.engine) as conn:
        assert repo.get_payloads(conn, 0) == {3: repo.Payload(b"s" * 32, b"first")}


def test_idempotency_lookup_finds_stored_keys_only(ledger):
    with append_transaction(ledger.engine) as txn:
        h = txn.lock_head()
        txn.insert_entries([_row(0, h.head_hash, "key-a")])
        txn.set_head(Head(1, b"\x00" * 32, 1000))
    with append_transaction(ledger.engine) as txn:
        txn.lock_head()
        keys = ["key-a", "key-b"] + [f"k{i}" for i in range(1200)]  # several chunks
        found = txn.find_idempotent(keys)
    assert list(found) == ["key-a"]
    assert found["key-a"].seq == 0 and found["key-a"].entry_hash == b"\x00" * 32
    assert found["key-a"].envelope == b"{}\x00" and found["key-a"].recorded_at == 1000


def test_appends_are_gapless_and_every_hash_recomputes(db_url):
    with Ledger.init(db_url) as L:
        subs = realistic(30)
        res = L.append_many(subs[:20])
        assert [r.seq for r in res] == list(range(20))
        for s in subs[20:]:
            L.append(s)
        assert L.head()["size"] == 30
        assert L.get(29)["entry_hash"] == L.head()["head_hash"]
    assert recompute_chain(db_url) == 30


def test_stored_payloads_are_the_exact_bytes(db_url):
    with Ledger.init(db_url) as L:
        sub = realistic(2)[1]  # logic: proof is a Python repr, not JSON
        r = L.append(sub)
        view = L.get(r.seq)
    assert view["payloads"]["preimage"]["text"] == sub["proof_preimage"]
    assert view["proof_ref"] == sub["result"]["proof_ref"]
    assert view["document"]["developer_fields"] == sub["result"]["developer_fields"]


def test_get_missing_entry_is_not_found(db_url):
    with Ledger.init(db_url) as L, pytest.raises(NotFound):
        L.get(5)


def test_rejections_store_nothing_in_the_ledger_and_are_quarantined(db_url):
    with Ledger.init(db_url) as L:
        L.append(realistic(1)[0])
        before = L.head()
        bad = [b for _, b in rejected_examples()]
        results = L.append_many(bad)
        assert all(not r.ok for r in results)
        assert L.head() == before
    with raw_conn(db_url) as conn:
        rows = conn.execute(text("SELECT code, field, raw FROM quarantine ORDER BY id")).all()
    assert [r.code for r in rows] == [r.error["code"] for r in results]
    assert all(r.raw for r in rows)


def test_mixed_batch_appends_the_valid_items_in_order(db_url):
    good = realistic(3)
    bad = rejected_examples()[0][1]
    with Ledger.init(db_url) as L:
        res = L.append_many([good[0], bad, good[1], b"not json", good[2]])
    assert [r.ok for r in res] == [True, False, True, False, True]
    assert [r.seq for r in res if r.ok] == [0, 1, 2]
    assert res[3].error["code"] == "invalid_json"
    assert recompute_chain(db_url) == 3


def test_idempotent_retry_returns_the_same_entry(db_url):
    sub = {**realistic(1)[0], "idempotency_key": "req-1"}
    with Ledger.init(db_url) as L:
        first = L.append(sub)
        again = L.append(sub)
        batch = L.append_many([sub, sub])
        assert (again.seq, again.entry_hash, again.replayed) == (first.seq, first.entry_hash, True)
        assert all(r.seq == first.seq and r.replayed for r in batch)
        assert L.head()["size"] == 1


def test_same_key_other_content_is_a_conflict(db_url):
    a, b = realistic(2)
    with Ledger.init(db_url) as L:
        L.append({**a, "idempotency_key": "k"})
        res = L.append({**b, "idempotency_key": "k"})
        assert not res.ok and res.error["code"] == "idempotency_conflict"
        assert res.error["field"] == "idempotency_key"
        # inside one batch too: the first wins, the second conflicts
        both = L.append_many([{**a, "idempotency_key": "k2"}, {**b, "idempotency_key": "k2"}])
        assert [r.ok for r in both] == [True, False]
        assert L.head()["size"] == 2


def test_recorded_at_never_decreases_even_if_the_clock_does(db_url):
    clock = FixedClock(1_800_000_000_000_000)
    with Ledger.init(db_url, clock=clock) as L:
        L.append(realistic(1)[0])
        clock.advance(-5_000_000)  # the wall clock steps back 5 s
        r = L.append(realistic(2)[1])
        assert r.recorded_at == "2027-01-15T08:00:00.000000Z"
    recompute_chain(db_url)


def test_upstream_constructed_results_round_trip(db_url):
    r = DiagnosticResult.verified("ok", {"constraint_id": "math.x"}, {"é": "😀", "x": 1e-07})
    with Ledger.init(db_url) as L:
        res = L.append({"result": r.to_dict(), "engine": "math",
                        "evidence": {"é": "😀", "x": 1e-07}})
        v = L.get(res.seq)
    assert v["payloads"]["preimage"]["text"] == '{"x": 1e-07, "\\u00e9": "\\ud83d\\ude00"}'
    assert DiagnosticResult.from_dict(v["document"]) == r


def _fake_jwt(header: dict, claims: dict) -> str:
    import base64
    import json

    def b64(obj: dict) -> str:
        return base64.urlsafe_b64encode(json.dumps(obj).encode()).rstrip(b"=").decode()

    return f"{b64(header)}.{b64(claims)}.c2ln"


@pytest.mark.parametrize("header", [
    {"alg": "ES256", "typ": "qwed-attestation+jwt", "kid": "\ud800"},
    {"alg": "ES256", "typ": "qwed-attestation+jwt", "kid": "k" * 600},
])
def test_a_bad_token_hint_rejects_only_its_own_item(db_url, header):
    good = realistic(1)[0]
    bad = {**realistic(1)[0], "attestation": _fake_jwt(header, {"iss": "did:x"})}
    with Ledger.init(db_url) as L:
        res = L.append_many([good, bad])
    assert res[0].ok and not res[1].ok
    assert res[1].error["code"] == "attestation_malformed"
    assert recompute_chain(db_url) == 1


def test_an_invalid_producer_is_a_usage_error_and_stores_nothing(db_url):
    from ledger.errors import UsageError

    with Ledger.init(db_url) as L:
        for producer in ("p" * 257, "bad\udcff", ""):
            with pytest.raises(UsageError):
                L.append(realistic(1)[0], producer=producer)
        assert L.head()["size"] == 0
