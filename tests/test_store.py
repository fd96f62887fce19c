"""The storage contract, run against SQLite and PostgreSQL."""

from __future__ import annotations

from contextlib import contextmanager

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.exc import DBAPIError

from ledger import DiagnosticResult, Ledger
from ledger.clock import FixedClock
from ledger.core.entry import genesis_hash, hash_hex
from ledger.errors import NotFound, NotInitialized
from ledger.ops.samples import realistic, rejected_examples
from ledger.store.db import current_revision, make_engine, normalize_url
from tests.chaincheck import recompute_chain


@contextmanager
def raw_conn(url: str):
    eng = create_engine(normalize_url(url))
    try:
        with eng.connect() as conn:
            yield conn
    finally:
        eng.dispose()


def test_open_uninitialized_is_a_clear_error(db_url):
    with pytest.raises(NotInitialized):
        Ledger.open(db_url)


def test_init_is_idempotent_and_starts_at_genesis(db_url):
    a = Ledger.init(db_url, origin="example.org/ledger")
    b = Ledger.init(db_url, origin="ignored/second")
    assert a.meta == b.meta
    head = a.head()
    assert head["size"] == 0
    assert head["origin"] == "example.org/ledger"
    assert head["head_hash"] == hash_hex(genesis_hash(a.meta.ledger_id))
    eng = make_engine(db_url)
    assert current_revision(eng) is not None
    eng.dispose(), a.close(), b.close()


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


@pytest.mark.parametrize("statement", [
    "UPDATE entries SET status = 'VERIFIED' WHERE seq = 0",
    "DELETE FROM entries WHERE seq = 0",
    "UPDATE payloads SET data = data",
    "UPDATE quarantine SET code = 'x'",
    "DELETE FROM quarantine",
    "UPDATE ledger_meta SET origin = 'x'",
])
def test_database_rejects_rewrites(db_url, statement):
    with Ledger.init(db_url) as L:
        L.append(realistic(1)[0])
        L.append(rejected_examples()[0][1])
    with raw_conn(db_url) as conn, pytest.raises(DBAPIError, match="append-only"):
        conn.execute(text(statement))
    assert recompute_chain(db_url) == 1


def test_postgresql_rejects_truncate(pg_url):
    with Ledger.init(pg_url) as L:
        L.append(realistic(1)[0])
    for table in ("entries", "payloads", "quarantine", "ledger_meta"):
        with raw_conn(pg_url) as conn, pytest.raises(DBAPIError, match="append-only"):
            conn.execute(text(f"TRUNCATE {table}"))
    assert recompute_chain(pg_url) == 1


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
