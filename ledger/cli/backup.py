"""``ledger backup`` and ``ledger restore-check`` (docs/operations.md#backup-and-restore).

Exit codes: ``backup`` 0 written, 2 usage (a PostgreSQL URL: use pg_dump; the file
exists), 4 could not run.  ``restore-check`` 0 the restored ledger verifies and extends
every checkpoint, 1 findings, 3 abstentions only, 2 usage, 4 could not run.
"""

from __future__ import annotations

import json
import sys

import click

from ledger.cli.output import emit_mapping, format_option
from ledger.cli.state import CommandObj
from ledger.core.finding import EXIT_CODES
from ledger.facade import Ledger
from ledger.ops.backup import restore_check as run_restore_check


@click.command()
@click.option("--out", required=True, type=click.Path(dir_okay=False),
              help="The backup file to write (must not exist).")
@format_option(default="text", choices=("text", "json"))
@click.pass_obj
def backup(obj: CommandObj, out: str, fmt: str) -> None:
    """Copy a SQLite ledger consistently while it is in use (SQLite's online backup API).

    PostgreSQL: use pg_dump -Fc (docs/operations.md); `ledger restore-check` checks
    either kind of backup."""
    with Ledger.open(obj["db_url"]) as ledger:
        info = ledger.backup(out)
    emit_mapping(info, fmt)


@click.command("restore-check")
@click.argument("file", type=click.Path(exists=True, dir_okay=False))
@click.option("--checkpoint", "checkpoints", multiple=True, required=True,
              type=click.Path(exists=True, dir_okay=False),
              help="A signed checkpoint kept outside the database (repeatable).")
@click.option("--key", "keys", multiple=True, required=True,
              type=click.Path(exists=True, dir_okay=False),
              help="The ledger's public key(s) (PEM or JWKS).")
@click.option("--scratch-db", "scratch_url", default=None, metavar="URL",
              help="For a pg_dump archive: an empty PostgreSQL database to restore into.")
@click.option("--json-report", type=click.Path(dir_okay=False, allow_dash=True),
              default=None, help="Write the full JSON result here ('-' = stdout).")
def restore_check(file: str, checkpoints: tuple[str, ...], keys: tuple[str, ...],
                  scratch_url: str | None, json_report: str | None) -> None:
    """Restore FILE into a scratch database and prove it is a consistent extension of
    the kept checkpoints (full audit of every row, plus each checkpoint's signature and
    consistency proof)."""
    result = run_restore_check(file, checkpoints, keys, scratch_url=scratch_url)
    if json_report == "-":
        click.echo(json.dumps(result, indent=2))
    elif json_report:
        with open(json_report, "w", encoding="utf-8") as fh:
            json.dump(result, fh, indent=2)
    s = result["summary"]
    verdict = {"passed": "good", "failed": "NOT GOOD", "unverified": "needs review"}[
        result["outcome"]]
    click.echo(f"restore-check {result['outcome']}: backup {verdict} — {result['size']} "
               f"entries, {s['verified']} verified, {len(result['findings'])} findings, "
               f"{len(checkpoints)} checkpoint(s) checked", err=True)
    for f in result["findings"][:20]:
        click.echo(f"  seq {f.get('seq')}: {f['class']} {f['code']}: {f['message']}",
                   err=True)
    sys.exit(EXIT_CODES[result["outcome"]])


COMMANDS = [backup, restore_check]


@click.command("downgrade")
@click.option("--revision", required=True, metavar="REV",
              help="The revision the older package expects (`ledger db current` before "
                   "the upgrade).")
@click.pass_obj
def db_downgrade(obj: CommandObj, revision: str) -> None:
    """Roll the schema back to REVISION (refused when a migration cannot go back)."""
    from ledger.ops.backup import downgrade_schema

    click.echo(f"at revision {downgrade_schema(obj['db_url'], revision)}")


DB_COMMANDS = [db_downgrade]  # attached to `ledger db` (ledger/cli/db.py owns the group)
