"""``ledger append``, ``ledger show``, ``ledger head``."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import Any

import click

from ledger.cli.input import Oversized, read_documents
from ledger.cli.output import dumps, emit_json, emit_mapping, format_option, integrity_text
from ledger.cli.state import CommandObj
from ledger.core.submission import MAX_SUBMISSION_BYTES
from ledger.facade import Ledger

BATCH = 1000  # items per transaction
BATCH_BYTES = 8 * 1024 * 1024  # ... or fewer, once their text reaches this size


@click.command()
@click.argument("files", nargs=-1, type=click.Path(allow_dash=True, dir_okay=False,
                                                   exists=False))
@click.option("--producer", default=None, help="Producer identity recorded on each entry.")
@click.option("--tenant", default=None, metavar="TENANT",
              help="Append to this tenant's chain (1..63 of a-z, 0-9, '.', '_', '-'; "
                   "default: the tenant 'default').")
@click.pass_obj
def append(obj: CommandObj, files: tuple[str, ...], producer: str | None,
           tenant: str | None) -> None:
    """Append submissions from FILES (JSON, JSON array or JSON Lines; '-' = stdin).

    Prints one JSON line per submission: {"ok": true, "seq", "entry_hash", ...}
    or {"ok": false, "error": {code, field, message}}.  Exit 0 when every
    submission was appended, 2 when any was rejected.  JSON Lines are streamed
    (memory stays bounded); one submission holds at most 1 MiB, a JSON array
    input at most 64 MiB.  A bad --tenant is a usage error (exit 2, field tenant)
    before anything is read.
    """
    from ledger.core.tenant import DEFAULT_TENANT, check_tenant

    chain = DEFAULT_TENANT if tenant is None else check_tenant(tenant)
    for path in files:
        if path != "-":
            try:
                open(path, "rb").close()
            except OSError as exc:
                raise click.BadParameter(f"cannot read {path}: {exc.strerror}",
                                         param_hint="FILES") from None
    failed = 0
    with Ledger.open(obj["db_url"]) as ledger:
        batch: list[bytes] = []
        lines: dict[int, int] = {}  # batch index -> line number of an oversized line
        size = 0
        for doc in _inputs(files):
            if isinstance(doc, Oversized):
                lines[len(batch)] = doc.line
                doc = doc.prefix
            batch.append(doc)
            size += len(doc)
            if len(batch) >= BATCH or size >= BATCH_BYTES:
                failed += _flush(ledger, batch, producer, lines, chain)
                batch, lines, size = [], {}, 0
        if batch:
            failed += _flush(ledger, batch, producer, lines, chain)
    if failed:
        sys.exit(2)


def _inputs(paths: tuple[str, ...]) -> Iterator[bytes | Oversized]:
    for path in paths or ("-",):
        if path == "-":
            yield from read_documents(sys.stdin.buffer, "stdin")
        else:
            with open(path, "rb") as fh:
                yield from read_documents(fh, path)


def _flush(ledger: Ledger, batch: list[bytes], producer: str | None,
           lines: dict[int, int], tenant: str) -> int:
    """Append one batch and print its results; they are written (and flushed) as soon
    as the batch has committed, before the next batch is read."""
    failed = 0
    for i, res in enumerate(ledger.append_many(batch, producer=producer, tenant=tenant)):
        out = res.to_dict()
        if i in lines and not res.ok and out["error"]["code"] == "too_large":
            out["error"]["message"] = (f"line {lines[i]} holds more than "
                                       f"{MAX_SUBMISSION_BYTES} bytes, the limit of one "
                                       "submission")
        click.echo(dumps(out))
        failed += not res.ok
    sys.stdout.flush()
    return failed


@click.command()
@click.argument("seq", type=click.IntRange(min=0))
@format_option(choices=("table", "json"))
@click.pass_obj
def show(obj: CommandObj, seq: int, fmt: str) -> None:
    """Show the entry at SEQ, checked against what was hashed (json: stored result,
    evidence preimage, attestation, envelope, hashes, the integrity verdict and the audit
    findings).  The values are the hashed envelope's, never the indexed columns; exit 1
    when the entry does not verify (what did not check is named on stderr)."""
    with Ledger.open(obj["db_url"]) as ledger:
        view = ledger.get(seq)
    integrity = view["integrity"]
    if fmt == "json":
        emit_json(view)
    else:
        summary: dict[str, Any] = {"integrity": integrity_text(integrity)}
        summary.update({k: v for k, v in view.items()
                        if k not in ("document", "payloads", "envelope", "integrity")})
        doc = view.get("document") or {}
        if "agent_message" in doc:
            summary["agent_message"] = doc["agent_message"]
        emit_mapping(summary, "table")
    if not integrity["verified"]:
        for p in integrity.get("problems", ()):
            click.echo(f"not verified: {p['code']} ({p['field']}): hashed {p['expected']!r},"
                       f" stored {p['actual']!r}", err=True)
        sys.exit(1)


@click.command()
@format_option(choices=("table", "json"))
@click.pass_obj
def head(obj: CommandObj, fmt: str) -> None:
    """Print the ledger size and head hash."""
    with Ledger.open(obj["db_url"]) as ledger:
        emit_mapping(ledger.head(), fmt)


COMMANDS = [append, show, head]
