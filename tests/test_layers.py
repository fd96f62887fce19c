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
* ``service`` (the machinery of the ``ledger serve`` process: scheduler, leader election,
  anchoring jobs, alerts, metrics) -> the facade, ``ops`` (faces and types), ``core``,
  ``crypto``, ``errors``, ``clock``, ``service``, httpx and prometheus-client; never
  ``store``, ``cli`` or ``api`` (``api`` wires it, not the other way round), no database
  library, and never ``Ledger.ctx``;
* ``client`` (the producer library) -> the standard library, httpx, ``client``, ``errors``;
  never the server side (``store``, ``ops``, ``api``, ``cli``, the facade, SQLAlchemy, FastAPI);
  the reader modules (:data:`READER_MODULES`) may also import ``core``, ``crypto``,
  ``verify`` and ``clock``: they verify with the ledger's own checks, never a copy;
* ``integrations`` -> never ``store``, ``api`` or ``cli``;
* ``report`` (the HTML report's rendering) -> ``report`` and ``ops/report.py`` (the figures
  it renders and their constants) only: no store, no other use case, no facade;
* ``witness`` (the tlog-witness service) -> ``core``, ``crypto``, ``errors``, ``witness``, its
  own state table ``store/witness_state.py`` and FastAPI/Starlette; never the ledger's
  ``ops``, the facade, ``api`` or ``cli``;
* ``cli`` and ``api`` import no database library; they and the demo (``demo/``) never
  reach into ``Ledger.ctx`` (an attribute access ``.ctx`` anywhere in them): they call the
  facade;
* a family of ``ops`` (a package ``ops/<family>/``, :data:`FAMILIES`) is used through its
  face, ``ops/<family>/__init__.py``: no module outside the family imports its other
  (private) modules, and the facade imports only top-level ``ops`` modules and faces;
* only ``crypto`` imports cryptography, PyJWT or rfc3161-client, and the client's one boundary module
  ``client/receipt.py`` (the client verifies receipts without the server's key code);
* no import cycle among the modules of ``ledger/``;
* one place per fact: the payload table's layout (a payload row's key from its entry's
  seq and its slot, and back) is computed only in ``store/layout.py``, in Python and in SQL
  text alike (:data:`LAYOUT_HOME`); the demo, which tampers its own SQLite copies by key,
  may import that one pure module of the store (:data:`LAYOUT_USERS`);
* ``ops`` never reads the wall clock (``time.time()``, ``datetime.now()``, a
  ``SystemClock`` of its own): recorded and reported times come from the context's
  injected clock; timers for durations (``time.monotonic``, ``time.perf_counter``) are
  fine.
"""

from __future__ import annotations

import ast
import re
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
    "witness": ("ledger.core", "ledger.crypto", "ledger.errors", "ledger.witness",
                "ledger.store.witness_state", "fastapi", "starlette"),
    "service": ("ledger.facade", "ledger.ops", "ledger.core", "ledger.crypto", "ledger.errors",
                "ledger.clock", "ledger.service", "httpx", "prometheus_client"),
    # the HTML report renders the figures ops/report.py gathers: pure, no ledger access
    "report": ("ledger.report", "ledger.ops.report"),
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
    "cli": ("ledger.store", "ledger.api", *CRYPTO_LIBS, *DB_LIBS),
    "api": ("ledger.store", "ledger.cli", *CRYPTO_LIBS, *DB_LIBS),
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
# the families of ops/: packages whose __init__ is the face, the rest private
FAMILIES = ("append", "audit", "checkpoint", "custody", "reverify")
# layers that reach a ledger through the facade only, never through Ledger.ctx
NO_CTX = ("cli", "api", "service", "demo")
# the one home of the payload table's layout, and the layers outside the store that may
# import it: it is pure (no database access, no statement run), and the demo tampers its
# own SQLite copies with raw SQL by key
LAYOUT_HOME = "store/layout.py"
LAYOUT_USERS = ("demo",)


def _rel(path: Path, rel: Path | None = None) -> Path:
    """``path`` relative to the package; a probe written elsewhere (in ``tmp_path``) says
    where it stands in the package with ``rel``."""
    return rel if rel is not None else path.relative_to(PKG)


def module_name(path: Path, rel: Path | None = None) -> str:
    parts = ["ledger", *_rel(path, rel).with_suffix("").parts]
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports(path: Path, rel: Path | None = None) -> Iterator[tuple[str, bool]]:
    """(absolute module name, under TYPE_CHECKING) for every import in ``path``;
    ``from ledger.store import db`` yields ``ledger.store`` and ``ledger.store.db``."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    package = module_name(path, rel).split(".")
    if _rel(path, rel).name != "__init__.py":
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


