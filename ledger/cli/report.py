"""``ledger report --html FILE [--since T] [--until T]``: a self-contained HTML report of
the entries recorded in a period (audited now), for people who read rather than parse.

Exit codes as ``ledger audit``: 0 every row verified; 1 any finding; 3 abstentions only;
2 usage; 4 could not run.  The file is written whatever the outcome.
"""

from __future__ import annotations

import sys

import click

from ledger.facade import Ledger
from ledger.ops.audit import EXIT_CODES
from ledger.ops.report import parse_day, write_html


@click.command()
@click.option("--html", "html_file", required=True, type=click.Path(dir_okay=False),
              help="Where to write the HTML report.")
@click.option("--since", default=None, help="RFC 3339 time or YYYY-MM-DD (inclusive); "
              "default: the first entry.")
@click.option("--until", default=None, help="RFC 3339 time or YYYY-MM-DD (exclusive); "
              "default: now.")
@click.option("--no-attestations", is_flag=True,
              help="Do not check attestations (they are then abstained, never passed).")
@click.pass_obj
def report(obj: dict, html_file: str, since: str | None, until: str | None,
           no_attestations: bool) -> None:
    """Audit a period and write it as one self-contained HTML file."""
    since = parse_day(since) if since else None
    until = parse_day(until) if until else None
    with Ledger.open(obj["db_url"]) as ledger:
        data = ledger.period_report(since, until, check_attestations=not no_attestations)
    write_html(html_file, data)
    click.echo(f"{data['summary_line']}\nHTML report -> {html_file}", err=True)
    sys.exit(EXIT_CODES[data["audit"]["outcome"]])


COMMANDS = [report]
