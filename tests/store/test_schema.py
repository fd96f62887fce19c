"""The schema (SQLite and PostgreSQL): init is idempotent and starts at genesis, an
uninitialized database is a clear error, and the triggers refuse every rewrite."""

from __future__ import annotations

from contextlib import contextmanager

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.exc import DBAPIError

from ledger import Ledger
from ledger.core.entry import genesis_hash, hash_hex
from ledger.demo.samples import realistic, rejected_examples
from ledger.errors import NotInitialized
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
