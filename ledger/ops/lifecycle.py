"""Creating and opening a ledger: the use cases that produce a ``LedgerContext``."""

from __future__ import annotations

import uuid

from ledger.clock import Clock, SystemClock
from ledger.core.entry import FORMAT_VERSION, genesis_hash
from ledger.core.note import check_origin
from ledger.errors import NotInitialized
from ledger.ops.context import LedgerContext
from ledger.store import codec, db
from ledger.store import entries as repo

# the driver errors the HTTP service answers as "unavailable" when one arrives untranslated
# (ledger.api.app, which may not import the store)
RAW_CONNECTION_ERRORS = db.RAW_CONNECTION_ERRORS

NOT_INITIALIZED = "the ledger is not initialized here; run `ledger init`"


def init_ledger(url: str | None = None, *, origin: str | None = None,
                clock: Clock | None = None) -> LedgerContext:
    """Create the schema (migrations) and the ledger identity if absent; idempotent.

    Raises UsageError (``bad_origin``) for an origin no signing key can be named after."""
    if origin is not None:
        check_origin(origin)
    codec.write_codec()  # a bad LEDGER_PAYLOAD_CODEC fails here, not at the first append
    clock = clock or SystemClock()
    engine = db.make_engine(url or db.default_url(), create=True)
    try:
        db.upgrade(engine)
        with db.transaction(engine) as conn:
            meta = repo.read_meta(conn)
            if meta is None:
                ledger_id = str(uuid.uuid4())
                meta = repo.LedgerMeta(ledger_id, origin or f"ledger/{ledger_id}",
                                       FORMAT_VERSION, clock.now_us())
                repo.create_meta(conn, meta, genesis_hash(ledger_id))
    except BaseException:
        engine.dispose()
        raise
    return LedgerContext(engine, meta, clock)


def open_ledger(url: str | None = None, *, clock: Clock | None = None) -> LedgerContext:
    """Open an initialized ledger.  Raises NotInitialized or StoreUnavailable, and
    UsageError for a bad ``LEDGER_PAYLOAD_CODEC`` (before anything is appended)."""
    codec.write_codec()
    engine = db.make_engine(url or db.default_url())
    try:
        with db.connect(engine) as conn:
            meta = repo.read_meta(conn) if repo.has_schema(conn) else None
    except BaseException:
        engine.dispose()
        raise
    if meta is None:
        engine.dispose()
        raise NotInitialized(NOT_INITIALIZED)
    return LedgerContext(engine, meta, clock or SystemClock())


def default_url() -> str:
    """The database URL when none is given: ``$LEDGER_DB_URL`` or ``./ledger.db``."""
    return db.default_url()


def upgrade_schema(url: str, revision: str = "head") -> str | None:
    """Apply schema migrations up to ``revision``; return the revision now current."""
    engine = db.make_engine(url)
    try:
        db.upgrade(engine, revision)
        return db.current_revision(engine)
    finally:
        engine.dispose()


def schema_revision(url: str) -> str | None:
    """The schema revision of the database at ``url`` (None before the first)."""
    engine = db.make_engine(url)
    try:
        return db.current_revision(engine)
    finally:
        engine.dispose()
