"""``ledger report --html FILE [--since T] [--until T]``: a self-contained HTML report of
the entries recorded in a period (audited now), for people who read rather than parse.

Exit codes as ``ledger audit``: 0 every row verified; 1 any finding; 3 abstentions only;
2 usage; 4 could not run.  The file is written whatever the outcome.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import click

from ledger.cli.state import CommandObj
from ledger.core.finding import EXIT_CODES
from ledger.core.reverify_run import report_of
from ledger.errors import IntegrityError, UsageError
from ledger.facade import Ledger
from ledger.ops.report import parse_day, reverify_data
from ledger.report import write_html


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
@click.option("--reverify-run", "reverify_run", default=None, metavar="SEQ|latest",
              help="The same section from a run recorded in the ledger (a reverify_run "
              "entry, ledger reverify --record), read through the read check; its outcomes "
              "are shown as proven only when their digest is the recorded one.")
@click.pass_obj
def report(obj: CommandObj, html_file: str, since: str | None, until: str | None,
           no_attestations: bool, reverify_file: str | None, reverify_run: str | None,
           ) -> None:
    """Audit a period and write it as one self-contained HTML file."""
    since = parse_day(since) if since else None
    until = parse_day(until) if until else None
    if reverify_file is not None and reverify_run is not None:
        raise UsageError("give --reverify-report or --reverify-run, not both",
                         field="reverify_run")
    run_seq = _run_seq(reverify_run)
    rv = None
    if reverify_file is not None:
        try:
            with open(reverify_file, encoding="utf-8") as fh:
                rv = json.load(fh)
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            raise UsageError(f"--reverify-report: not a readable JSON document ({exc})",
                             field="reverify_report") from None
    source, recorded = "--reverify-report", None
    with Ledger.open(obj["db_url"]) as ledger:
        if reverify_run is not None:  # read and checked before the audit, like a file
            source = "--reverify-run"
            rv, recorded = _recorded(ledger, run_seq)
        if rv is not None:  # checked before the audit: a bad file writes nothing
            reverify_data(rv, ledger_id=ledger.meta.ledger_id, start=0, end=0, source=source)
        data = ledger.period_report(since, until, check_attestations=not no_attestations)
        if rv is not None:
            data["reverify"] = reverify_data(rv, ledger_id=ledger.meta.ledger_id,
                                             start=data["scope"]["start"],
                                             end=data["scope"]["end"], source=source)
            data["reverify"]["recorded"] = recorded
    write_html(html_file, data)
    click.echo(f"{data['summary_line']}\nHTML report -> {html_file}", err=True)
    sys.exit(EXIT_CODES[data["audit"].outcome])


def _run_seq(value: str | None) -> int | None:
    if value is None or value == "latest":
        return None
    if not value.isdigit() or len(value) > 16:
        raise UsageError(f"--reverify-run: {value!r} is neither a seq (a whole number) nor "
                         "'latest'", field="reverify_run")
    return int(value)


def _recorded(ledger: Ledger, seq: int | None) -> tuple[dict[str, Any], dict[str, Any]]:
    """The report rebuilt from a recorded run and what the section says about its proof.
    Raises IntegrityError when the entry does not check against its hashes."""
    run = ledger.reverify_run(seq)
    doc = run["document"]
    if not run["integrity"]["verified"] or not isinstance(doc, dict):
        codes = ", ".join(run["integrity"]["codes"]) or "no document"
        raise IntegrityError(f"--reverify-run: entry {run['seq']} does not check against its "
                             f"hashes ({codes}); see ledger audit",
                             code="reverify_run_unverified", field="reverify_run")
    rv = {**report_of(doc, run["outcomes"]), "ledger_id": ledger.meta.ledger_id}
    return rv, {"seq": run["seq"], "entry_hash": run["entry_hash"],
                "recorded_at": run["recorded_at"], "outcomes_proven": run["outcomes_proven"]}


COMMANDS = [report]
