"""``ledger config show``: the effective settings of serve, audit and checkpoint.

``ledger config show serve --port 9000`` shows what ``ledger serve --port 9000`` would run
with: each setting's value (secrets masked), and whether it came from a flag, the
environment, the config file or the default (docs/operations.md#configuration).
"""

from __future__ import annotations

import json

import click

from ledger.cli import config
from ledger.cli.state import CommandObj


@click.group("config")
def config_group() -> None:
    """The configuration file (ledger.toml) and the effective settings."""


@config_group.command("show", context_settings={"ignore_unknown_options": True,
                                                "allow_interspersed_args": False})
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text",
              show_default=True)
@click.argument("command", required=False, type=click.Choice(list(config.SECTIONS)))
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
@click.pass_context
def show(ctx: click.Context, fmt: str, command: str | None, args: tuple[str, ...]) -> None:
    """Print the effective settings (of COMMAND, with its ARGS as flags)."""
    root = ctx.find_root()
    obj: CommandObj = root.obj
    cfg: config.Config = obj["config"]
    rows = [{"setting": "db", "value": config.mask("db", obj["db_url"]),
             "source": obj["db_source"], "env": "LEDGER_DB_URL"}]
    for name in [command] if command else list(config.SECTIONS):
        rows += config.effective(root, name, list(args) if command else [])
    if fmt == "json":
        click.echo(json.dumps({"config_file": cfg.path, "settings": rows}, indent=2))
        return
    click.echo(f"# config file: {cfg.path or '(none)'}")
    width = max(len(r["setting"]) for r in rows)
    for r in rows:
        click.echo(f"{r['setting']:<{width}}  = {json.dumps(r['value'])}  # {r['source']}")


COMMANDS = [config_group]
