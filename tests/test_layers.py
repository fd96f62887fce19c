"""The dependency rules of docs/architecture.md, read from the code with ``ast``.

Every import counts: at module level, inside functions, and under ``if TYPE_CHECKING:``
(a rule hidden behind ``TYPE_CHECKING`` is still a dependency).  The rules:

* ``core``   -> the standard library, ``core``, ``errors``, and orjson in ``core/fastjson.py``
  only (a pure JSON codec; that module proves it gives the standard library's results);
* ``crypto`` -> ``core``, ``errors``, ``clock``, cryptography, PyJWT, rfc3161-client;
* ``verify`` -> ``core``, ``crypto``, ``errors`` (offline: no database library);
* ``store``  -> ``errors``, ``store``, the database libraries and the migrations;
* ``ops``    -> ``core``, ``crypto``, ``verify``, ``store``, ``errors``, ``clock``, ``data``,
  and SQLAlchemy's ``Engine``/``Connection`` type names only; never the facade, the CLI or
  the HTTP layer;
* ``facade`` -> ``ops``, ``errors``, ``clock``;
* ``cli`` / ``api`` -> anything but ``store`` and each other;
* ``client`` (the producer library) -> the standard library, httpx, ``client``, ``errors``;
  never the server side (``store``, ``ops``, ``api``, ``cli``, the facade, SQLAlchemy, FastAPI);
  the reader modules (:data:`READER_MODULES`) may also import ``core``, ``crypto``,
  ``verify`` and ``clock``: they verify with the ledger's own checks, never a copy;
* ``integrations`` -> never ``store``, ``api`` or ``cli``;
* only ``crypto`` imports cryptography, PyJWT or rfc3161-client, and the client's one boundary module
  ``client/receipt.py`` (the client verifies receipts without the server's key code);
* no import cycle among the modules of ``ledger/``.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parent.parent / "ledger"
STDLIB = frozenset(sys.stdlib_module_names) | {"__future__"}
CRYPTO_LIBS = ("cryptography", "jwt", "rfc3161_client")
DB_LIBS = ("sqlalchemy", "alembic", "psycopg", "sqlite3")

# layer -> the ledger modules and third-party packages it may import (stdlib always)
ALLOWED: dict[str, tuple[str, ...]] = {
    "core": ("ledger.core", "ledger.errors"),
    "crypto": ("ledger.core", "ledger.crypto", "ledger.errors", "ledger.clock", *CRYPTO_LIBS),
    "verify": ("ledger.core", "ledger.crypto", "ledger.verify", "ledger.errors"),
    "store": ("ledger.store", "ledger.errors", "ledger._migrations", *DB_LIBS),
    "ops": ("ledger.core", "ledger.crypto", "ledger.verify", "ledger.store", "ledger.ops",
            "ledger.errors", "ledger.clock", "ledger.data"),
    "facade": ("ledger.ops", "ledger.errors", "ledger.clock"),
}
# layer -> names allowed exactly (not as a prefix): ops may name SQLAlchemy's connection
# types in signatures, and nothing else of it (statements are the store's)
EXACT: dict[str, frozenset[str]] = {
    "ops": frozenset({"sqlalchemy", "sqlalchemy.Engine", "sqlalchemy.Connection"}),
}
# core modules allowed one third-party package, with the reason: fastjson wraps orjson and
# falls back to (and is property-tested against) the standard library's json
CORE_EXTRA: dict[str, tuple[str, ...]] = {"core/fastjson.py": ("orjson",)}
# layer -> what it must never import (for the layers with an open list)
FORBIDDEN: dict[str, tuple[str, ...]] = {
    "cli": ("ledger.store", "ledger.api", *CRYPTO_LIBS),
    "api": ("ledger.store", "ledger.cli", *CRYPTO_LIBS),
    "demo": ("ledger.store", "ledger.cli", "ledger.api"),
    "client": ("ledger.store", "ledger.ops", "ledger.api", "ledger.cli", "ledger.facade",
               "ledger.core", "ledger.crypto", "ledger.verify", "sqlalchemy", "fastapi",
               "uvicorn"),
    "integrations": ("ledger.store", "ledger.api", "ledger.cli", "sqlalchemy", "fastapi"),
}
# the reader client's modules: they verify what they read with the ledger's own code
# (read checks, Merkle proofs, notes, signatures), so they may import these packages; the
# producer client's modules keep the narrower rule (never core, crypto or verify)
READER_MODULES = frozenset({"client/reader.py", "client/reader_aio.py",
                            "client/reader_core.py", "client/reader_http.py",
                            "client/reader_tiles.py",
                            "client/trust_state.py"})
READER_ALLOWED = ("ledger.core", "ledger.crypto", "ledger.verify", "ledger.clock")
# modules outside crypto/ allowed to call cryptography/PyJWT, with the reason
CRYPTO_BOUNDARIES = {"client/receipt.py": "the producer client's own receipt check"}


def module_name(path: Path) -> str:
    rel = path.relative_to(PKG.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports(path: Path) -> Iterator[tuple[str, bool]]:
    """(absolute module name, under TYPE_CHECKING) for every import in ``path``;
    ``from ledger.store import db`` yields ``ledger.store`` and ``ledger.store.db``."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    package = module_name(path).split(".")
    if path.name != "__init__.py":
        package = package[:-1]
    guarded: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            guarded.update(id(n) for child in node.body for n in ast.walk(child))
    for node in ast.walk(tree):
        under = id(node) in guarded
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, under
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[:len(package) - node.level + 1]
                module = ".".join([*base, *([node.module] if node.module else [])])
            else:
                module = node.module or ""
            yield module, under
            for alias in node.names:
                if alias.name != "*":
                    yield f"{module}.{alias.name}", under


