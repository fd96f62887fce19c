"""QWED-side fixtures: a VerificationLog written by QWED's own AuditLogger (in a process
of its own, as QWED reads DATABASE_URL at import) on SQLite or PostgreSQL."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from click.testing import CliRunner
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from ledger.cli.main import cli
from tests.api.server import ROOT

pytest.importorskip("qwed_new", reason="the real producer: pip install -e '.[dev]' (qwed 8.0.0)")

SECRET = "qwed-audit-secret-for-tests"
ISSUER = "did:qwed:node:test"
JWKS = ROOT / "tests" / "data" / "qwed_issuer_jwks.json"


def write_qwed_log(url: str, rounds: int) -> None:
    env = {**os.environ, "DATABASE_URL": url, "QWED_AUDIT_SECRET_KEY": SECRET,
           "PYTHONHASHSEED": "0"}
    for var in ("QWED_SIGNING_KEY", "QWED_SIGNING_KEY_FILE"):
        env.pop(var, None)
    subprocess.run([sys.executable, "-m", "tests.integrations.qwed_audit_writer", str(rounds)],
                   env=env, cwd=ROOT, check=True, capture_output=True, timeout=180)


def qwed_pg_url(pg_database: str) -> str:
    schema = f"qwed_{uuid.uuid4().hex[:10]}"
    eng = create_engine(pg_database, isolation_level="AUTOCOMMIT")
    with eng.connect() as conn:
        conn.execute(text(f'CREATE SCHEMA "{schema}"'))
    eng.dispose()
    return make_url(pg_database).update_query_dict(
        {"options": f"-csearch_path={schema}"}).render_as_string(hide_password=False)


@pytest.fixture(scope="module")
def qwed_sqlite(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A QWED database (SQLite) with 2 rounds x 8 results x 2 organisations (32 rows);
    tests copy it before changing it."""
    path = tmp_path_factory.mktemp("qwed") / "qwed.db"
    write_qwed_log(f"sqlite:///{path}", 2)
    return str(path)


def ledger_cli(db_url: str, *args: str) -> tuple[int, str, str]:
    r = CliRunner().invoke(cli, ["--db", db_url, *args], catch_exceptions=False)
    return r.exit_code, r.stdout, r.stderr


def new_ledger(db_url: str) -> None:
    assert ledger_cli(db_url, "init", "--origin", "test.example/qwed-import")[0] == 0
    code, _, err = ledger_cli(db_url, "keys", "trust", "--issuer", ISSUER, "--jwks", str(JWKS),
                              "--reason", "QWED test issuer")
    assert code == 0, err


def secret_file(tmp: Path, value: str = SECRET) -> str:
    p = tmp / "secret"
    p.write_text(value + "\n")
    return str(p)


def audit(db_url: str, tmp: Path) -> tuple[int, dict]:
    out = tmp / f"audit-{uuid.uuid4().hex[:6]}.json"
    code, _, _ = ledger_cli(db_url, "audit", "--json-report", str(out))
    return code, json.loads(out.read_text())