def layer_of(path: Path, rel: Path | None = None) -> str:
    rel = _rel(path, rel)
    if len(rel.parts) > 1:
        return rel.parts[0]
    return "demo" if rel.stem.startswith("demo") else rel.stem  # (a probe named demo_*.py)


def _modules() -> list[Path]:
    return sorted(p for p in PKG.rglob("*.py") if "__pycache__" not in p.parts)


def _is_submodule_name(name: str) -> bool:
    """``from ledger.store import db`` names a module; ``from ledger.errors import X``
    names a class: only real module files count as edges."""
    rel = Path(*name.split(".")[1:])
    return (PKG / rel).with_suffix(".py").is_file() or (PKG / rel / "__init__.py").is_file()


def _violations(path: Path, rel: Path | None = None) -> list[str]:
    layer = layer_of(path, rel)
    where = str(_rel(path, rel))
    bad = []
    for module, _ in imports(path, rel):
        top = module.split(".")[0]
        if top in STDLIB or module == "ledger":
            continue
        if module.startswith("ledger.") and not _is_submodule_name(module):
            continue
        if module in EXACT.get(layer, ()):
            continue
        if top in CORE_EXTRA.get(where, ()):
            continue
        if module == "ledger.store.layout" and layer in LAYOUT_USERS:
            continue
        if where in READER_MODULES and \
                any(_matches(module, p) for p in READER_ALLOWED):
            continue
        if layer in ALLOWED:
            if not any(_matches(module, p) for p in ALLOWED[layer]):
                bad.append(module)
        elif any(_matches(module, p) for p in FORBIDDEN.get(layer, ())):
            bad.append(module)
        elif layer == "client" and module.split(".")[0] in CRYPTO_LIBS and \
                where not in CRYPTO_BOUNDARIES:
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


def _probe(tmp_path: Path, rel: str, text: str) -> tuple[Path, Path]:
    """A probe module standing at ``ledger/<rel>``, written in ``tmp_path`` (never into
    the package)."""
    path = tmp_path / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path, Path(rel)


def test_imports_resolves_relative_from_and_guarded_imports(tmp_path):
    probe = _probe(tmp_path, "ops/_layer_probe.py",
                   "from typing import TYPE_CHECKING\nfrom . import read\n"
                   "from ..store import db\nif TYPE_CHECKING:\n    import ledger.facade\n")
    got = dict(imports(*probe))
    assert got["ledger.ops.read"] is False
    assert got["ledger.store.db"] is False
    assert got["ledger.facade"] is True


def test_ops_may_name_sqlalchemy_types_but_not_build_statements(tmp_path):
    probe = _probe(tmp_path, "ops/_layer_probe.py", "from sqlalchemy import Engine, select\n")
    assert _violations(*probe) == ["sqlalchemy.select"]


def test_rules_catch_a_violation(tmp_path):
    """The checker itself: a core module importing sqlalchemy is reported."""
    probe = _probe(tmp_path, "core/_layer_probe.py",
                   "import sqlalchemy\nfrom ledger.store import db\n")
    assert _violations(*probe) == ["ledger.store", "ledger.store.db", "sqlalchemy"]


def test_the_reader_exception_is_narrow(tmp_path):
    """The producer client's modules still may not import core/crypto/verify, and the
    reader modules may not import the server side or call cryptography themselves."""
    probe = _probe(tmp_path, "client/_layer_probe.py",
                   "from ledger.core import readcheck\nfrom ledger.verify import proof\n")
    assert _violations(*probe) == ["ledger.core", "ledger.core.readcheck", "ledger.verify",
                                   "ledger.verify.proof"]
    for name in READER_MODULES:
        bad = [m for m, _ in imports(PKG / name)
               if m.split(".")[0] in CRYPTO_LIBS or any(_matches(m, p) for p in (
                   "ledger.store", "ledger.ops", "ledger.api", "ledger.cli", "ledger.facade"))]
        assert bad == [], name


# -- the families of ops/ -----------------------------------------------------------------
def _family_of(module: str) -> str | None:
    """The family whose *private* module ``module`` is (``ledger.ops.<family>.<name>``
    naming a module file), else None: a face, or a name the face exports, is not private."""
    parts = module.split(".")
    if len(parts) < 4 or parts[:2] != ["ledger", "ops"] or parts[2] not in FAMILIES:
        return None
    return parts[2] if _is_submodule_name(".".join(parts[:4])) else None


