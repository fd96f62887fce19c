"""``ledger audit``: re-verify the whole ledger (or a range), honestly.

Exit codes: 0 every row verified; 1 any finding; 3 complete with abstentions
only (human review needed); 2 usage; 4 could not run.
"""

from __future__ import annotations

import getpass
import json
import sys

import click

from ledger.cli.state import CommandObj
from ledger.cli.witness import anchor_policy_options
from ledger.core.audit_report import AuditReport
from ledger.core.finding import EXIT_CODES
from ledger.errors import IntegrityError, UsageError
from ledger.facade import Ledger
from ledger.ops.audit import AuditOptions, auto_workers
from ledger.report import write_html


# (not ParamType[int, Any]: click 8.1, which the dependency range allows, has a plain
# ParamType class that cannot be subscripted at run time)
class Workers(click.ParamType):  # type: ignore[type-arg]

    """A whole number from 1 to 64, or ``auto``: the processors this process may use."""

    name = "N|auto"

    def convert(self, value: object, param: click.Parameter | None,
                ctx: click.Context | None) -> int:
        if isinstance(value, int) and not isinstance(value, bool):
            n = value
        elif str(value).strip().lower() == "auto":
            return auto_workers()
        else:
            try:
                n = int(str(value))
            except ValueError:
                self.fail(f"{value!r} is neither a whole number from 1 to 64 nor 'auto'",
                          param, ctx)
        if not 1 <= n <= 64:
            self.fail(f"{n} is not a whole number from 1 to 64 (or 'auto')", param, ctx)
        return n


@click.command()
@click.option("--from", "start", type=click.IntRange(min=0), default=0, show_default=True,
              help="First seq to audit.")
@click.option("--to", "end", type=click.IntRange(min=0), default=None,
              help="Audit up to (not including) this seq; default: the head.")
@click.option("--workers", type=Workers(), default="1", show_default=True,
              help="Split the range across this many processes ('auto': one per processor "
              "this process may use); a parallel run is resumable like any other.")
@click.option("--policy", "policy_path", type=click.Path(dir_okay=False), default=None,
              help="Engine policy file (default: the packaged policy).")
@click.option("--since-last", is_flag=True,
              help="Only what is new since the last recorded audit (plus the link to it).")
@click.option("--resume", is_flag=True, help="Continue the last interrupted audit run (a "
              "parallel one with its own parts, one process each).")
@click.option("--record", is_flag=True,
              help="Append an audit_run entry (summary and report digest) to the ledger.")
@click.option("--no-attestations", is_flag=True,
              help="Do not check attestations (they are then abstained, never passed).")
@click.option("--checkpoint", "checkpoints", multiple=True, type=click.Path(dir_okay=False,
              exists=True), help="A signed checkpoint kept outside the database; the ledger "
              "must be a consistent extension of it (repeatable).")
@click.option("--key", "keys", multiple=True, type=click.Path(dir_okay=False, exists=True),
              help="Ledger public key(s) (PEM or JWKS) to verify --checkpoint signatures.")
@click.option("--json-report", type=click.Path(dir_okay=False, allow_dash=True), default=None,
              help="Write the full JSON report here ('-' = stdout).")
@click.option("--producer", default=None, help="Identity recorded with --record.")
@click.option("--tenant", default=None, metavar="TENANT",
              help="Audit only this tenant's chain and its place in the global tree "
              "(docs/tenants.md); with --record, recorded in the tenant's chain; not with "
              "--from/--to/--since-last/--resume.")
@click.option("--html", "html_file", type=click.Path(dir_okay=False), default=None,
              help="Also write a self-contained HTML report (summary, findings, charts, "
              "the checkpoint it stands on, commands to re-verify).")
@anchor_policy_options
@click.pass_obj
def audit(obj: CommandObj, start: int, end: int | None, workers: int, policy_path: str | None,
          since_last: bool, resume: bool, record: bool, no_attestations: bool,
          checkpoints: tuple[str, ...], keys: tuple[str, ...], json_report: str | None,
          producer: str | None, html_file: str | None, anchor_policy: object,
          tenant: str | None) -> None:
    """Recompute every hash, proof and attestation; report every finding."""
    if tenant is not None:
        for flag, used in (("from", start != 0), ("to", end is not None),
                           ("since-last", since_last), ("resume", resume),
                           ("checkpoint", bool(checkpoints)), ("html", bool(html_file))):
            if used:
                raise UsageError(f"--tenant audits the tenant's whole chain: not with --{flag}",
                                 field="tenant")
        with Ledger.open(obj["db_url"]) as ledger:
            _finish(ledger.audit_tenant(tenant, policy_path=policy_path,
                                        check_attestations=not no_attestations, record=record,
                                        producer=producer, command="ledger audit",
                                        actor=producer or _os_user()),
                    json_report, None)
        return
    opts = AuditOptions(start=start, end=end, workers=workers, policy_path=policy_path,
                        check_attestations=not no_attestations, since_last=since_last,
                        resume=resume, record=record, producer=producer,
                        checkpoints=checkpoints, keys=keys, anchor_policy=anchor_policy,
                        command="ledger audit", actor=producer or _os_user())
    with Ledger.open(obj["db_url"]) as ledger:
        show = sys.stderr.isatty()
        total = max(0, (end if end is not None else _size(ledger)) - start)
        with click.progressbar(length=total, label="auditing", file=sys.stderr,
                               hidden=not show) as bar:
            report = ledger.audit(opts, progress=bar.update)
        if html_file:
            write_html(html_file, ledger.report_data(report, title="Audit report",
                                                     command="ledger audit"))
    _finish(report, json_report, html_file)


def _finish(report: AuditReport, json_report: str | None, html_file: str | None) -> None:
    """Write the report where asked, print its summary and findings, exit with its code."""
    if json_report == "-":
        click.echo(json.dumps(report.to_json(), indent=2))
    elif json_report:
        with open(json_report, "w", encoding="utf-8") as fh:
            json.dump(report.to_json(), fh, indent=2)
    click.echo(report.summary_line(), err=True)
    for f in report.findings[:20]:
        click.echo(f"  {f.line()}", err=True)
    if len(report.findings) > 20:
        click.echo(f"  … {len(report.findings) - 20} more in the JSON report", err=True)
    if html_file:
        click.echo(f"HTML report -> {html_file}", err=True)
    sys.exit(EXIT_CODES[report.outcome])


COMMANDS = [audit]


def _os_user() -> str | None:
    """Who ran the command, as the operating system knows them (the run's label)."""
    try:
        return getpass.getuser()
    except (OSError, KeyError):  # no login name in the environment or the user database
        return None


def _size(ledger: Ledger) -> int:
    """The head's size for the progress bar; 0 when the head row is gone (the audit itself
    reports that as a finding)."""
    try:
        return int(ledger.head()["size"])
    except IntegrityError:
        return 0
