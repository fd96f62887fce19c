"""Import layering (docs: /work/shared/design/STYLE.md, "a pure core, I/O at the edges").

Parsed with ``ast`` (imports anywhere in a module, including inside functions and under
``TYPE_CHECKING``, count):

* ``ledger/core/*`` imports only the standard library, ``ledger.core`` and ``ledger.errors``;
* ``ledger/crypto/*`` never imports ``ledger.store``, ``ledger.ops``, ``ledger.cli``,
  ``ledger.api``, SQLAlchemy or Click;
* ``ledger/store/*`` never imports ``ledger.ops``, ``ledger.cli``, ``ledger.api`` or
  ``ledger.crypto``;
* ``ledger/cli/*`` never imports ``ledger.api``, and ``ledger/api/*`` never imports
  ``ledger.cli``.

A real violation in current code is not fixed here: it is listed in ``KNOWN_VIOLATIONS``
(``xfail(strict=True)``, so the test fails again once it is fixed and the entry must go).
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parent.parent / "ledger"
STDLIB = frozenset(sys.stdlib_module_names) | {"__future__"}

FORBIDDEN = {
    "crypto": ("ledger.store", "ledger.ops", "ledger.cli", "ledger.api", "sqlalchemy", "click"),
    "store": ("ledger.ops", "ledger.cli", "ledger.api", "ledger.crypto"),
    "cli": ("ledger.api",),
    "api": ("ledger.cli",),
}
CORE_ALLOWED = ("ledger.core", "ledger.errors")

# (layer, module path relative to ledger/) -> reason; each is xfail(strict=True).
KNOWN_VIOLATIONS: dict[tuple[str, str], str] = {}


def imported_modules(path: Path) -> set[str]:
    """Absolute names of everything ``path`` imports (``from ledger import x`` -> ``ledger.x``)."""
    rel = path.relative_to(PKG.parent).with_suffix("")
    package = list(rel.parts[:-1])  # the package a relative import of level 1 starts from
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[:len(package) - (node.level - 1)] if node.level > 1 else package
                module = ".".join([*base, *([node.module] if node.module else [])])
            else:
                module = node.module or ""
            out.add(module)
            # `from ledger import store` / `from ledger.store import repository` import
            # sub-modules too
            out.update(f"{module}.{alias.name}" for alias in node.names if alias.name != "*")
    return out


def _matches(module: str, prefix: str) -> bool:
    return module == prefix or module.startswith(prefix + ".")


def _files(layer: str) -> list[Path]:
    return sorted((PKG / layer).rglob("*.py")) if (PKG / layer).is_dir() else []


def _cases(layers: list[str]) -> list[object]:
    cases = []
    for layer in layers:
        for path in _files(layer):
            rel = str(path.relative_to(PKG))
            marks = []
            if (layer, rel) in KNOWN_VIOLATIONS:
                marks = [pytest.mark.xfail(strict=True, reason=KNOWN_VIOLATIONS[(layer, rel)])]
            cases.append(pytest.param(layer, path, id=rel, marks=marks))
    return cases


def test_the_layers_exist():
    for layer in ("core", "crypto", "store", "ops", "cli"):
        assert _files(layer), layer


def test_imported_modules_resolves_relative_and_from_imports():
    assert "ledger.store.append" in imported_modules(PKG / "ops" / "append.py")
    assert "ledger.core.canonical" in imported_modules(PKG / "core" / "entry.py")


@pytest.mark.parametrize("layer,path", _cases(["core"]))
def test_core_imports_only_stdlib_and_core(layer, path):
    bad = sorted(m for m in imported_modules(path)
                 if m.split(".")[0] not in STDLIB
                 and not any(_matches(m, p) for p in CORE_ALLOWED))
    # `from ledger import errors` names the package itself; only its sub-module counts
    bad = [m for m in bad if m != "ledger"]
    assert not bad, f"ledger/{path.relative_to(PKG)} imports {bad}"


@pytest.mark.parametrize("layer,path", _cases(sorted(FORBIDDEN)))
def test_layer_never_imports_what_it_must_not(layer, path):
    bad = sorted(m for m in imported_modules(path)
                 if any(_matches(m, p) for p in FORBIDDEN[layer]))
    assert not bad, f"ledger/{path.relative_to(PKG)} ({layer}) imports {bad}"
