"""The client never imports the server side, and only receipt.py calls PyJWT."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.test_layers import PKG, imports

SERVER_SIDE = ("sqlalchemy", "fastapi", "uvicorn", "starlette", "alembic", "psycopg",
               "ledger.store", "ledger.ops", "ledger.api", "ledger.cli", "ledger.facade")
CRYPTO = ("jwt", "cryptography")


def _hits(path: Path, prefixes: tuple[str, ...]) -> set[str]:
    return {m for m, _ in imports(path)
            if any(m == p or m.startswith(p + ".") for p in prefixes)}


def test_client_package_imports_no_server_side_and_one_crypto_module() -> None:
    for path in sorted((PKG / "client").glob("*.py")):
        assert not _hits(path, SERVER_SIDE), path.name
        if path.name != "receipt.py":
            assert not _hits(path, CRYPTO), f"{path.name}: crypto belongs in receipt.py"


def test_the_qwed_adapter_needs_neither_qwed_nor_the_server_at_import() -> None:
    path = PKG / "integrations" / "qwed.py"
    assert not _hits(path, SERVER_SIDE + CRYPTO)
    code = ("import sys, ledger.integrations.qwed as q; "
            "assert 'qwed_new' not in sys.modules; print(q.submission("
            "{'status': 'BLOCKED', 'agent_message': 'no'}, engine='SQL')['engine'])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60, check=True)
    assert out.stdout.strip() == "sql"
