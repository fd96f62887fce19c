"""Engines, connections and the one translation of database errors.

SQLite: WAL journal, ``synchronous=FULL`` (every commit is durable, also across
power loss), a 60 s busy timeout so many writer processes queue instead of
failing, and write transactions opened with ``BEGIN IMMEDIATE`` so the append
lock is taken before the head is read (no read-then-upgrade deadlocks).

PostgreSQL (psycopg 3): appends lock the one-row ``head`` table ``FOR UPDATE``;
the pool pings a connection before handing it out, so it recovers by itself
after a server restart.

Every driver error is translated once, by :func:`translate` (driver exception
type and SQLSTATE, never message text -- with one exception: ``sqlite3``'s own failure to
read back TEXT that is not UTF-8, which has neither a code nor a type of its own),
through :func:`translate_errors` around every connection the store opens; the engine's
``handle_error`` hook also turns a connection-level fault, and stored text that cannot be
read, on any other connection into the ledger's error.
The table is in docs/storage.md.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Engine, create_engine, event
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, DBAPIError, InterfaceError, OperationalError

from ledger.errors import (
    IntegrityError,
    LedgerError,
    NotInitialized,
    StoreDataError,
    StorePermissionDenied,
    StoreUnavailable,
    UsageError,
)

DEFAULT_URL = "sqlite:///ledger.db"
WRITE_OPTION = "ledger_write"

# The driver's connection errors, which ``translate`` turns into StoreUnavailable; one that
# still arrives raw is answered the same way by the HTTP service (``ledger.api.app``).
RAW_CONNECTION_ERRORS: tuple[type[Exception], ...] = (OperationalError, InterfaceError)


def default_url() -> str:
    return os.environ.get("LEDGER_DB_URL") or DEFAULT_URL


def normalize_url(url: str) -> str:
    """Accept plain ``postgresql://`` and ``postgres://`` URLs; use psycopg 3."""
    for prefix in ("postgres://", "postgresql://"):
        if url.startswith(prefix):
            return "postgresql+psycopg://" + url[len(prefix):]
    return url


def is_pg(engine_or_conn: Engine | Connection) -> bool:
    return engine_or_conn.dialect.name == "postgresql"


def placeholder(pg: bool) -> str:
    """The driver's parameter marker: ``%s`` (psycopg) or ``?`` (sqlite3)."""
    return "%s" if pg else "?"


# -- error translation -------------------------------------------------------------------
# SQLSTATE classes and codes a retry can cure: connection exception, insufficient
# resources, operator intervention (admin shutdown, cancel), system error; serialization
# failure, deadlock, lock not available.  A hot standby that refuses writes (a failover
# cures it) is unavailable too — on the store's own paths only.  A missing privilege
# (42501: a role without a GRANT, or an append-only trigger refusing a rewrite) is not
# transient: StorePermissionDenied.
_RETRY_CLASSES = ("08", "53", "57", "58")
_RETRY_STATES = frozenset({"40001", "40P01", "55P03"})
_REFUSED_WRITE_STATES = frozenset({"25006"})
_INSUFFICIENT_PRIVILEGE = "42501"
_DATA_CLASSES = ("22", "23")  # data exception, integrity constraint violation
_UNDEFINED_TABLE = "42P01"
# SQLite primary result codes a retry can cure: BUSY, LOCKED, NOMEM, IOERR, FULL,
# CANTOPEN, PROTOCOL; data: TOOBIG, CONSTRAINT, MISMATCH, RANGE.
_SQLITE_RETRY = frozenset({5, 6, 7, 10, 13, 14, 15})
_SQLITE_DATA = frozenset({18, 19, 20, 25})


def translate(exc: BaseException, what: str = "database") -> LedgerError | None:
    """The ledger error for a driver (or SQLAlchemy-wrapped driver) error, or None when
    it is not a store fault (a bug: left as it is).

    Connection-level faults -> StoreUnavailable (503, retry); bad data -> StoreDataError
    (422, that item only); an undefined table -> NotInitialized.
    """
    orig = exc.orig if isinstance(exc, DBAPIError) and exc.orig is not None else exc
    if isinstance(orig, sqlite3.Error):
        return _translate_sqlite(orig, what)
    try:
        import psycopg
    except ImportError:  # pragma: no cover - psycopg is a dependency
        return None
    if isinstance(orig, psycopg.Error):
        return _translate_pg(orig, psycopg, what)
    return None