def _matches(module: str, prefix: str) -> bool:
    return module == prefix or module.startswith(prefix + ".")


def layer_of(path: Path) -> str:
    rel = path.relative_to(PKG)
    if len(rel.parts) > 1:
        return rel.parts[0]
    return "demo" if rel.stem.startswith("demo") else rel.stem  # demo.py, demo_anchors.py


def _modules() -> list[Path]:
    return sorted(p for p in PKG.rglob("*.py") if "__pycache__" not in p.parts)


def _is_submodule_name(name: str) -> bool:
    """``from ledger.store import db`` names a module; ``from ledger.errors import X``
    names a class: only real module files count as edges."""
    rel = Path(*name.split(".")[1:])
    return (PKG / rel).with_suffix(".py").is_file() or (PKG / rel / "__init__.py").is_file()


def _violations(path: Path) -> list[str]:
    layer = layer_of(path)
    bad = []
    for module, _ in imports(path):
        top = module.split(".")[0]
        if top in STDLIB or module == "ledger":
            continue
        if module.startswith("ledger.") and not _is_submodule_name(module):
            continue
        if module in EXACT.get(layer, ()):
            continue
        if top in CORE_EXTRA.get(str(path.relative_to(PKG)), ()):
            continue
        if str(path.relative_to(PKG)) in READER_MODULES and \
                any(_matches(module, p) for p in READER_ALLOWED):
            continue
        if layer in ALLOWED:
            if not any(_matches(module, p) for p in ALLOWED[layer]):
                bad.append(module)
        elif any(_matches(module, p) for p in FORBIDDEN.get(layer, ())):
            bad.append(module)
        elif layer == "client" and module.split(".")[0] in CRYPTO_LIBS and \
                str(path.relative_to(PKG)) not in CRYPTO_BOUNDARIES:
            bad.append(module)
    return sorted(set(bad))


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(PKG)))
def test_module_keeps_its_layers_rules(path):
    bad = _violations(path)
    assert not bad, f"ledger/{path.relative_to(PKG)} ({layer_of(path)}) imports {bad}"


def test_only_crypto_imports_cryptography_or_jwt():
    users = sorted(str(p.relative_to(PKG)) for p in _modules() if layer_of(p) != "crypto"
                   and str(p.relative_to(PKG)) not in CRYPTO_BOUNDARIES
                   and any(m.split(".")[0] in CRYPTO_LIBS for m, _ in imports(p)))
    assert users == []


def test_type_checking_imports_are_counted_and_none_are_left():
    """A ``TYPE_CHECKING`` import hides a dependency; the layer rules count them, and
    the package has none left (a cycle it would hide is a design problem)."""
    guarded = sorted(f"{p.relative_to(PKG)}: {m}" for p in _modules()
                     for m, under in imports(p) if under)
    assert guarded == []


def import_graph() -> dict[str, set[str]]:
    names = {module_name(p): p for p in _modules()}
    graph: dict[str, set[str]] = {}
    for name, path in names.items():
        # a module's own ancestor packages are not edges: importing a sibling
        # (``from ledger.api import errors``) runs ``ledger/api/__init__`` by construction
        graph[name] = {m for m, _ in imports(path) if m in names and m != name
                       and not name.startswith(m + ".")}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    sys.setrecursionlimit(max(10_000, sys.getrecursionlimit()))

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_no_import_cycle_inside_the_package():
    assert cycles(import_graph()) == []


def test_cycle_finder_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_imports_resolves_relative_from_and_guarded_imports():
    probe = PKG / "ops" / "_layer_probe.py"
    probe.write_text("from typing import TYPE_CHECKING\nfrom . import read\n"
                     "from ..store import db\nif TYPE_CHECKING:\n    import ledger.facade\n",
                     encoding="utf-8")
    try:
        got = dict(imports(probe))
    finally:
        probe.unlink()
    assert got["ledger.ops.read"] is False
    assert got["ledger.store.db"] is False
    assert got["ledger.facade"] is True


def test_ops_may_name_sqlalchemy_types_but_not_build_statements():
    probe = PKG / "ops" / "_layer_probe.py"
    probe.write_text("from sqlalchemy import Engine, select\n", encoding="utf-8")
    try:
        assert _violations(probe) == ["sqlalchemy.select"]
    finally:
        probe.unlink()


def test_rules_catch_a_violation():
    """The checker itself: a core module importing sqlalchemy is reported."""
    fake = PKG / "core" / "_layer_probe.py"
    fake.write_text("import sqlalchemy\nfrom ledger.store import db\n", encoding="utf-8")
    try:
        assert _violations(fake) == ["ledger.store", "ledger.store.db", "sqlalchemy"]
    finally:
        fake.unlink()


def test_the_reader_exception_is_narrow():
    """The producer client's modules still may not import core/crypto/verify, and the
    reader modules may not import the server side or call cryptography themselves."""
    probe = PKG / "client" / "_layer_probe.py"
    probe.write_text("from ledger.core import readcheck\nfrom ledger.verify import proof\n",
                     encoding="utf-8")
    try:
        assert _violations(probe) == ["ledger.core", "ledger.core.readcheck", "ledger.verify",
                                      "ledger.verify.proof"]
    finally:
        probe.unlink()
    for name in READER_MODULES:
        bad = [m for m, _ in imports(PKG / name)
               if m.split(".")[0] in CRYPTO_LIBS or any(_matches(m, p) for p in (
                   "ledger.store", "ledger.ops", "ledger.api", "ledger.cli", "ledger.facade"))]
        assert bad == [], name
