"""The ``ledger`` command: a thin Click layer over the ops and the facade.

Exit codes (all commands): 0 success; 1 integrity findings (audit); 2 usage
errors and rejected input; 3 audit complete with abstentions only; 4 could
not run (database unreachable, not initialized, internal error).
"""

from __future__ import annotations

import sys
from typing import Any

import click

from ledger.errors import LedgerError
from ledger.ops.lifecycle import default_url


class LedgerGroup(click.Group):
    """Turns LedgerError into one line on stderr and its category's exit code."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except LedgerError as exc:
            click.echo(f"error: {exc}", err=True)
            sys.exit(exc.exit_code)


@click.group(cls=LedgerGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--db", "db_url", envvar="LEDGER_DB_URL", default=None, metavar="URL",
              help="Database URL (sqlite:///path or postgresql://...). "
                   "Default: $LEDGER_DB_URL, else sqlite:///ledger.db in the working directory.")
@click.option("--config", "config_file", default=None, metavar="FILE",
              help="Settings of serve, audit and checkpoint (ledger.toml; default: "
                   "$LEDGER_CONFIG). Flags and environment variables win over it.")
@click.version_option(package_name="ledger")
@click.pass_context
def cli(ctx: click.Context, db_url: str | None, config_file: str | None) -> None:
    """Append-only audit ledger for verification results."""
    from ledger.cli import config

    ctx.ensure_object(dict)
    cfg = config.load(config.config_path(config_file), cli)
    ctx.default_map = cfg.default_map
    source = "flag" if ctx.get_parameter_source("db_url") == click.core.ParameterSource. \
        COMMANDLINE else "env" if db_url else "file" if cfg.db else "default"
    ctx.obj["db_url"] = db_url or cfg.db or default_url()
    ctx.obj["db_source"] = source
    ctx.obj["config"] = cfg


def _register() -> None:
    from ledger.cli import (
        audit,
        backup,
        checkpoint_verify,
        config,
        config_cmd,
        custody,
        db,
        demo,
        entries,
        export,
        importer,
        keys,
        proofs,
        quarantine,
        query,
        reader,
        report,
        reverify,
        serve,
        spool,
        tiles,
        token,
        witness,
    )

    for module in (db, entries, keys, audit, demo, proofs, checkpoint_verify, query, export,
                   serve, token, spool, importer, quarantine, witness, custody, report, reverify,
                   backup, config_cmd, reader, tiles):
        for command in module.COMMANDS:
            cli.add_command(command)
    for command in backup.DB_COMMANDS:
        db.db_group.add_command(command)
    config.install(cli)


_register()


def main() -> None:
    cli(prog_name="ledger")
