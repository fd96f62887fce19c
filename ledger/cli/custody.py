"""``ledger redact``, ``ledger retention apply``, ``ledger hold add|release|list``
(docs/redaction.md).  Each redacted entry is one JSON line on stdout; summaries go to
stderr.  Exit 0 on success (also when nothing matched), 2 for a refused or bad request."""

from __future__ import annotations

import sys
from collections.abc import Callable

import click
from click.decorators import FC

from ledger.cli.output import dumps, emit_mapping, format_option
from ledger.cli.signing import keys_dir_option
from ledger.cli.state import CommandObj
from ledger.crypto.keys import Keyring
from ledger.facade import Ledger
from ledger.ops.custody import Ask, load_retention, write_report

PAYLOAD_CHOICE = click.Choice(["all", "evidence", "result", "preimage", "attestation",
                               "query", "meta", "subject"])


def _retention_option() -> Callable[[FC], FC]:
    return click.option("--retention", "retention_path", envvar="LEDGER_RETENTION_POLICY",
                        type=click.Path(dir_okay=False, exists=True), default=None,
                        help="Retention policy (ledger-retention/1) whose minimum retention "
                             "a redaction must respect (default: $LEDGER_RETENTION_POLICY).")


@click.command()
@click.option("--subject", default=None, help="Redact every result entry of this subject.")
@click.option("--seq", "seqs", multiple=True, type=click.IntRange(min=0),
              help="Redact this entry (repeatable).")
@click.option("--payload", "payloads", multiple=True, type=PAYLOAD_CHOICE,
              help="Payload to erase (repeatable; default all; evidence = the preimage).")
@click.option("--reason", required=True, help="Why (recorded in the redaction entry).")
@click.option("--reference", default=None, help="Legal basis or request reference.")
@click.option("--requested-by", default=None, help="Who asked (recorded).")
@click.option("--producer", default=None, help="Identity recorded as the entry's producer.")
@click.option("--keep-attestation", is_flag=True,
              help="Keep the attestation when the query is erased (it binds the query's "
                   "unsalted hash; recorded in the redaction).")
@click.option("--override-minimum", default=None, metavar="REASON",
              help="Erase even before the minimum retention ends (the reason is recorded).")
@_retention_option()
@click.option("--dry-run", is_flag=True, help="List what would be erased; change nothing.")
@click.option("--report", "report_path", type=click.Path(dir_okay=False), default=None,
              help="Write the signed erasure report (ledger-erasure-report/1) here.")
@keys_dir_option()
@click.pass_obj
def redact(obj: CommandObj, subject: str | None, seqs: tuple[int, ...], payloads: tuple[str, ...],
           reason: str, reference: str | None, requested_by: str | None, producer: str | None,
           keep_attestation: bool, override_minimum: str | None, retention_path: str | None,
           dry_run: bool, report_path: str | None, keys_dir: str) -> None:
    """Erase payloads of entries (a data-subject request) through redaction entries.

    The payload bytes are deleted in the transaction that appends the redaction entry;
    the audit then reports them as redacted, never failed.  Prints one JSON line per
    entry: {"seq", "payloads", "already_erased", "redaction_seq", "dry_run"}.
    """
    if subject is None and not seqs:
        raise click.UsageError("give --subject S and/or --seq N")
    ask = Ask(reason, reference, requested_by, "operator", producer)
    ring = None if dry_run else Keyring.load(keys_dir)
    with Ledger.open(obj["db_url"]) as ledger:
        out = ledger.redact(ask, subject=subject, seqs=seqs, payloads=payloads or ("all",),
                            keep_attestation=keep_attestation,
                            override_minimum=override_minimum,
                            retention=load_retention(retention_path), dry_run=dry_run,
                            keyring=ring)
        for line in out.lines():
            click.echo(dumps(line))
        if ring is not None and report_path:
            write_report(report_path, ledger.erasure_report(
                out, ask, ring, keep_attestation=keep_attestation,
                override_minimum=override_minimum))
    n = sum(len(t.erase) for t in out.targets)
    verb = "would erase" if dry_run else "erased"
    k, r = len(out.targets), len(out.redaction_seqs)
    click.echo(f"redact: {verb} {n} payload{'' if n == 1 else 's'} of {k} "
               f"entr{'y' if k == 1 else 'ies'}"
               + (f" in redaction entr{'y' if r == 1 else 'ies'} "
                  f"{', '.join(map(str, out.redaction_seqs))}" if out.redaction_seqs else "")
               + (f"; report {report_path}" if ring is not None and report_path else ""),
               err=True)


