"""``ledger append``, ``ledger show``, ``ledger head``."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import Any

import click

from ledger.cli.output import dumps, emit_json, emit_mapping, format_option
from ledger.core.jsonseq import documents
from ledger.facade import Ledger

BATCH = 1000


def _inputs(paths: tuple[str, ...]) -> Iterator[bytes]:
    for path in paths or ("-",):
        if path == "-":
            yield from documents(sys.stdin.buffer.read())
        else:
            with open(path, "rb") as fh:
                yield from documents(fh.read())


@click.command()
@click.argument("files", nargs=-1, type=click.Path(allow_dash=True, dir_okay=False,
                                                   exists=False))
@click.option("--producer", default=None, help="Producer identity recorded on each entry.")
@click.pass_obj
def append(obj: dict, files: tuple[str, ...], producer: str | None) -> None:
    """Append submissions from FILES (JSON, JSON array or JSON Lines; '-' = stdin).

    Prints one JSON line per submission: {"ok": true, "seq", "entry_hash", ...}
    or {"ok": false, "error": {code, field, message}}.  Exit 0 when every
    submission was appended, 2 when any was rejected.
    """
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
        for doc in _inputs(files):
            batch.append(doc)
            if len(batch) >= BATCH:
                failed += _flush(ledger, batch, producer)
                batch = []
        if batch:
            failed += _flush(ledger, batch, producer)
    if failed:
        sys.exit(2)


def _flush(ledger: Ledger, batch: list[bytes], producer: str | None) -> int:
    failed = 0
    for res in ledger.append_many(batch, producer=producer):
        click.echo(dumps(res.to_dict()))
        failed += not res.ok
    return failed


@click.command()
@click.argument("seq", type=click.IntRange(min=0))
@format_option(choices=("table", "json"))
@click.pass_obj
def show(obj: dict, seq: int, fmt: str) -> None:
    """Show the entry at SEQ (json: stored result, evidence preimage, attestation,
    envelope and hashes)."""
    with Ledger.open(obj["db_url"]) as ledger:
        view = ledger.get(seq)
    if fmt == "json":
        emit_json(view)
        return
    summary: dict[str, Any] = {k: v for k, v in view.items()
                               if k not in ("document", "payloads", "envelope")}
    doc = view.get("document") or {}
    if "agent_message" in doc:
        summary["agent_message"] = doc["agent_message"]
    emit_mapping(summary, "table")


@click.command()
@format_option(choices=("table", "json"))
@click.pass_obj
def head(obj: dict, fmt: str) -> None:
    """Print the ledger size and head hash."""
    with Ledger.open(obj["db_url"]) as ledger:
        emit_mapping(ledger.head(), fmt)


COMMANDS = [append, show, head]
