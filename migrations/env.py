"""Alembic environment.

Runs on a connection handed over by ``ledger.store.migrate`` (the CLI) or, when
run through the ``alembic`` command, on ``sqlalchemy.url`` / ``LEDGER_DB_URL``.
On PostgreSQL a lock timeout keeps a migration from queueing forever behind
long-running transactions.
"""

from __future__ import annotations

import os

from alembic import context
from sqlalchemy import create_engine

from ledger.store.schema import metadata

config = context.config
target_metadata = metadata


def _run(connection) -> None:
    if connection.dialect.name == "postgresql":
        connection.exec_driver_sql("SET lock_timeout = '10s'")
    # SQLite's DDL is transactional too (the connection opened BEGIN IMMEDIATE): a run of
    # several revisions is one transaction on both engines, so a revision that refuses
    # (raises) leaves the ones before it undone instead of half the way applied.
    context.configure(connection=connection, target_metadata=target_metadata,
                      render_as_batch=connection.dialect.name == "sqlite",
                      transactional_ddl=True, compare_type=True)
    with context.begin_transaction():
        context.run_migrations()


connection = config.attributes.get("connection")
if connection is not None:
    _run(connection)
else:
    from ledger.store.db import normalize_url

    url = config.get_main_option("sqlalchemy.url") or os.environ.get("LEDGER_DB_URL")
    engine = create_engine(normalize_url(url or "sqlite:///ledger.db"))
    with engine.begin() as conn:
        _run(conn)
