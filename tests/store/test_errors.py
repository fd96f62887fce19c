"""Error translation by driver exception type and SQLSTATE (real drivers, real errors)."""

from __future__ import annotations

import pytest
from sqlalchemy import event, text
from sqlalchemy.exc import DBAPIError

from ledger import Ledger
from ledger.errors import LedgerError, NotInitialized, StoreDataError, StoreUnavailable
from ledger.store import db


def test_a_data_error_is_the_items_4xx_not_unavailable(db_url):
    engine = db.make_engine(db_url)
    try:
        with pytest.raises(StoreDataError) as caught, db.connect(engine) as conn:
            conn.execute(text("CREATE TEMP TABLE t (x INTEGER NOT NULL)"))
            conn.execute(text("INSERT INTO t (x) VALUES (NULL)"))  # 23502 / SQLITE_CONSTRAINT
        assert caught.value.http_status == 422
        assert not isinstance(caught.value, StoreUnavailable)
    finally:
        engine.dispose()


def test_a_bad_cast_on_postgresql_is_a_data_error(pg_url):
    engine = db.make_engine(pg_url)
    try:
        with pytest.raises(StoreDataError) as caught, db.connect(engine) as conn:
            conn.execute(text("SELECT 'x'::integer"))  # 22P02
        assert caught.value.detail["sqlstate"] == "22P02"
    finally:
        engine.dispose()


def test_an_unreachable_server_is_unavailable():
    engine = db.make_engine("postgresql://postgres@127.0.0.1:1/none?connect_timeout=2")
    try:
        with pytest.raises(StoreUnavailable):
            Ledger.open("postgresql://postgres@127.0.0.1:1/none?connect_timeout=2")
        with pytest.raises(StoreUnavailable), db.connect(engine):
            pass
    finally:
        engine.dispose()


def test_a_locked_sqlite_database_is_unavailable(sqlite_url):
    Ledger.init(sqlite_url).close()
    engine = db.make_engine(sqlite_url)

    @event.listens_for(engine, "connect")
    def _short_wait(dbapi_conn, _record) -> None:  # after the ledger's own PRAGMAs
        dbapi_conn.execute("PRAGMA busy_timeout=50")

    blocker = db.make_engine(sqlite_url)
    try:
        with db.transaction(blocker), pytest.raises(StoreUnavailable), \
                db.transaction(engine):
            pass
    finally:
        engine.dispose(), blocker.dispose()


def test_an_uninitialized_database_is_not_initialized(db_url):
    with pytest.raises(NotInitialized):
        Ledger.open(db_url)


def test_an_undefined_table_on_postgresql_is_not_initialized(pg_url):
    engine = db.make_engine(pg_url)
    try:
        with pytest.raises(NotInitialized), db.connect(engine) as conn:
            conn.execute(text("SELECT * FROM head"))
    finally:
        engine.dispose()


def test_a_nul_the_postgresql_driver_refuses_is_a_data_error(pg_url):
    engine = db.make_engine(pg_url)
    try:
        with pytest.raises(StoreDataError) as caught, db.connect(engine) as conn:
            conn.execute(text("SELECT CAST(:v AS text)"), {"v": "a\x00b"})  # no SQLSTATE
        assert caught.value.http_status == 422 and "cannot store a value" in str(caught.value)
    finally:
        engine.dispose()


def test_an_error_of_no_known_class_is_not_translated(db_url):
    """A bug (here a syntax error) stays the driver's error: it is neither the client's
    4xx nor a retryable 503."""
    engine = db.make_engine(db_url)
    try:
        with pytest.raises(DBAPIError) as caught, db.connect(engine) as conn:
            conn.execute(text("SELEC 1"))
        assert not isinstance(caught.value, LedgerError)
    finally:
        engine.dispose()


def test_an_in_memory_sqlite_url_needs_no_directory():
    engine = db.make_engine("sqlite:///:memory:")
    try:
        with db.connect(engine) as conn:
            assert conn.execute(text("SELECT 1")).scalar_one() == 1
    finally:
        engine.dispose()
