"""``ledger.toml``: one file for every setting of ``serve``, ``audit`` and ``checkpoint``.

The file (``--config FILE`` or ``$LEDGER_CONFIG``; stdlib ``tomllib``) has a top-level
``db`` (the database URL) and one table per command; a table's keys are the command's
long option names, with dashes or underscores (``group-max = 64``, ``alert-webhook =
["https://..."]``, ``access-log = false``)::

    db = "sqlite:////var/lib/ledger/ledger.db"
    [serve]
    port = 8080
    audit-every = "1h"
    [audit]
    workers = 2
    [checkpoint]
    keys = "/etc/ledger/keys"

Precedence, highest first: a command-line flag, then the environment
(``LEDGER_<COMMAND>_<OPTION>``, e.g. ``LEDGER_SERVE_GROUP_MAX``; options that always
had their own variable keep it: ``LEDGER_DB_URL``, ``LEDGER_KEYS_DIR``), then the file,
then the built-in default.  This is Click's own order (command line > environment >
``default_map`` > default), so there is one implementation, and ``ledger config show``
reports what a command would run with and where each value came from.

An unknown table or key is an error naming it (exit 2); a value of the wrong type is
refused by the option's own check, naming the option.
"""

from __future__ import annotations

import os
import re
import tomllib
from dataclasses import dataclass, field
from typing import Any

import click

from ledger.errors import UsageError

CONFIG_ENV = "LEDGER_CONFIG"
SECTIONS = ("serve", "audit", "checkpoint")
ENV_PREFIX = {name: f"LEDGER_{name.upper()}" for name in SECTIONS}
SECRET_WORDS = ("password", "secret", "token")


@dataclass
class Config:
    """A loaded file: where from, its ``db`` and the ``default_map`` of each command."""

    path: str | None = None
    db: str | None = None
    default_map: dict[str, dict[str, Any]] = field(default_factory=dict)


def install(cli: click.Group) -> None:
    """Give ``serve``, ``audit`` and ``checkpoint`` their environment variables."""
    for name, prefix in ENV_PREFIX.items():
        cli.commands[name].context_settings["auto_envvar_prefix"] = prefix


def _keys(cmd: click.Command) -> dict[str, click.Parameter]:
    """File key -> option: every primary long option, with dashes and with underscores."""
    out: dict[str, click.Parameter] = {}
    for p in cmd.params:
        if not isinstance(p, click.Option) or p.name in ("help",):
            continue
        for opt in p.opts:
            if opt.startswith("--"):
                out[opt[2:]] = out[opt[2:].replace("-", "_")] = p
    return out


def load(path: str | None, cli: click.Group) -> Config:
    """Read and check the file at ``path`` (None: no file).  Raises UsageError."""
    if path is None:
        return Config()
    try:
        with open(path, "rb") as fh:
            data = tomllib.load(fh)
    except OSError as exc:
        raise UsageError(f"cannot read config file {path}: {exc.strerror}",
                         code="bad_config", field="config") from None
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"{path} is not valid TOML: {exc}", code="bad_config",
                         field="config") from None
    cfg = Config(path=path)
    for key, value in data.items():
        if key == "db":
            if not isinstance(value, str) or not value:
                raise UsageError(f"{path}: db must be a database URL (text)",
                                 code="bad_config", field="db")
            cfg.db = value
        elif key in SECTIONS:
            if not isinstance(value, dict):
                raise UsageError(f"{path}: [{key}] must be a table", code="bad_config",
                                 field=key)
            cfg.default_map[key] = _section(path, key, value, cli.commands[key])
        else:
            raise UsageError(f"{path}: unknown key {key!r} (known: db, "
                             f"{', '.join('[' + s + ']' for s in SECTIONS)})",
                             code="unknown_config_key", field=key)
    return cfg


def _section(path: str, name: str, table: dict[str, Any], cmd: click.Command,
             ) -> dict[str, Any]:
    known = _keys(cmd)
    out: dict[str, Any] = {}
    for key, value in table.items():
        p = known.get(key)
        if p is None:
            raise UsageError(f"{path}: unknown key {name}.{key} (not an option of "
                             f"`ledger {name}`)", code="unknown_config_key",
                             field=f"{name}.{key}")
        if isinstance(value, dict):
            raise UsageError(f"{path}: {name}.{key} must be a value, not a table",
                             code="bad_config", field=f"{name}.{key}")
        if p.multiple and not isinstance(value, list):
            value = [value]
        elif not p.multiple and isinstance(value, list):
            raise UsageError(f"{path}: {name}.{key} takes one value, not a list",
                             code="bad_config", field=f"{name}.{key}")
        assert p.name is not None
        if p.name in out:
            raise UsageError(f"{path}: {name}.{key} is given twice", code="bad_config",
                             field=f"{name}.{key}")
        out[p.name] = value
    return out


def config_path(given: str | None) -> str | None:
    return given or os.environ.get(CONFIG_ENV) or None


# -- ledger config show ------------------------------------------------------------------
def env_var(cmd_name: str, p: click.Parameter) -> str | None:
    if p.envvar:
        return p.envvar if isinstance(p.envvar, str) else p.envvar[0]
    if cmd_name in ENV_PREFIX and p.name:
        return f"{ENV_PREFIX[cmd_name]}_{p.name.upper()}"
    return None


_SOURCES = {
    click.core.ParameterSource.COMMANDLINE: "flag",
    click.core.ParameterSource.ENVIRONMENT: "env",
    click.core.ParameterSource.DEFAULT_MAP: "file",
    click.core.ParameterSource.DEFAULT: "default",
}


def effective(root: click.Context, cmd_name: str, args: list[str]) -> list[dict[str, Any]]:
    """What ``ledger <cmd_name> <args>`` would run with: one row per option (name, value
    with secrets masked, source: flag | env | file | default, environment variable)."""
    group = root.command
    assert isinstance(group, click.Group)
    cmd = group.commands[cmd_name]
    ctx = cmd.make_context(cmd_name, list(args), parent=root)
    rows = []
    for p in cmd.params:
        if not isinstance(p, click.Option) or p.name is None:
            continue
        source = ctx.get_parameter_source(p.name)
        rows.append({"setting": f"{cmd_name}.{p.opts[0].lstrip('-')}",
                     "value": mask(p.name, ctx.params.get(p.name)),
                     "source": _SOURCES.get(source, "default") if source else "default",
                     "env": env_var(cmd_name, p)})
    return rows


_USERINFO = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)(?P<user>[^:@/]*):[^@/]*@")


def mask(name: str, value: Any) -> Any:
    """``value`` fit to print: passwords in URLs, URL query strings (webhook tokens) and
    settings named like secrets are replaced by ``***``."""
    if isinstance(value, (list, tuple)):
        return [mask(name, v) for v in value]
    if value is None or isinstance(value, (bool, int, float)):
        return value
    text = str(value)
    if any(w in name.lower() for w in SECRET_WORDS):
        return "***"
    text = _USERINFO.sub(lambda m: f"{m['scheme']}{m['user']}:***@", text)
    text = re.sub(r"(?i)(password=)[^&]*", r"\1***", text)
    if "://" in text and "?" in text and not text.startswith(("sqlite", "postgres")):
        text = text.split("?", 1)[0] + "?***"
    return text
