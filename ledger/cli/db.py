"""``ledger init`` and ``ledger db upgrade|current``."""

from __future__ import annotations

import click

from ledger.cli.output import emit_mapping, format_option
from ledger.cli.state import CommandObj
from ledger.facade import Ledger
from ledger.ops import lifecycle


@click.command()
@click.option("--origin", default=None, metavar="NAME",
              help="Stable name of this ledger for checkpoints (default: ledger/<id>).")
@format_option()
@click.pass_obj
def init(obj: CommandObj, origin: str | None, fmt: str) -> None:
    """Create the schema and the ledger identity (safe to run again)."""
    with Ledger.init(obj["db_url"], origin=origin) as ledger:
        emit_mapping(ledger.head(), fmt)


@click.group(name="db")
def db_group() -> None:
    """Schema migrations."""


@db_group.command()
@click.option("--revision", default="head", show_default=True)
@click.pass_obj
def upgrade(obj: CommandObj, revision: str) -> None:
    """Apply schema migrations up to REVISION."""
    click.echo(f"at revision {lifecycle.upgrade_schema(obj['db_url'], revision)}")


@db_group.command()
@click.pass_obj
def current(obj: CommandObj) -> None:
    """Print the schema revision of the database."""
    click.echo(lifecycle.schema_revision(obj["db_url"]) or "none")


COMMANDS = [init, db_group]
