"""``ledger demo``: a realistic ledger in ./ledger-demo/ and what happened to it."""

from __future__ import annotations

import shutil
from pathlib import Path

import click

from ledger.demo import run_demo


@click.command()
@click.option("--dir", "directory", default="ledger-demo", show_default=True,
              type=click.Path(file_okay=False), help="Where to create the demo ledger.")
@click.option("--keep/--fresh", default=False,
              help="Keep an existing demo directory instead of starting fresh.")
def demo(directory: str, keep: bool) -> None:
    """Create a SQLite ledger, append a realistic mix of results, and report."""
    path = Path(directory)
    if path.exists() and not keep:
        shutil.rmtree(path)
    path.mkdir(parents=True, exist_ok=True)
    for line in run_demo(path):
        click.echo(line)


COMMANDS = [demo]
