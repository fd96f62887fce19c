"""``ledger quarantine status`` and ``ledger quarantine prune``.

The quarantine keeps rejected submissions for auditors; it is not part of the chain, so
pruning it changes no entry, checkpoint or proof (docs/submissions.md#quarantine).
"""

from __future__ import annotations

import click

from ledger.cli.output import emit_json, emit_mapping, format_option
from ledger.cli.state import CommandObj
from ledger.core.timestamp import parse_rfc3339
from ledger.errors import UsageError
from ledger.facade import Ledger


@click.group(name="quarantine")
def quarantine_group() -> None:
    """The quarantine of rejected submissions: its counters and pruning."""


@quarantine_group.command()
@format_option(choices=("table", "json"))
@click.pass_obj
def status(obj: CommandObj, fmt: str) -> None:
    """Rows kept, rejects not kept (dropped: a bound was reached), rows pruned, the bounds,
    and the same per producer ('' = none) in json."""
    with Ledger.open(obj["db_url"]) as ledger:
        st = ledger.quarantine_status()
    if fmt == "json":
        emit_json(st)
        return
    emit_mapping({k: v for k, v in st.items() if k != "producers"}, "table")


@quarantine_group.command()
@click.option("--before", required=True, metavar="TIME",
              help="Delete the rows received before TIME (RFC 3339, e.g. 2026-12-01T00:00:00Z "
                   "or 2026-12-01).")
@click.option("--producer", default=None, metavar="NAME",
              help="Only this producer's rows ('' = rows without a producer).")
@click.pass_obj
def prune(obj: CommandObj, before: str, producer: str | None) -> None:
    """Delete quarantine rows received before TIME; prints how many."""
    try:
        before_us = parse_rfc3339(before)
    except ValueError:
        raise UsageError(f"--before: not an RFC 3339 time: {before!r}", code="bad_time",
                         field="before") from None
    with Ledger.open(obj["db_url"]) as ledger:
        n = ledger.prune_quarantine(before_us, producer)
    click.echo(f"pruned {n} quarantine row(s) received before {before}")


COMMANDS = [quarantine_group]
