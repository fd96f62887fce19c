"""Fixtures: a real SQLite file and a real PostgreSQL schema per test.

PostgreSQL: ``LEDGER_TEST_PG`` (default ``postgresql://postgres@127.0.0.1:5432/test``).
Each test session creates its own database and each test its own schema, and
drops them afterwards, so runs never collide.  When no server answers, the
PostgreSQL tests are skipped with the reason — except under CI (``CI=true``),
where an unreachable server is an error.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

PG_ADMIN_URL = os.environ.get("LEDGER_TEST_PG", "postgresql://postgres@127.0.0.1:5432/test")
ENGINES = ("sqlite", "postgresql")  # every backend: the params of ``db_url``


def _psycopg(url: str) -> str:
    return url.replace("postgresql://", "postgresql+psycopg://", 1)


@pytest.fixture(scope="session")
def pg_database() -> Iterator[str]:
    """URL of a fresh database for this session, dropped at the end."""
    admin = create_engine(_psycopg(PG_ADMIN_URL), isolation_level="AUTOCOMMIT")
    name = f"ledger_test_{os.getpid()}_{uuid.uuid4().hex[:8]}"
    try:
        with admin.connect() as conn:
            conn.execute(text(f'CREATE DATABASE "{name}"'))
    except Exception as exc:  # noqa: BLE001 - any connection failure means "no server"
        admin.dispose()
        msg = f"PostgreSQL not reachable at {PG_ADMIN_URL} ({type(exc).__name__}); " \
              "set LEDGER_TEST_PG to run the PostgreSQL tests"
        if os.environ.get("CI"):
            pytest.fail(msg)
        pytest.skip(msg)
    url = make_url(_psycopg(PG_ADMIN_URL)).set(database=name)
    yield url.render_as_string(hide_password=False)
    with admin.connect() as conn:
        conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    admin.dispose()


@pytest.fixture
def pg_url(pg_database: str) -> Iterator[str]:
    """A schema of its own inside the session database (search_path set in the URL)."""
    schema = f"t_{uuid.uuid4().hex[:12]}"
    eng = create_engine(pg_database, isolation_level="AUTOCOMMIT")
    with eng.connect() as conn:
        conn.execute(text(f'CREATE SCHEMA "{schema}"'))
    url = make_url(pg_database).update_query_dict({"options": f"-csearch_path={schema}"})
    yield url.render_as_string(hide_password=False)
    with eng.connect() as conn:
        conn.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
    eng.dispose()


@pytest.fixture
def sqlite_url(tmp_path) -> str:
    return f"sqlite:///{tmp_path / 'ledger.db'}"


@pytest.fixture(params=ENGINES)
def db_url(request) -> str:
    """The storage contract suite runs against every backend."""
    if request.param == "sqlite":
        return request.getfixturevalue("sqlite_url")
    return request.getfixturevalue("pg_url")


def engine_url(kind: str, request: pytest.FixtureRequest, tmp: Path) -> str:
    """A fresh database of ``kind`` (one of :data:`ENGINES`) for a module- or session-scoped
    fixture, which cannot use ``db_url``: a SQLite file in ``tmp``, or a schema of its own in
    the session's PostgreSQL database (dropped with that database)."""
    if kind == "sqlite":
        return f"sqlite:///{tmp / 'ledger.db'}"
    pg_database = request.getfixturevalue("pg_database")
    schema = f"m_{uuid.uuid4().hex[:12]}"
    eng = create_engine(pg_database, isolation_level="AUTOCOMMIT")
    with eng.connect() as conn:
        conn.execute(text(f'CREATE SCHEMA "{schema}"'))
    eng.dispose()
    url = make_url(pg_database).update_query_dict({"options": f"-csearch_path={schema}"})
    return url.render_as_string(hide_password=False)
