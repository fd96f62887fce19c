"""The offline verifiers depend on core, crypto and errors only (no database code), crypto
never reaches back into them, and no import cycle runs through them."""

from __future__ import annotations

import sys

import pytest

from tests.test_layers import PKG, imported_modules

ALLOWED = ("ledger.core", "ledger.crypto", "ledger.errors", "ledger.verify")
STDLIB = frozenset(sys.stdlib_module_names) | {"__future__"}
OWN = ("ledger.verify", "ledger.core.finding", "ledger.core.strict", "ledger.crypto.jws",
       "ledger.crypto.bundle_sign")


def _name(path) -> str:
    rel = path.relative_to(PKG.parent).with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    return ".".join(parts)


MODULES = {_name(p): p for p in sorted(PKG.rglob("*.py"))}


def _under(module: str, prefix: str) -> bool:
    return module == prefix or module.startswith(prefix + ".")


@pytest.mark.parametrize("name", sorted(m for m in MODULES if _under(m, "ledger.verify")))
def test_verify_imports_only_core_crypto_errors(name):
    bad = sorted(m for m in imported_modules(MODULES[name])
                 if m.split(".")[0] not in STDLIB and m != "ledger"
                 and not any(_under(m, p) for p in ALLOWED))
    assert not bad, f"{name} imports {bad}"


@pytest.mark.parametrize("layer", ["ledger.core", "ledger.crypto"])
def test_core_and_crypto_never_import_verify(layer):
    for name, path in MODULES.items():
        if _under(name, layer):
            assert not any(_under(m, "ledger.verify") for m in imported_modules(path)), name


def _graph() -> dict[str, set[str]]:
    return {name: {m for m in imported_modules(path) if m in MODULES and m != name}
            for name, path in MODULES.items()}


def test_no_import_cycle_runs_through_the_verifiers():
    graph = _graph()
    for start in (m for m in MODULES if any(_under(m, p) for p in OWN)):
        seen, stack = set(), list(graph[start])
        while stack:
            m = stack.pop()
            assert m != start, f"{start} imports itself through {sorted(seen)}"
            if m not in seen:
                seen.add(m)
                stack.extend(graph[m])
