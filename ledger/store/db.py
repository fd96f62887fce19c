"""Engines, connection settings and migrations for SQLite and PostgreSQL.

SQLite: WAL journal, ``synchronous=FULL`` (every commit is durable, also across
power loss), a 60 s busy timeout so many writer processes queue instead of
failing, and write transactions opened with ``BEGIN IMMEDIATE`` so the append
lock is taken before the head is read (no read-then-upgrade deadlocks).

PostgreSQL (psycopg 3): appends lock the one-row ``head`` table ``FOR UPDATE``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Engine, create_engine, event
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, OperationalError

from ledger.errors import StoreUnavailable, UsageError

DEFAULT_URL = "sqlite:///ledger.db"
WRITE_OPTION = "ledger_write"


def default_url() -> str:
    return os.environ.get("LEDGER_DB_URL") or DEFAULT_URL


def normalize_url(url: str) -> str:
    """Accept plain ``postgresql://`` and ``postgres://`` URLs; use psycopg 3."""
    for prefix in ("postgres://", "postgresql://"):
        if url.startswith(prefix):
            return "postgresql+psycopg://" + url[len(prefix):]
    return url


def make_engine(url: str, *, create: bool = False, **kwargs: Any) -> Engine:
    """An Engine configured for the ledger.  Raises UsageError for a bad URL.

    ``create`` allows making the SQLite file's directory (``ledger init``).
    """
    url = normalize_url(url)
    try:
        parsed = make_url(url)
    except ArgumentError as exc:
        raise UsageError(f"not a database URL: {url!r}", code="bad_db_url",
                         field="db") from exc
    backend = parsed.get_backend_name()
    if backend == "sqlite":
        return _sqlite_engine(url, create, **kwargs)
    if backend == "postgresql":
        kwargs.setdefault("pool_pre_ping", True)
        return create_engine(url, **kwargs)
    raise UsageError(f"unsupported database {backend!r}; use sqlite:/// or postgresql://",
                     code="bad_db_url", field="db")


def _sqlite_engine(url: str, create: bool, **kwargs: Any) -> Engine:
    parsed = make_url(url)
    if parsed.database and parsed.database != ":memory:":
        folder = Path(parsed.database).parent
        if create:
            folder.mkdir(parents=True, exist_ok=True)
        elif not folder.is_dir():
            raise StoreUnavailable(f"no such directory for the SQLite file: {folder}")
    engine = create_engine(url, connect_args={"timeout": 60}, **kwargs)

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn: Any, _record: Any) -> None:
        dbapi_conn.isolation_level = None  # we issue BEGIN ourselves
        cur = dbapi_conn.cursor()
        cur.execute("PRAGMA journal_mode=WAL")
        cur.execute("PRAGMA synchronous=FULL")
        cur.execute("PRAGMA busy_timeout=60000")
        cur.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Connection) -> None:
        write = conn.get_execution_options().get(WRITE_OPTION, False)
        conn.exec_driver_sql("BEGIN IMMEDIATE" if write else "BEGIN")

    return engine


def write_connection(engine: Engine) -> Connection:
    """A connection whose transactions take the SQLite write lock at BEGIN."""
    return engine.connect().execution_options(**{WRITE_OPTION: True})


def migrations_dir() -> Path:
    import ledger._migrations as m

    return Path(m.__file__).parent


def alembic_config(connection: Connection | None = None) -> Any:
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(migrations_dir()))
    if connection is not None:
        cfg.attributes["connection"] = connection
    return cfg


def upgrade(engine: Engine, revision: str = "head") -> None:
    """Apply migrations up to ``revision``.  Raises StoreUnavailable if unreachable."""
    from alembic import command

    try:
        with write_connection(engine) as conn:
            command.upgrade(alembic_config(conn), revision)
            conn.commit()
    except OperationalError as exc:
        raise StoreUnavailable(f"cannot reach the database: {exc.orig}") from exc


def current_revision(engine: Engine) -> str | None:
    from alembic.runtime.migration import MigrationContext

    with engine.connect() as conn:
        return MigrationContext.configure(conn).get_current_revision()