@click.group()
def retention() -> None:
    """Retention policies (ledger-retention/1)."""


@retention.command("apply")
@click.option("--policy", "policy_path", required=True,
              type=click.Path(dir_okay=False, exists=True), help="The retention policy file.")
@click.option("--dry-run", is_flag=True, help="List what would be erased; change nothing.")
@click.option("--producer", default=None, help="Identity recorded as the entries' producer.")
@click.option("--tenant", default=None, metavar="TENANT",
              help="Apply the policy to this tenant's entries only; the redaction entries "
                   "join its chain (default: every tenant's entries, default chain).")
@keys_dir_option()
@click.pass_obj
def retention_apply(obj: CommandObj, policy_path: str, dry_run: bool, producer: str | None,
                    tenant: str | None, keys_dir: str) -> None:
    """Erase every payload whose retention period has ended, through redaction entries.

    Held entries are skipped.  Resumable: run it again after an interruption.  Prints
    one JSON line per entry, then a summary on stderr (a progress bar on a TTY).  A bad
    --tenant is a usage error (exit 2, field tenant) before anything is read."""
    from ledger.core.tenant import check_tenant

    if tenant is not None:
        check_tenant(tenant)
    policy = load_retention(policy_path)
    assert policy is not None  # None only for no path, and --policy is required
    with Ledger.open(obj["db_url"]) as ledger:
        bar = click.progressbar(length=1, label="retention", file=sys.stderr,
                                hidden=not sys.stderr.isatty())
        with bar:
            def progress(done: int, total: int) -> None:
                bar.length = max(total, 1)
                bar.update(done - bar.pos)

            run = ledger.apply_retention(policy, dry_run=dry_run, producer=producer,
                                         progress=progress, tenant=tenant,
                                         keyring=None if dry_run else Keyring.load(keys_dir))
    for line in run.lines:
        click.echo(dumps(line))
    click.echo("retention apply: " + dumps(run.summary()), err=True)


@click.group()
def hold() -> None:
    """Legal holds: held entries are never erased by redaction or retention."""


@hold.command("add")
@click.option("--subject", default=None, help="Hold every result entry of this subject now.")
@click.option("--seq", "seqs", multiple=True, type=click.IntRange(min=0),
              help="Hold this entry (repeatable).")
@click.option("--reason", required=True, help="Why (recorded in the hold entry).")
@click.option("--reference", default=None, help="Case or order reference.")
@click.option("--producer", default=None, help="Identity recorded as the entry's producer.")
@click.pass_obj
def hold_add(obj: CommandObj, subject: str | None, seqs: tuple[int, ...], reason: str,
             reference: str | None, producer: str | None) -> None:
    """Put entries under a legal hold; prints the hold entry's seq."""
    if subject is None and not seqs:
        raise click.UsageError("give --subject S and/or --seq N")
    with Ledger.open(obj["db_url"]) as ledger:
        seq = ledger.hold_add(Ask(reason, reference, None, "operator", producer),
                              subject=subject, seqs=seqs)
    click.echo(dumps({"hold_seq": seq}))


@hold.command("release")
@click.argument("hold_seq", type=click.IntRange(min=0))
@click.option("--reason", required=True, help="Why (recorded in the release entry).")
@click.option("--reference", default=None, help="Case or order reference.")
@click.option("--producer", default=None, help="Identity recorded as the entry's producer.")
@click.pass_obj
def hold_release(obj: CommandObj, hold_seq: int, reason: str, reference: str | None,
                 producer: str | None) -> None:
    """Release the hold entry HOLD_SEQ; prints the release entry's seq."""
    with Ledger.open(obj["db_url"]) as ledger:
        seq = ledger.hold_release(Ask(reason, reference, None, "operator", producer), hold_seq)
    click.echo(dumps({"hold_seq": hold_seq, "release_seq": seq}))


@hold.command("list")
@format_option(choices=("table", "json"))
@click.pass_obj
def hold_list(obj: CommandObj, fmt: str) -> None:
    """The holds in force: hold seq -> held entries."""
    with Ledger.open(obj["db_url"]) as ledger:
        holds = ledger.holds()
    if not holds:
        click.echo("no holds in force", err=True)
        return
    emit_mapping({str(k): v for k, v in holds.items()}, fmt)


COMMANDS = [redact, retention, hold]
