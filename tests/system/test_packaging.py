"""The installable package: every sub-package is listed, data files ship, a real
(non-editable) wheel installs and runs."""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_every_subpackage_is_listed_in_pyproject():
    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"][
        "packages"])
    found = {".".join(p.parent.relative_to(ROOT).parts) for p in (ROOT / "ledger").rglob(
        "__init__.py") if "__pycache__" not in p.parts}
    assert found - listed == set(), "add these packages to pyproject.toml"
    assert "ledger._migrations" in listed and "ledger._migrations.versions" in listed


def test_default_policy_ships_as_package_data():
    from ledger.ops.audit import load_policy

    assert load_policy().rules, "the default policy must load from the installed package"


def test_the_console_files_ship_as_package_data():
    """Every file of ledger/console/ (served by ``ledger serve`` at /console/) matches a
    package-data pattern, so a wheel carries the console."""
    from fnmatch import fnmatch

    patterns = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"][
        "package-data"]["ledger"]
    files = [p for p in (ROOT / "ledger" / "console").iterdir() if p.is_file()]
    assert {p.name for p in files} >= {"index.html", "app.js", "verify.js", "charts.js",
                                       "console.css"}
    for p in files:
        assert any(fnmatch(f"console/{p.name}", pat) for pat in patterns), p.name


def test_the_type_marker_ships_as_package_data():
    """``ledger/py.typed`` (PEP 561: the package's annotations are its types) matches a
    package-data pattern, so a wheel carries it and mypy reads an installed ledger's types."""
    patterns = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"][
        "package-data"]["ledger"]
    assert (ROOT / "ledger" / "py.typed").is_file()
    assert "py.typed" in patterns
