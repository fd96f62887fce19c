"""``ledger reverify``: re-execute the producing engines on the stored inputs and compare.

Every run is recorded (``audit_runs``, ``job = 'reverify'``) and committed page by page;
``--resume`` continues the latest interrupted one (docs/reverify.md).

Exit codes: 0 every selected entry agrees (or none was selected); 1 any disagreement;
3 no disagreement, but some entries were not re-executable or hit an engine error;
2 usage; 4 could not run.
"""

from __future__ import annotations

import json
import sys

import click

from ledger.cli.audit import Workers
from ledger.cli.state import CommandObj
from ledger.core.canonical import MAX_SAFE_INTEGER
from ledger.core.reexec import EXIT_CODES, summary_line
from ledger.core.timestamp import parse_rfc3339
from ledger.facade import Ledger
from ledger.ops.reverify import ReverifyOptions


def _time(name: str, value: str | None) -> int | None:
    if value is None:
        return None
    try:
        return parse_rfc3339(value)
    except ValueError:
        raise click.BadParameter(f"{value!r} is not an RFC 3339 time "
                                 "(e.g. 2026-01-01T00:00:00Z)", param_hint=f"--{name}") from None


@click.command()
@click.option("--from", "start", type=click.IntRange(min=0), default=0, show_default=True,
              help="First seq to consider.")
@click.option("--to", "end", type=click.IntRange(min=0), default=None,
              help="Up to (not including) this seq; default: the head.")
@click.option("--seq", "seqs", type=click.IntRange(min=0, max=MAX_SAFE_INTEGER), multiple=True,
              help="Only this entry (repeatable).")
@click.option("--engine", "engines", multiple=True, metavar="NAME",
              help="Only results of this engine (repeatable).")
@click.option("--since", default=None, metavar="RFC3339",
              help="Recorded at or after this time.")
@click.option("--until", default=None, metavar="RFC3339",
              help="Recorded before this time (exclusive).")
@click.option("--workers", type=Workers(), default="1", show_default=True,
              help="Sandboxed re-execution processes ('auto': one per processor).")
@click.option("--time-limit", "time_limit", type=click.FloatRange(min=0.01, max=3600),
              default=10.0, show_default=True,
              help="Seconds one entry's re-execution may take; then its worker is killed.")
@click.option("--memory-limit", "memory_mb", type=click.IntRange(min=64, max=1 << 20),
              default=2048, show_default=True,
              help="MiB of address space of each worker process.")
@click.option("--resume", is_flag=True,
              help="Continue the latest interrupted run from its checkpoint (give the same "
              "range, filters and limits; they are checked).")
@click.option("--record", is_flag=True,
              help="When the run completes, append a reverify_run entry (the report without "
              "its outcomes, plus their digest) to the ledger.")
@click.option("--producer", default=None, help="Identity recorded with --record.")
@click.option("--tenant", default=None, metavar="TENANT",
              help="Only this tenant's results; with --record the run is recorded in the "
              "tenant's chain, where its auditors see it (docs/tenants.md).")
@click.option("--json-report", type=click.Path(dir_okay=False, allow_dash=True), default=None,
              help="Write the full JSON report here ('-' = stdout).")
@click.pass_obj
def reverify(obj: CommandObj, start: int, end: int | None, seqs: tuple[int, ...],
             engines: tuple[str, ...], since: str | None, until: str | None, workers: int,
             time_limit: float, memory_mb: int, resume: bool, record: bool,
             producer: str | None, json_report: str | None, tenant: str | None) -> None:
    """Re-run each result's engine on its stored inputs; report every disagreement."""
    opts = ReverifyOptions(start=start, end=end, seqs=seqs, engines=engines,
                           since_us=_time("since", since), until_us=_time("until", until),
                           workers=workers, time_limit_s=time_limit, memory_mb=memory_mb,
                           resume=resume, record=record, producer=producer, tenant=tenant)
    with Ledger.open(obj["db_url"]) as ledger:
        show = sys.stderr.isatty()
        with click.progressbar(length=0, label="re-verifying", file=sys.stderr,
                               hidden=not show) as bar:
            def total(n: int) -> None:
                bar.length = n

            report = ledger.reverify(opts, progress=bar.update, total=total)
    if json_report == "-":
        click.echo(json.dumps(report, indent=2))
    elif json_report:
        with open(json_report, "w", encoding="utf-8") as fh:
            json.dump(report, fh, indent=2)
    click.echo(summary_line(report["summary"]), err=True)
    if "recorded_seq" in report:
        click.echo(f"recorded as entry {report['recorded_seq']} (reverify_run)", err=True)
    shown = [o for o in report["outcomes"] if o["outcome"] != "agrees"]
    for o in shown[:20]:
        who = o["reexecutor"]
        what = ", ".join(d["field"] for d in o.get("differences", [])) or \
            f"{o.get('reason')}: {o.get('detail', '')}"
        click.echo(f"  seq {o['seq']}: {o['engine']} {o['outcome']} ({what}) "
                   f"[{who['name']} {who['version']}]", err=True)
    if len(shown) > 20:
        click.echo(f"  … {len(shown) - 20} more in the JSON report", err=True)
    sys.exit(EXIT_CODES[report["outcome"]])


COMMANDS = [reverify]
