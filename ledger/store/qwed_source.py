"""Read QWED 8.0's audit log (its ``verificationlog`` table) from QWED's own database.

Read-only: one ``SELECT`` of the table's columns, ordered by ``(organization_id, id)``
(QWED's chain order), streamed.  Columns an older QWED schema lacks (``api_key_id``,
``verifier_version``, ``admission``) read as None, as QWED reads them.  Timestamps
are returned as the driver gives them (SQLite: text; PostgreSQL: a datetime); the
chain check (ledger/core/qwed_log.py) spells them exactly as QWED does.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from sqlalchemy import BigInteger, Engine, MetaData, Table, create_engine, literal, or_, select
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError, NoSuchTableError, SQLAlchemyError

from ledger.errors import StoreUnavailable, UsageError
from ledger.store.codec import decode
from ledger.store.db import connect, normalize_url
from ledger.store.layout import META_SLOT, pid_col
from ledger.store.schema import entries, payloads

MAX_ID = 2**53 - 1  # ledger.core.canonical.MAX_SAFE_INTEGER: an import entry's head_id

TABLE = "verificationlog"
COLUMNS = ("id", "organization_id", "user_id", "query", "result", "is_verified", "domain",
           "timestamp", "entry_hash", "hmac_signature", "previous_hash", "raw_llm_output",
           "api_key_id", "verifier_version", "admission")
REQUIRED = ("id", "organization_id", "query", "result", "is_verified", "domain", "timestamp")


def redacted(url: str) -> str:
    """``url`` without its password (what an import records as its source)."""
    try:
        return make_url(url).render_as_string(hide_password=True)
    except (ValueError, SQLAlchemyError):
        return "<unparseable url>"


def read_rows(url: str, organization: int | None = None, page: int = 1000,
              ) -> Iterator[dict[str, Any]]:
    """Every ``verificationlog`` row (one organisation's if given) as a dict.

    Raises UsageError (no such table or column, or an ``id`` beyond ±(2^53-1), which
    the import entry could not record: checked by one query before the first row is
    given, so nothing is imported) or StoreUnavailable (cannot connect).
    """
    engine = create_engine(normalize_url(url))
    try:
        with engine.connect() as conn:
            try:
                table = Table(TABLE, MetaData(), autoload_with=conn)
            except NoSuchTableError:
                raise UsageError(f"no {TABLE} table at the QWED source", code="bad_source",
                                 field="source") from None
            missing = [c for c in REQUIRED if c not in table.c]
            if missing:
                raise UsageError(f"the {TABLE} table lacks columns {missing}",
                                 code="bad_source", field="source")
            _check_ids(conn, table, organization)
            present = [c for c in COLUMNS if c in table.c]
            stmt = select(*(table.c[c] for c in present)).order_by(
                table.c.organization_id, table.c.id)
            if organization is not None:
                stmt = stmt.where(table.c.organization_id == organization)
            result = conn.execution_options(yield_per=page).execute(stmt)
            for row in result:
                d = dict.fromkeys(COLUMNS)
                d.update(zip(present, row, strict=True))
                yield d
    except DBAPIError as exc:
        raise StoreUnavailable(f"cannot read the QWED database: {exc.orig}") from exc
    except SQLAlchemyError as exc:
        raise UsageError(f"cannot read the QWED source: {exc}", code="bad_source",
                         field="source") from exc
    finally:
        engine.dispose()


def _check_ids(conn: Any, table: Table, organization: int | None) -> None:
    # the bounds as bigint: an int4 id column (QWED's) would refuse them as its own type
    high, low = literal(MAX_ID, BigInteger()), literal(-MAX_ID, BigInteger())
    stmt = select(table.c.organization_id, table.c.id).where(
        or_(table.c.id > high, table.c.id < low)).order_by(
        table.c.organization_id, table.c.id).limit(1)
    if organization is not None:
        stmt = stmt.where(table.c.organization_id == organization)
    bad = conn.execute(stmt).first()
    if bad is not None:
        raise UsageError(
            f"QWED row id {bad.id} (organization {bad.organization_id}) is outside "
            f"±(2^53-1), the integers an import entry can record; nothing was imported",
            code="bad_source", field="id")


def imported_meta(engine: Engine, keys: list[str]) -> dict[str, bytes | None]:
    """For the keys the ledger already holds: key -> the entry's stored meta payload
    (what an import recorded as the row's provenance; None if it has none)."""
    out: dict[str, bytes | None] = {}
    with connect(engine) as conn:
        for start in range(0, len(keys), 500):
            chunk = keys[start:start + 500]
            # the meta payload of an entry (its slot META_SLOT)
            stmt = select(entries.c.idempotency_key, payloads.c.codec,
                          payloads.c.data).select_from(
                entries.outerjoin(payloads, payloads.c.pid == pid_col(entries.c.seq, META_SLOT))
            ).where(entries.c.idempotency_key.in_(chunk))
            for key, how, data in conn.execute(stmt):
                out[key] = decode(how, bytes(data)) if data is not None else None
    return out
