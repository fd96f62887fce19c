"""The deployment examples of deploy/ (docs/operations.md): the systemd unit passes
``systemd-analyze verify``, the container recipe is built from the package only and runs
unprivileged with the keys mounted read-only, and the example ledger.toml is valid."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from ledger.cli.main import cli

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
LEDGER_BIN = Path(sys.executable).parent / "ledger"


def _verify(unit_text: str, tmp: Path) -> subprocess.CompletedProcess[str]:
    # the unit names /usr/local/bin/ledger; verify checks that the binary exists, so the
    # copy verified names the ledger installed here (nothing else is changed)
    unit = tmp / "ledger.service"
    unit.write_text(unit_text.replace("/usr/local/bin/ledger", str(LEDGER_BIN)), "utf-8")
    return subprocess.run(["systemd-analyze", "verify", str(unit)], capture_output=True,
                          text=True, timeout=60)


@pytest.mark.skipif(shutil.which("systemd-analyze") is None,
                    reason="systemd-analyze is not installed (no systemd on this machine)")
def test_the_systemd_unit_verifies(tmp_path: Path) -> None:
    text = (DEPLOY / "ledger.service").read_text("utf-8")
    res = _verify(text, tmp_path)
    assert res.returncode == 0, res.stderr
    assert res.stderr.strip() == "", res.stderr
    # the checker itself: a broken unit is refused
    broken = _verify(text.replace("ExecStart=/usr/local/bin/ledger serve",
                                  "ExecStart=ledger-not-absolute serve"), tmp_path)
    assert broken.returncode != 0 or broken.stderr.strip()


def test_the_unit_runs_unprivileged_with_read_only_keys() -> None:
    unit = (DEPLOY / "ledger.service").read_text("utf-8")
    assert re.search(r"^User=ledger$", unit, re.M)
    assert "ReadOnlyPaths=/etc/ledger" in unit and "ProtectSystem=strict" in unit
    assert "NoNewPrivileges=yes" in unit and re.search(r"^CapabilityBoundingSet=$", unit,
                                                        re.M)
    assert "RestartPreventExitStatus=2 4" in unit


def _stages(text: str) -> list[str]:
    return re.split(r"^FROM ", text, flags=re.M)[1:]


def test_the_container_is_built_from_the_package_and_runs_unprivileged() -> None:
    text = (DEPLOY / "Containerfile").read_text("utf-8")
    build, run = _stages(text)
    assert "pip wheel" in build
    # the runtime stage gets nothing but the built wheels
    copies = re.findall(r"^COPY (.*)$", run, re.M)
    assert copies == ["--from=build /wheels /wheels"]
    assert re.search(r"pip install --no-cache-dir /wheels/\*\.whl", run)
    user = re.findall(r"^USER (\S+)$", run, re.M)
    assert user and user[-1].split(":")[0] not in ("0", "root")
    assert ":/etc/ledger/keys:ro" in text  # the documented read-only key mount
    assert "ledger-keys" not in run and ".pem" not in run  # no key baked in
    assert re.search(r'^ENTRYPOINT \["ledger"\]$', run, re.M)


@pytest.mark.slow
@pytest.mark.skipif(os.environ.get("LEDGER_TEST_CONTAINER") != "1",
                    reason="container builds need a container engine and network access; "
                           "set LEDGER_TEST_CONTAINER=1 to build deploy/Containerfile")
def test_the_container_builds_and_runs_as_a_non_root_user() -> None:
    engine = shutil.which("podman") or shutil.which("docker")
    assert engine, "LEDGER_TEST_CONTAINER=1 but neither podman nor docker is installed"
    tag = "ledger-test:deploy"
    subprocess.run([engine, "build", "-f", str(DEPLOY / "Containerfile"), "-t", tag,
                    str(ROOT)], check=True, timeout=1800)
    out = subprocess.run([engine, "run", "--rm", "--entrypoint", "id", tag, "-u"],
                         capture_output=True, text=True, check=True, timeout=300)
    assert out.stdout.strip() == "10001"


def test_the_example_config_is_valid() -> None:
    res = CliRunner(env={"LEDGER_DB_URL": None, "LEDGER_CONFIG": None}).invoke(
        cli, ["--config", str(DEPLOY / "ledger.toml"), "config", "show", "--format", "json"])
    assert res.exit_code == 0, res.output
    assert '"serve.audit-every"' in res.stdout and '"6h"' in res.stdout


def test_the_unit_gives_the_service_room_for_its_connections() -> None:
    """systemd's default soft limit (1024 open files) would cap ``ledger serve`` near 830
    connections per worker (tests/api/test_slow_clients.py); the unit raises it."""
    from ledger.ops.limits import descriptor_cap

    unit = (DEPLOY / "ledger.service").read_text("utf-8")
    m = re.search(r"^LimitNOFILE=(\d+)$", unit, re.M)
    assert m, "the unit sets no LimitNOFILE"
    assert descriptor_cap(int(m.group(1))) >= 16 * 1024
