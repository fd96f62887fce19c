"""``ledger import qwed``: bring QWED 8.0's audit log into the ledger, re-verified.

Exit codes: 0 every row verified and is in the ledger (or would be, with --dry-run);
1 rows were quarantined (hash, link or HMAC failed, legacy unchained rows, or the
ledger refused them) — each is listed on stderr; 2 usage; 4 could not run.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from ledger.cli.output import emit_mapping
from ledger.cli.state import CommandObj


@click.group(name="import")
def import_group() -> None:
    """Import another system's audit log into the ledger."""


@import_group.command()
@click.option("--source", required=True, metavar="URL|FILE",
              help="QWED's database (SQLAlchemy URL: sqlite:///qwed.db, postgresql://...) or "
                   "a JSON Lines dump of its verificationlog table.")
@click.option("--hmac-secret-file", type=click.Path(dir_okay=False, exists=True), default=None,
              help="File holding QWED_AUDIT_SECRET_KEY: every row's HMAC is checked. Without "
                   "it the HMAC is recorded as unchecked.")
@click.option("--organization", type=int, default=None, metavar="ID",
              help="Import one organisation's chain only.")
@click.option("--namespace", default="default", show_default=True, metavar="NAME",
              help="Names this QWED deployment in the idempotency keys "
                   "(qwed:NAME:<organization>:<id>).")
@click.option("--label", default=None, metavar="TEXT",
              help="Your description of this run, recorded in the import entry (the source "
                   "path or URL never is).")
@click.option("--tenant", default=None, metavar="TENANT",
              help="The tenant whose chain the rows join (default: 'default'); with "
                   "--tenant-map, the tenant of the organisations it does not name.")
@click.option("--tenant-map", "tenant_map", multiple=True, metavar="ORG=TENANT",
              help="Organisation ORG's rows join tenant TENANT's chain (repeatable).")
@click.option("--dry-run", is_flag=True, help="Verify and report; write nothing.")
@click.pass_obj
def qwed(obj: CommandObj, source: str, hmac_secret_file: str | None, organization: int | None,
         namespace: str, label: str | None, tenant: str | None, tenant_map: tuple[str, ...],
         dry_run: bool) -> None:
    """Re-verify QWED's per-organisation hash chain (entry hash, link, HMAC) and append
    each verified row as a result entry with its provenance, then one `import` entry.
    Idempotent and resumable: a re-run appends nothing new.  Prints the report (JSON)."""
    from ledger.errors import UsageError
    from ledger.facade import Ledger
    from ledger.ops.qwed_import import check_tenant_map, read_source

    pairs = [m.partition("=") for m in tenant_map]
    if any(not sep for _, sep, _ in pairs):
        raise UsageError("--tenant-map takes ORG=TENANT", field="tenant_map")
    tenants, others = check_tenant_map({org: t for org, _, t in pairs}, tenant)
    secret = None
    if hmac_secret_file is not None:
        secret = Path(hmac_secret_file).read_bytes().rstrip(b"\r\n")
    where, rows = read_source(source, organization)
    with Ledger.open(obj["db_url"]) as ledger:
        report = ledger.import_qwed(rows, source=where, secret=secret, namespace=namespace,
                                    dry_run=dry_run, label=label, tenants=tenants,
                                    tenant=others)
    emit_mapping(report.to_dict(), "json")
    for q in report.quarantined:
        click.echo(f"quarantined: organization {q['organization_id']} row {q['id']}: "
                   f"{q['code']} ({q['reason']})", err=True)
    click.echo(f"{report.rows} rows: {report.imported} imported, {report.replayed} already "
               f"there, {len(report.quarantined)} quarantined"
               + (" (dry run)" if dry_run else ""), err=True)
    if report.quarantined:
        sys.exit(1)


COMMANDS = [import_group]