def private_imports(path: Path, rel: Path | None = None) -> list[str]:
    """The private modules of families that ``path`` imports from outside the family."""
    rel = _rel(path, rel)
    own = rel.parts[1] if rel.parts[0] == "ops" and len(rel.parts) > 2 else None
    return sorted({".".join(m.split(".")[:4]) for m, _ in imports(path, rel)
                   if (fam := _family_of(m)) is not None and fam != own})


def facade_ops_imports(path: Path, rel: Path | None = None) -> list[str]:
    """The ``ops`` modules ``path`` imports below the top level of ``ops`` (a family's
    private module, or any module of a package that is not a face)."""
    return sorted({m for m, _ in imports(path, rel) if m.startswith("ledger.ops.")
                   and len(m.split(".")) > 3 and _is_submodule_name(m)})


def ctx_uses(path: Path) -> list[int]:
    """Lines of ``path`` that read an attribute named ``ctx`` (``ledger.ctx``,
    ``service.reader.ctx``): the facade's context, which only ``ops`` may handle."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    return sorted({n.lineno for n in ast.walk(tree)
                   if isinstance(n, ast.Attribute) and n.attr == "ctx"})


def test_the_families_of_ops_are_packages_with_a_face():
    found = sorted(p.parent.name for p in (PKG / "ops").glob("*/__init__.py"))
    assert found == sorted(FAMILIES)


def test_a_face_binds_no_name_of_its_private_modules():
    """``from ledger.ops.<family> import <name>`` names either the face's export or a
    private module, never something that could be both."""
    for family in FAMILIES:
        face = PKG / "ops" / family / "__init__.py"
        tree = ast.parse(face.read_text(encoding="utf-8"))
        bound = {a.asname or a.name for n in ast.walk(tree)
                 if isinstance(n, (ast.Import, ast.ImportFrom)) for a in n.names}
        bound |= {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
        private = {p.stem for p in face.parent.glob("*.py")} - {"__init__"}
        assert bound & private == set(), family


def test_nobody_outside_a_family_imports_its_private_modules():
    bad = {str(p.relative_to(PKG)): got for p in _modules() if (got := private_imports(p))}
    assert bad == {}


def test_the_facade_imports_only_family_faces_and_top_level_ops_modules():
    assert facade_ops_imports(PKG / "facade.py") == []


def test_cli_api_and_demo_never_touch_the_ledger_context():
    bad = {str(p.relative_to(PKG)): lines for p in _modules()
           if layer_of(p) in NO_CTX and (lines := ctx_uses(p))}
    assert bad == {}


def test_a_private_module_imported_from_outside_its_family_is_reported(tmp_path):
    text = ("from ledger.ops.append import AppendResult\n"  # the face: allowed
            "from ledger.ops.append.writer import commit_batch\n"
            "from ledger.ops.checkpoint import tree\n")
    assert private_imports(*_probe(tmp_path, "ops/_layer_probe.py", text)) == [
        "ledger.ops.append.writer", "ledger.ops.checkpoint.tree"]
    # inside its own family the same import is the family's business
    assert private_imports(*_probe(tmp_path, "ops/append/_layer_probe.py", text)) == [
        "ledger.ops.checkpoint.tree"]


def test_a_facade_importing_a_private_module_is_reported(tmp_path):
    probe = _probe(tmp_path, "facade.py", "from ledger.ops import read\n"
                   "from ledger.ops import checkpoint as checkpoint_ops\n"
                   "from ledger.ops.audit import walk\n")
    assert facade_ops_imports(*probe) == ["ledger.ops.audit.walk"]


def test_reaching_into_the_context_is_reported(tmp_path):
    path, _ = _probe(tmp_path, "api/_layer_probe.py",
                     "def f(request, ctx):\n"
                     "    ctx.obj = 1\n"  # a click context named ctx: not Ledger.ctx
                     "    return request.app.state.service.reader.ctx.engine\n")
    assert ctx_uses(path) == [3]


def test_the_demo_modules_keep_the_context_rule(tmp_path):
    """A module ``ledger/demo_<name>.py`` is of the demo layer, which the rule covers."""
    path, rel = _probe(tmp_path, "demo_layer_probe.py",
                       "def f(ledger):\n    return ledger.ctx.engine\n")
    assert layer_of(path, rel) == "demo" and "demo" in NO_CTX
    assert ctx_uses(path) == [2]


def test_cli_and_api_may_not_import_a_database_library(tmp_path):
    for layer in ("cli", "api"):  # (the demo edits copies of its SQLite file with sqlite3)
        probe = _probe(tmp_path, f"{layer}/_layer_probe.py",
                       "from sqlalchemy.exc import OperationalError\nimport psycopg\n")
        assert _violations(*probe) == ["psycopg", "sqlalchemy.exc",
                                       "sqlalchemy.exc.OperationalError"], layer


def test_the_witness_rule(tmp_path):
    probe = _probe(tmp_path, "witness/_layer_probe.py",
                   "from ledger.store.witness_state import WitnessState\n"
                   "from ledger.store import db\nfrom ledger.ops import read\n"
                   "from ledger.facade import Ledger\nimport fastapi\n")
    assert _violations(*probe) == ["ledger.facade", "ledger.ops", "ledger.ops.read",
                                   "ledger.store", "ledger.store.db"]


def test_the_service_rule(tmp_path):
    """The service process's machinery may use the facade, ops, core and crypto, never
    the store, the CLI or the HTTP layer that wires it (nor a database library)."""
    probe = _probe(tmp_path, "service/_layer_probe.py",
                   "from ledger.facade import Ledger\nfrom ledger.ops.audit import AuditOptions\n"
                   "from ledger.core import alert\nfrom ledger.service import metrics\n"
                   "import httpx\nimport prometheus_client\n"
                   "from ledger.store import db\nfrom ledger.api import routes_read\n"
                   "from ledger.cli import serve\nimport sqlalchemy\nimport fastapi\n")
    assert _violations(*probe) == ["fastapi", "ledger.api", "ledger.api.routes_read",
                                   "ledger.cli", "ledger.cli.serve", "ledger.store",
                                   "ledger.store.db", "sqlalchemy"]
    path, _ = probe
    path.write_text("def f(ledger):\n    return ledger.ctx.engine\n", encoding="utf-8")
    assert ctx_uses(path) == [2]


def test_the_http_layer_keeps_no_process_machinery():
    """The scheduler, leader election, anchoring, alerts and metrics live in ``service/``;
    ``api/`` may use them, ``service/`` never imports ``api/``."""
    assert not any((PKG / "api" / f"{name}.py").exists()
                   for name in ("watch", "anchoring", "alerts", "metrics"))
    back = sorted(f"{p.relative_to(PKG)}: {m}" for p in (PKG / "service").glob("*.py")
                  for m, _ in imports(p) if _matches(m, "ledger.api"))
    assert back == []
def test_the_report_rule(tmp_path):
    """The HTML report renders figures: it reads nothing itself, and ops never renders."""
    probe = _probe(tmp_path, "report/_layer_probe.py",
                   "from ledger.ops.report import MAX_SERIES\nfrom ledger.report import markup\n"
                   "from ledger.store import db\nfrom ledger.ops import read\n"
                   "from ledger.facade import Ledger\nimport sqlalchemy\n")
    assert _violations(*probe) == ["ledger.facade", "ledger.ops", "ledger.ops.read",
                                   "ledger.store", "ledger.store.db", "sqlalchemy"]
    probe = _probe(tmp_path, "ops/_layer_probe.py", "from ledger.report import render_html\n")
    assert _violations(*probe) == ["ledger.report"]


# -- one place per fact -------------------------------------------------------------
# The payload table's layout written out: multiplying or dividing by the slot count (the
# literal 8 or the name SLOT_COUNT), taking it modulo, or its bit forms (>> 3, & 7), in code,
# SQL text, comments and docstrings alike (a comment that restates it goes stale with it).
# The factor first counts when a seq or a size follows (``8 * 1024`` is a size in bytes).
_LAYOUT = re.compile(r"[*/%]\s*(?:8|SLOT_COUNT)\b|\b(?:8|SLOT_COUNT)\s*\*\s*[\w.]*(?:seq|size)"
                     r"|>>\s*3\b|&\s*7\b|divmod\([^)]*SLOT_COUNT")


def layout_restated(path: Path, rel: Path | None = None) -> list[int]:
    """The lines of ``path`` that write the payload layout out (none in its home)."""
    if str(_rel(path, rel)) == LAYOUT_HOME:
        return []
    return [n for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
            if _LAYOUT.search(line)]


def test_the_payload_layout_has_one_home():
    found = {str(p.relative_to(PKG)): lines for p in _modules()
             if (lines := layout_restated(p))}
    assert found == {}, f"the payload layout is written out outside {LAYOUT_HOME}: {found}"


def test_a_restated_layout_is_reported(tmp_path):
    text = ("base = seq * 8 + slot\n"
            "WHERE = text('pid % 8 = 5')\n"
            "seq = pid // SLOT_COUNT\n"
            "SQL = 'SELECT g.size * 8 + v.s'\n"
            "slot = pid & 7\n"
            "seq, slot = divmod(pid, SLOT_COUNT)\n"
            "ttl = 366 * 86_400\n"  # not the layout
            "big = 8 * 1024 * 1024\n")
    assert layout_restated(*_probe(tmp_path, "store/_layout_probe.py", text)) == [1, 2, 3, 4,
                                                                                  5, 6]
    assert layout_restated(*_probe(tmp_path, "ops/_layout_probe.py", "lo = 8 * seq\n")) == [1]
    assert layout_restated(*_probe(tmp_path, LAYOUT_HOME, text)) == []


def test_the_demo_may_import_the_layout_and_nothing_else_of_the_store(tmp_path):
    probe = _probe(tmp_path, "demo_layer_probe.py",
                   "from ledger.store.layout import pid\nfrom ledger.store import layout\n"
                   "from ledger.store.db import connect\n")
    assert _violations(*probe) == ["ledger.store", "ledger.store.db"]
    probe = _probe(tmp_path, "cli/_layer_probe.py", "from ledger.store.layout import pid\n")
    assert _violations(*probe) == ["ledger.store.layout"]


# -- the injected clock -------------------------------------------------------------
# ops reads time only from ctx.clock; where a context is built (the default clock) it may
# name SystemClock
CLOCK_MAKERS = frozenset({"ops/context.py", "ops/lifecycle.py"})
_WALL_CALLS = frozenset({"time", "time_ns", "now", "utcnow", "today", "localtime", "gmtime",
                         "ctime", "asctime"})
_WALL_OWNERS = ("time", "datetime", "date", "dt")


def wall_clock_reads(path: Path, rel: Path | None = None) -> list[str]:
    """``line: call`` for every direct read of the wall clock in ``path``: a call of
    ``time.time()``, ``time.time_ns()``, ``datetime.now()``/``utcnow()``/``today()``
    (under any alias of the module), an import of those functions by name, and a
    ``SystemClock`` outside the modules that build the context."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    where = str(_rel(path, rel))
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and node.func.attr in _WALL_CALLS:
            owner = ast.unparse(node.func.value).split(".")[-1]
            if owner in _WALL_OWNERS:
                out.append(f"{node.lineno}: {ast.unparse(node.func)}")
        elif isinstance(node, ast.ImportFrom) and node.module in ("time", "datetime"):
            out += [f"{node.lineno}: from {node.module} import {a.name}" for a in node.names
                    if a.name in _WALL_CALLS]
        elif isinstance(node, ast.Name | ast.alias) and where not in CLOCK_MAKERS:
            name = node.id if isinstance(node, ast.Name) else node.name
            if name == "SystemClock":
                out.append(f"{node.lineno}: SystemClock")
    return sorted(out, key=lambda t: int(t.split(":")[0]))


def test_ops_reads_time_only_from_the_injected_clock():
    found = {str(p.relative_to(PKG)): got for p in sorted((PKG / "ops").rglob("*.py"))
             if (got := wall_clock_reads(p))}
    assert found == {}


def test_a_wall_clock_read_in_ops_is_reported(tmp_path):
    text = ("import time\nimport datetime as dt\nfrom datetime import datetime\n"
            "from time import time_ns\nfrom ledger.clock import SystemClock\n"
            "a = int(time.time())\nb = dt.datetime.now(dt.UTC)\nc = datetime.utcnow()\n"
            "d = SystemClock().now_us()\n"
            "e = time.monotonic() + time.perf_counter()\n")  # timers: fine
    assert wall_clock_reads(*_probe(tmp_path, "ops/_clock_probe.py", text)) == [
        "4: from time import time_ns", "5: SystemClock", "6: time.time",
        "7: dt.datetime.now", "8: datetime.utcnow", "9: SystemClock"]
    assert wall_clock_reads(*_probe(tmp_path, "ops/context.py", text))[-1] == "8: datetime.utcnow"
