"""``ledger.toml``: precedence flags > environment > file > defaults, ``ledger config
show`` with secrets masked, unknown keys named, and a real ``ledger serve`` taking its
settings from the file."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from ledger.cli.main import cli
from tests.api.server import ROOT, prepare_ledger, start_server, stop_process

CLEAN = {k: v for k, v in os.environ.items() if not k.startswith("LEDGER_")}


def show(args: list[str], env: dict[str, str] | None = None) -> dict[str, Any]:
    res = CliRunner(env={**{k: None for k in os.environ if k.startswith("LEDGER_")},
                         **(env or {})}).invoke(cli, [*args, "--format", "json"]
                                                if args[-1] == "show" else args)
    assert res.exit_code == 0, res.output
    return {r["setting"]: r for r in json.loads(res.stdout)["settings"]}


def _file(tmp: Path, text: str) -> str:
    p = tmp / "ledger.toml"
    p.write_text(text, "utf-8")
    return str(p)


def test_flags_beat_env_beat_file_beat_defaults(tmp_path: Path) -> None:
    cfg = _file(tmp_path, 'db = "sqlite:///from-file.db"\n[serve]\ngroup-max = 7\n'
                          'queue_max = 70\nport = 9001\n[audit]\nworkers = 3\n'
                          '[checkpoint]\nformat = "json"\n')
    env = {"LEDGER_SERVE_QUEUE_MAX": "80", "LEDGER_SERVE_PORT": "9002"}
    rows = show(["--config", cfg, "config", "show", "--format", "json", "serve",
                 "--port", "9003"], env)
    assert (rows["serve.group-max"]["value"], rows["serve.group-max"]["source"]) == (7, "file")
    assert (rows["serve.queue-max"]["value"], rows["serve.queue-max"]["source"]) == (80, "env")
    assert (rows["serve.port"]["value"], rows["serve.port"]["source"]) == (9003, "flag")
    assert (rows["serve.host"]["value"], rows["serve.host"]["source"]) == ("127.0.0.1",
                                                                          "default")
    assert rows["serve.queue-max"]["env"] == "LEDGER_SERVE_QUEUE_MAX"
    assert (rows["db"]["value"], rows["db"]["source"]) == ("sqlite:///from-file.db", "file")
    every = show(["--config", cfg, "config", "show"], env)
    assert every["audit.workers"]["value"] == 3 and every["checkpoint.format"]["value"] == "json"
    assert every["serve.port"]["value"] == 9002  # env, no flag here
    # the environment's config file, and the db from the environment
    rows = show(["config", "show"], {"LEDGER_CONFIG": cfg, "LEDGER_DB_URL": "sqlite:///e.db"})
    assert rows["serve.group-max"]["value"] == 7
    assert (rows["db"]["value"], rows["db"]["source"]) == ("sqlite:///e.db", "env")
    rows = show(["--db", "sqlite:///f.db", "config", "show"], {"LEDGER_CONFIG": cfg})
    assert rows["db"]["source"] == "flag"


def test_a_file_setting_reaches_the_command_it_configures(tmp_path: Path, sqlite_url: str,
                                                           ) -> None:
    """`ledger audit` runs with the file's settings (and a flag still wins)."""
    from ledger import Ledger

    Ledger.init(sqlite_url).close()
    cfg = _file(tmp_path, f'db = "{sqlite_url}"\n[audit]\njson-report = '
                          f'"{tmp_path / "report.json"}"\n')
    res = CliRunner(env={"LEDGER_DB_URL": None}).invoke(cli, ["--config", cfg, "audit"])
    assert res.exit_code == 0, res.output
    assert json.loads((tmp_path / "report.json").read_text())["outcome"] == "passed"
    res = CliRunner(env={"LEDGER_DB_URL": None, "LEDGER_AUDIT_JSON_REPORT": "-"}).invoke(
        cli, ["--config", cfg, "audit"])
    assert json.loads(res.stdout)["outcome"] == "passed"  # env over file


