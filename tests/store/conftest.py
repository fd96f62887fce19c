"""Fixtures of the storage contract suite: an initialized ledger on every backend."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from ledger import Ledger
from ledger.clock import FixedClock
from tests.store.pgadmin import own_database

T0 = 1_767_225_600_000_000  # 2026-01-01T00:00:00Z in µs


@pytest.fixture
def ledger(db_url: str) -> Iterator[Ledger]:
    """An initialized ledger on the backend of ``db_url`` (SQLite and PostgreSQL)."""
    with Ledger.init(db_url, origin="test.example/store", clock=FixedClock(T0)) as L:
        yield L


@pytest.fixture
def own_pg(pg_database: str) -> Iterator[str]:
    """A PostgreSQL database of this test's own (its backends may be terminated)."""
    with own_database() as url:
        yield url