def _translate_pg(orig: Any, psycopg: Any, what: str) -> LedgerError | None:
    state = getattr(orig, "sqlstate", None) or ""
    reason = f"{what}: {type(orig).__name__}"
    if state.startswith(_RETRY_CLASSES) or state in _RETRY_STATES \
            or state in _REFUSED_WRITE_STATES:
        return StoreUnavailable(f"{reason} (SQLSTATE {state}); retry shortly",
                                detail={"sqlstate": state})
    if state == _INSUFFICIENT_PRIVILEGE:
        diag = getattr(orig, "diag", None)
        said = getattr(diag, "message_primary", None) or ""
        return StorePermissionDenied(
            f"{reason}: the database refused the statement for lack of privilege "
            f"(SQLSTATE {state}{': ' + said if said else ''}); retrying will not help: grant "
            "the service's role what docs/operations.md lists", detail={"sqlstate": state})
    if state.startswith(_DATA_CLASSES):
        return StoreDataError(f"{reason}: the database refused a value (SQLSTATE {state})",
                              detail={"sqlstate": state})
    if state == _UNDEFINED_TABLE:
        return NotInitialized("the ledger is not initialized here; run `ledger init`")
    if not state and isinstance(orig, psycopg.DataError):  # refused by the driver itself
        return StoreDataError(f"{reason}: the database cannot store a value ({orig})")
    if not state and isinstance(orig, (psycopg.OperationalError, psycopg.InterfaceError)):
        return StoreUnavailable(f"{reason}: the database is unreachable; retry shortly")
    return None


# sqlite3's message (Modules/_sqlite/cursor.c) when a TEXT value is not UTF-8: SQLite keeps
# whatever is written, so only a value written behind the ledger's back gives it
NOT_UTF8 = "Could not decode to UTF-8"
STORED_TEXT_UNREADABLE = "stored_text_unreadable"


def _translate_sqlite(orig: sqlite3.Error, what: str) -> LedgerError | None:
    code = getattr(orig, "sqlite_errorcode", None)
    primary = code & 0xFF if isinstance(code, int) else None
    if primary is None and isinstance(orig, sqlite3.OperationalError) \
            and str(orig).startswith(NOT_UTF8):
        return IntegrityError(f"{what}: a stored value is not UTF-8 text ({orig}); it was "
                              "written behind the ledger's back: `ledger audit` names the "
                              "entry", code=STORED_TEXT_UNREADABLE)
    reason = f"{what}: {type(orig).__name__} ({getattr(orig, 'sqlite_errorname', '?')})"
    if primary in _SQLITE_RETRY:
        return StoreUnavailable(f"{reason}; retry shortly", detail={"sqlite_code": code})
    if primary in _SQLITE_DATA or isinstance(orig, sqlite3.DataError):
        return StoreDataError(f"{reason}: the database refused a value",
                              detail={"sqlite_code": code})
    return None


@contextmanager
def translate_errors(what: str = "database") -> Iterator[None]:
    """Translate driver errors raised inside the block (see :func:`translate`)."""
    try:
        yield
    except Exception as exc:
        err = None if isinstance(exc, LedgerError) else translate(exc, what)
        if err is None:
            raise
        raise err from exc


def _on_error(ctx: Any) -> None:
    """``handle_error`` hook: a connection-level fault on *any* connection of the engine
    becomes StoreUnavailable (SQLAlchemy has already invalidated the connection, and the
    pool on a disconnect).  Other errors are translated by ``translate_errors`` where the
    store opens the connection (``connect``, ``transaction``, ``driver_cursor``)."""
    if ctx.is_pre_ping or ctx.original_exception is None:
        return
    err = translate(ctx.original_exception)
    if (isinstance(err, StoreUnavailable) and err.detail.get("sqlstate") not in
            _REFUSED_WRITE_STATES) or (err is not None and err.code == STORED_TEXT_UNREADABLE):
        raise err from ctx.sqlalchemy_exception or ctx.original_exception


