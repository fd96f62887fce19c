"""``ledger report --html FILE [--since T] [--until T]``: a self-contained HTML report of
the entries recorded in a period (audited now), for people who read rather than parse.

Exit codes as ``ledger audit``: 0 every row verified; 1 any finding; 3 abstentions only;
2 usage; 4 could not run.  The file is written whatever the outcome.
"""

from __future__ import annotations

import json
import sys

import click

from ledger.cli.state import CommandObj
from ledger.core.finding import EXIT_CODES
from ledger.errors import UsageError
from ledger.facade import Ledger
from ledger.ops.report import parse_day, reverify_data, write_html


@click.command()
@click.option("--html", "html_file", required=True, type=click.Path(dir_okay=False),
              help="Where to write the HTML report.")
@click.option("--since", default=None, help="RFC 3339 time or YYYY-MM-DD (inclusive); "
              "default: the first entry.")
@click.option("--until", default=None, help="RFC 3339 time or YYYY-MM-DD (exclusive); "
              "default: now.")
@click.option("--no-attestations", is_flag=True,
              help="Do not check attestations (they are then abstained, never passed).")
@click.option("--reverify-report", "reverify_file", default=None,
              type=click.Path(dir_okay=False, exists=True),
              help="A ledger reverify --json-report: its disagreements get their own section "
              "next to the findings.")
@click.pass_obj
def report(obj: CommandObj, html_file: str, since: str | None, until: str | None,
           no_attestations: bool, reverify_file: str | None) -> None:
    """Audit a period and write it as one self-contained HTML file."""
    since = parse_day(since) if since else None
    until = parse_day(until) if until else None
    rv = None
    if reverify_file is not None:
        try:
            with open(reverify_file, encoding="utf-8") as fh:
                rv = json.load(fh)
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            raise UsageError(f"--reverify-report: not a readable JSON document ({exc})",
                             field="reverify_report") from None
    with Ledger.open(obj["db_url"]) as ledger:
        if rv is not None:  # checked before the audit: a bad file writes nothing
            reverify_data(rv, ledger_id=ledger.meta.ledger_id, start=0, end=0)
        data = ledger.period_report(since, until, check_attestations=not no_attestations)
        if rv is not None:
            data["reverify"] = reverify_data(rv, ledger_id=ledger.meta.ledger_id,
                                             start=data["scope"]["start"],
                                             end=data["scope"]["end"])
    write_html(html_file, data)
    click.echo(f"{data['summary_line']}\nHTML report -> {html_file}", err=True)
    sys.exit(EXIT_CODES[data["audit"]["outcome"]])


COMMANDS = [report]
