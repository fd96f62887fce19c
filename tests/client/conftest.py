"""A real ``ledger serve`` per backend for the client tests (restartable, fixed port)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator

import pytest
from sqlalchemy import create_engine, text

from tests.api.server import ROOT
from tests.client.server import LedgerServer
from tests.conftest import ENGINES
from tests.conftest import engine_url as fresh_db_url


@pytest.fixture(scope="module", params=ENGINES)
def ledger_server(request: pytest.FixtureRequest,
                  tmp_path_factory: pytest.TempPathFactory) -> Iterator[LedgerServer]:
    kind = request.param
    tmp = tmp_path_factory.mktemp(f"client-{kind}")
    srv = LedgerServer(fresh_db_url(kind, request, tmp), tmp, f"test.example/client-{kind}")
    srv.start()
    yield srv
    srv.stop()


@pytest.fixture
def server(ledger_server: LedgerServer) -> Iterator[LedgerServer]:
    """The module's server, running at the start and restarted after each test."""
    if ledger_server.proc is None or ledger_server.proc.poll() is not None:
        ledger_server.start()
    yield ledger_server
    if ledger_server.proc is None or ledger_server.proc.poll() is not None:
        ledger_server.start()


def result_keys(db_url: str) -> list[str]:
    """Idempotency keys of every result entry, in seq order."""
    eng = create_engine(db_url.replace("postgresql://", "postgresql+psycopg://", 1))
    try:
        with eng.connect() as conn:
            return [r[0] for r in conn.execute(text(
                "SELECT idempotency_key FROM entries WHERE kind = 'result' ORDER BY seq"))]
    finally:
        eng.dispose()


def audit_exit(db_url: str) -> int:
    return subprocess.run([sys.executable, "-m", "ledger", "--db", db_url, "audit"],
                          capture_output=True, timeout=120, cwd=ROOT, check=False).returncode
