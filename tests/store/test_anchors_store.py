"""``checkpoint_anchors``: insert-only, one anchor per (size, kind, name), and migration
0007_anchors down and up again (SQLite and PostgreSQL)."""

from __future__ import annotations

import pytest
from alembic import command
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError

from ledger import Ledger
from ledger.store.anchors import (
    COSIGNATURE,
    TIMESTAMP,
    AnchorRow,
    add_anchor,
    anchors_of,
    last_cosigned_size,
    last_recorded_at,
)
from ledger.store.db import alembic_config, current_revision, make_engine, write_connection


@pytest.fixture
def ledger(db_url):
    with Ledger.init(db_url) as L:
        yield L


def test_one_anchor_per_size_kind_and_name(ledger):
    row = AnchorRow(5, COSIGNATURE, "w.example/1", "\u2014 w.example/1 AAAA\n", None, 1)
    assert add_anchor(ledger.engine, row) is True
    assert add_anchor(ledger.engine, AnchorRow(5, COSIGNATURE, "w.example/1", "other", None,
                                               2)) is False
    add_anchor(ledger.engine, AnchorRow(5, TIMESTAMP, "http://tsa", "MAA=", "42", 3))
    add_anchor(ledger.engine, AnchorRow(9, COSIGNATURE, "w.example/1", "x", None, 4))
    assert [(a.kind, a.data) for a in anchors_of(ledger.engine, 5)] == [
        (COSIGNATURE, row.data), (TIMESTAMP, "MAA=")]
    assert last_cosigned_size(ledger.engine, "w.example/1") == 9
    assert last_cosigned_size(ledger.engine, "w.example/2") is None


def test_last_recorded_at(ledger):
    assert last_recorded_at(ledger.engine, 0) is None
    ledger.append({"result": {"status": "BLOCKED", "agent_message": "x"}, "engine": "sql"})
    with ledger.engine.connect() as conn:
        want = conn.execute(text("SELECT recorded_at FROM entries WHERE seq = 0")).scalar()
    assert last_recorded_at(ledger.engine, 1) == want
    assert last_recorded_at(ledger.engine, 2) is None  # that entry is not there


@pytest.mark.parametrize("statement", ["UPDATE checkpoint_anchors SET data = 'x'",
                                       "DELETE FROM checkpoint_anchors"])
def test_anchors_are_insert_only(ledger, statement):
    add_anchor(ledger.engine, AnchorRow(1, COSIGNATURE, "w", "line", None, 1))
    with pytest.raises(DBAPIError, match="not allowed"), ledger.engine.begin() as conn:
        conn.execute(text(statement))


def test_downgrade_below_0007_and_upgrade_again(db_url):
    Ledger.init(db_url).close()
    engine = make_engine(db_url)
    try:
        with write_connection(engine) as conn:
            command.downgrade(alembic_config(conn), "0006")
            conn.commit()
        assert current_revision(engine) == "0006"
        with Ledger.init(db_url) as ledger:
            assert anchors_of(ledger.engine, 1) == []
        assert current_revision(engine) == "0013"  # head
    finally:
        engine.dispose()