# -- engines -------------------------------------------------------------------------------
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
        engine = _sqlite_engine(url, create, **kwargs)
    elif backend == "postgresql":
        kwargs.setdefault("pool_pre_ping", True)
        engine = create_engine(url, **kwargs)
    else:
        raise UsageError(f"unsupported database {backend!r}; use sqlite:/// or postgresql://",
                         code="bad_db_url", field="db")
    event.listen(engine, "handle_error", _on_error)
    return engine


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
        # a new file gets 8 KiB pages (ignored for an existing one): an entries row of a v2
        # ledger is ~1.1 KB, of which a 4 KiB page holds 3 -- a quarter of it left empty
        cur.execute("PRAGMA page_size=8192")
        cur.execute("PRAGMA journal_mode=WAL")
        cur.execute("PRAGMA synchronous=FULL")
        cur.execute("PRAGMA busy_timeout=60000")
        # erased payload bytes are overwritten with zeros in the main file and the WAL
        cur.execute("PRAGMA secure_delete=ON")
        cur.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Connection) -> None:
        write = conn.get_execution_options().get(WRITE_OPTION, False)
        conn.exec_driver_sql("BEGIN IMMEDIATE" if write else "BEGIN")

    return engine


# -- connections ---------------------------------------------------------------------------
@contextmanager
def connect(engine: Engine) -> Iterator[Connection]:
    """A SQLAlchemy connection for reads; driver errors are translated."""
    with translate_errors(), engine.connect() as conn:
        yield conn


@contextmanager
def transaction(engine: Engine) -> Iterator[Connection]:
    """The one way to open a write transaction on a SQLAlchemy connection: it takes the
    SQLite write lock at BEGIN, commits on success and rolls back on any error."""
    with translate_errors(), write_connection(engine) as conn, conn.begin():
        yield conn


def write_connection(engine: Engine) -> Connection:
    """A connection whose transactions take the SQLite write lock at BEGIN."""
    return engine.connect().execution_options(**{WRITE_OPTION: True})


@contextmanager
def driver_cursor(engine: Engine, what: str) -> Iterator[tuple[Any, Any]]:
    """(pooled DBAPI connection, its cursor), errors translated; the connection is
    invalidated (never reused) after a connection-level fault.  The caller ends its
    transaction; whatever is left open is rolled back when the connection goes back."""
    pg = is_pg(engine)
    with translate_errors(what):
        raw = engine.raw_connection()
    cur = raw.cursor()
    try:
        with translate_errors(what):
            yield raw, cur
    except StoreUnavailable as exc:
        _close_quietly(cur)
        raw.invalidate(exc.__cause__ if isinstance(exc.__cause__, Exception) else None)
        raw.close()
        raise
    except BaseException:
        _rollback(raw, cur, pg)
        _close_quietly(cur)
        raw.close()
        raise
    _close_quietly(cur)
    if pg:
        raw.rollback()  # end a read's implicit transaction (a no-op after COMMIT)
    raw.close()


def _rollback(raw: Any, cur: Any, pg: bool) -> None:
    with suppress(Exception):  # the original error is what matters
        if pg:
            raw.rollback()
        elif raw.driver_connection.in_transaction:
            cur.execute("ROLLBACK")


def _close_quietly(cur: Any) -> None:
    with suppress(Exception):  # a cursor of a lost connection
        cur.close()


# -- migrations ----------------------------------------------------------------------------
def migrations_dir() -> Path:
    # the top-level migrations/ directory, installed as ledger._migrations (package-dir in
    # pyproject.toml), a mapping mypy does not follow
    import ledger._migrations as m  # type: ignore[import-not-found]

    return Path(m.__file__).parent


def alembic_config(connection: Connection) -> Any:
    """Alembic's configuration for the ledger's migrations, run on ``connection``."""
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(migrations_dir()))
    cfg.attributes["connection"] = connection
    return cfg


def upgrade(engine: Engine, revision: str = "head") -> None:
    """Apply migrations up to ``revision``.  Raises StoreUnavailable if unreachable."""
    from alembic import command

    with translate_errors("migration"), write_connection(engine) as conn:
        command.upgrade(alembic_config(conn), revision)
        conn.commit()


def current_revision(engine: Engine) -> str | None:
    from alembic.runtime.migration import MigrationContext

    with connect(engine) as conn:
        return MigrationContext.configure(conn).get_current_revision()


def wal_checkpoint(engine: Engine) -> None:
    """SQLite: move the WAL into the main file and truncate it (``wal_checkpoint(TRUNCATE)``),
    so that bytes erased by a committed redaction (zeroed by ``secure_delete``) are gone
    from the WAL too.  A no-op on PostgreSQL (see docs/redaction.md for its WAL)."""
    if is_pg(engine):
        return
    with driver_cursor(engine, "WAL checkpoint") as (_raw, cur):
        cur.execute("PRAGMA wal_checkpoint(TRUNCATE)")