def test_secrets_are_masked(tmp_path: Path) -> None:
    cfg = _file(tmp_path, 'db = "postgresql://svc:hunter2@db.internal/ledger?password=x2"\n'
                          '[serve]\nalert-webhook = ["https://u:pw@hooks.example/a?token=s3"]\n')
    res = CliRunner(env={"LEDGER_DB_URL": None}).invoke(cli, ["--config", cfg, "config",
                                                              "show"])
    assert res.exit_code == 0, res.output
    for secret in ("hunter2", "x2", "pw@", "s3"):
        assert secret not in res.stdout
    assert "postgresql://svc:***@db.internal/ledger" in res.stdout
    assert "https://u:***@hooks.example/a?***" in res.stdout


@pytest.mark.parametrize("text,key", [
    ("[serve]\ngroup_maxx = 1\n", "serve.group_maxx"),
    ("[serv]\nport = 1\n", "serv"),
    ("dbx = 'x'\n", "dbx"),
    ("[audit]\nnot-an-option = true\n", "audit.not-an-option"),
    ("[checkpoint]\nkeys = 'a'\nkeys_dir = 'b'\n", "checkpoint.keys_dir"),
])
def test_unknown_or_repeated_keys_are_errors_naming_the_key(tmp_path: Path, text: str,
                                                             key: str) -> None:
    cfg = _file(tmp_path, text)
    res = CliRunner().invoke(cli, ["--config", cfg, "config", "show"])
    assert res.exit_code == 2, res.output
    assert key in res.stderr and "Traceback" not in res.output


@pytest.mark.parametrize("text,needle", [
    ("[serve]\nport = 'eighty'\n", "--port"),
    ("[serve]\nport = [1, 2]\n", "serve.port"),
    ("[serve\n", "not valid TOML"),
    ("serve = 1\n", "[serve] must be a table"),
    ("[serve]\naudit-every = 'often'\n", "audit-every"),
])
def test_bad_values_are_refused_with_the_setting_named(tmp_path: Path, text: str,
                                                       needle: str) -> None:
    cfg = _file(tmp_path, text)
    res = CliRunner().invoke(cli, ["--config", cfg, "config", "show", "serve"])
    assert res.exit_code == 2, res.output
    assert needle in res.output and "Traceback" not in res.output


def test_a_missing_config_file_is_a_usage_error(tmp_path: Path) -> None:
    res = CliRunner().invoke(cli, ["--config", str(tmp_path / "nope.toml"), "config", "show"])
    assert res.exit_code == 2 and "cannot read config file" in res.stderr


@pytest.mark.slow
def test_a_real_server_runs_with_the_file_and_the_env_overrides_it(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'l.db'}"
    keys = tmp_path / "keys"
    prepare_ledger(url, keys, "test.example/config")
    cfg = _file(tmp_path, '[serve]\nlog-format = "json"\naccess-log = true\n')
    env = {**CLEAN, "LEDGER_CONFIG": cfg}
    proc, base = start_server(url, keys, tmp_path / "a.log", env=env)
    stop_process(proc)
    lines = [x for x in (tmp_path / "a.log").read_text().splitlines()[1:] if x.strip()]
    assert lines and all(x.startswith("{") for x in lines)
    env["LEDGER_SERVE_LOG_FORMAT"] = "text"
    proc, base = start_server(url, keys, tmp_path / "b.log", env=env)
    stop_process(proc)
    lines = [x for x in (tmp_path / "b.log").read_text().splitlines()[1:] if x.strip()]
    assert lines and not any(x.startswith("{") for x in lines)
    # an unknown key keeps the server from starting, exit 2, key named
    _file(tmp_path, '[serve]\nlog-formats = "json"\n')
    res = subprocess.run([sys.executable, "-m", "ledger", "--db", url, "serve", "--keys",
                          str(keys)], env=env, cwd=ROOT, capture_output=True, text=True,
                         timeout=60)
    assert res.returncode == 2 and "serve.log-formats" in res.stderr
