"""``ledger init`` and ``ledger db upgrade|current``."""

from __future__ import annotations

import click

from ledger.cli.output import emit_mapping, format_option
from ledger.facade import Ledger
from ledger.store import db as store_db


@click.command()
@click.option("--origin", default=None, metavar="NAME",
              help="Stable name of this ledger for checkpoints (default: ledger/<id>).")
@format_option()
@click.pass_obj
def init(obj: dict, origin: str | None, fmt: str) -> None:
    """Create the schema and the ledger identity (safe to run again)."""
    with Ledger.init(obj["db_url"], origin=origin) as ledger:
        emit_mapping(ledger.head(), fmt)


@click.group(name="db")
def db_group() -> None:
    """Schema migrations."""


@db_group.command()
@click.option("--revision", default="head", show_default=True)
@click.pass_obj
def upgrade(obj: dict, revision: str) -> None:
    """Apply schema migrations up to REVISION."""
    engine = store_db.make_engine(obj["db_url"])
    store_db.upgrade(engine, revision)
    click.echo(f"at revision {store_db.current_revision(engine)}")


@db_group.command()
@click.pass_obj
def current(obj: dict) -> None:
    """Print the schema revision of the database."""
    engine = store_db.make_engine(obj["db_url"])
    click.echo(store_db.current_revision(engine) or "none")


COMMANDS = [init, db_group]
