"""PostgreSQL helpers for the store-fault tests: a database of one's own, and killing
its server-side backends from a separate admin connection."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url
from sqlalchemy.pool import NullPool

from tests.conftest import PG_ADMIN_URL, _psycopg

TERMINATE = ("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
             "WHERE datname = :name AND pid <> pg_backend_pid()")


@contextmanager
def own_database() -> Iterator[str]:
    """URL of a fresh database (dropped afterwards): terminating its backends touches
    no other test's connections."""
    admin = create_engine(_psycopg(PG_ADMIN_URL), isolation_level="AUTOCOMMIT")
    name = f"ledger_fault_{uuid.uuid4().hex[:10]}"
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    try:
        yield make_url(_psycopg(PG_ADMIN_URL)).set(database=name).render_as_string(
            hide_password=False)
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


def terminate_backends(url: str) -> int:
    """Kill every backend connected to ``url``'s database, from an admin connection to
    another database (so it works while the database refuses new connections)."""
    eng = create_engine(_psycopg(PG_ADMIN_URL), isolation_level="AUTOCOMMIT",
                        poolclass=NullPool)
    try:
        with eng.connect() as conn:
            return int(conn.execute(text(TERMINATE),
                                    {"name": make_url(url).database}).scalar_one())
    finally:
        eng.dispose()
