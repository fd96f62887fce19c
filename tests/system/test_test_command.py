"""The README's test command (``bash scripts/test``) runs everything CI (``.ci/run``)
runs: PostgreSQL, the static checks, the optional tools (Go and the others whose tests
skip without them), the whole suite.  Before, only ``.ci/run`` installed the tools, so
the README's command silently skipped the Go interoperability tests.

The real scripts run in a copy of the repository's ``scripts/`` and ``.ci/`` whose steps
(the ``ensure-*`` scripts, ``check`` and the virtualenv's python) are stand-ins that
record their call.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
STEPS = ("ensure-postgres", "ensure-tools", "check")


def _tree(tmp_path: Path, fail: str | None = None) -> Path:
    """A copy of scripts/test and .ci/run whose steps append their name to ``calls``."""
    (tmp_path / "scripts").mkdir()
    (tmp_path / ".ci").mkdir()
    shutil.copy(ROOT / "scripts" / "test", tmp_path / "scripts" / "test")
    shutil.copy(ROOT / ".ci" / "run", tmp_path / ".ci" / "run")
    calls = tmp_path / "calls"
    for step in STEPS:
        code = 1 if step == fail else 0
        (tmp_path / "scripts" / step).write_text(
            f'#!/usr/bin/env bash\necho {step} >> "{calls}"\nexit {code}\n')
    python = tmp_path / ".venv" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text(f'#!/usr/bin/env bash\n[ "$2" = pip ] && exit 0\n'
                      f'echo "python $*" >> "{calls}"\n')
    python.chmod(0o755)
    return tmp_path


def _run(tree: Path, *args: str, ci: bool = False) -> tuple[int, list[str]]:
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "LEDGER_TEST_NO_TOOLS")}
    if ci:
        env["CI"] = "true"
    proc = subprocess.run(["bash", *args], cwd=tree, env=env, capture_output=True,
                          text=True, timeout=60)
    calls = tree / "calls"
    return proc.returncode, calls.read_text().splitlines() if calls.exists() else []


def test_the_readme_command_runs_what_ci_runs(tmp_path):
    tree = _tree(tmp_path)
    code, calls = _run(tree, "scripts/test")
    assert code == 0
    assert calls == ["ensure-postgres", "ensure-tools", "check",
                     "python -m pytest -q"]
    (tree / "calls").unlink()
    code, ci_calls = _run(tree, ".ci/run")
    assert code == 0 and ci_calls == ["ensure-postgres", *calls]


def test_with_arguments_only_the_checks_are_left_out(tmp_path):
    code, calls = _run(_tree(tmp_path), "scripts/test", "-q", "tests/test_layers.py")
    assert code == 0
    assert calls == ["ensure-postgres", "ensure-tools",
                     "python -m pytest -q tests/test_layers.py"]


def test_no_postgresql_skips_its_tests_outside_ci_and_fails_under_ci(tmp_path):
    tree = _tree(tmp_path, fail="ensure-postgres")
    code, calls = _run(tree, "scripts/test", "tests/x.py")
    assert code == 0 and calls[-1] == "python -m pytest tests/x.py"
    (tree / "calls").unlink()
    code, calls = _run(tree, "scripts/test", "tests/x.py", ci=True)
    assert code != 0 and calls == ["ensure-postgres"]
    (tree / "calls").unlink()
    assert _run(tree, ".ci/run")[0] != 0


def test_failing_checks_stop_the_readme_command(tmp_path):
    code, calls = _run(_tree(tmp_path, fail="check"), "scripts/test")
    assert code != 0 and not any(c.startswith("python") for c in calls)
