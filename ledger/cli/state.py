"""What the ``ledger`` group hands every command: ``ctx.obj`` (``@click.pass_obj``)."""

from __future__ import annotations

from typing import TypedDict

from ledger.cli.config import Config


class CommandObj(TypedDict):
    """Set by ``ledger.cli.main.cli`` before any command runs."""

    db_url: str  # --db, else $LEDGER_DB_URL, else the configuration file's, else the default
    db_source: str  # where db_url came from: flag, env, file or default
    config: Config  # the loaded configuration file (ledger.toml; empty when there is none)
