"""``ledger spool status DIR`` and ``ledger spool drain DIR --url URL --token TOKEN``:
look at and empty a producer's durable spool (ledger/client/spool.py).

Exit codes: 0 done (status: read; drain: the spool is empty and nothing was dropped);
1 drain stopped with items left (the ledger is still unavailable), the spool is corrupt,
or bytes were dropped (a torn tail cut off, or damage set aside by ``--salvage``): never
0 when an item may have been lost; 2 usage, or items refused (by the ledger, or as no
JSON object; kept in ``DIR/rejected.jsonl``); 4 the spool is in use by another process.
"""

from __future__ import annotations

import sys

import click

from ledger.cli.output import emit_mapping, format_option


@click.group()
def spool() -> None:
    """A producer's spool: submissions kept while the ledger could not take them."""


@spool.command()
@click.argument("directory", type=click.Path(file_okay=False))
@format_option(default="text", choices=("text", "json"))
def status(directory: str, fmt: str) -> None:
    """Pending items and bytes, limits, rejected items, and any torn tail that the next
    open will cut off.  Read-only: takes no lock and repairs nothing."""
    from ledger.client.spool import inspect

    st = inspect(directory).to_dict()
    if fmt == "json":
        emit_mapping(st, "json")
        return
    click.echo(f"{st['pending']} pending ({st['pending_bytes']} bytes) in "
               f"{st['segments']} segment(s); {st['rejected']} rejected")
    for d in st["dropped"]:
        click.echo(f"torn tail: {d['segment']} at byte {d['offset']} ({d['reason']})")


def _say_dropped(dropped: list[dict[str, object]]) -> None:
    for d in dropped:
        kept = f", kept in {d['kept_in']}" if d.get("kept_in") else ""
        click.echo(f"dropped {d['bytes']} bytes of {d['segment']} at byte {d['offset']} "
                   f"({d['reason']}{kept})", err=True)


@spool.command()
@click.argument("directory", type=click.Path(file_okay=False, exists=True))
@click.option("--url", required=True, envvar="LEDGER_URL", metavar="URL",
              help="The ledger service, e.g. http://127.0.0.1:8080 (or $LEDGER_URL).")
@click.option("--token", required=True, envvar="LEDGER_TOKEN", metavar="TOKEN",
              help="A producer token (or $LEDGER_TOKEN).")
@click.option("--origin", default=None, metavar="ORIGIN",
              help="Pin the ledger origin receipts must name (default: as /v1/health says).")
@click.option("--batch", "drain_batch", default=100, show_default=True,
              type=click.IntRange(1, 1000), help="Items per batch request.")
@click.option("--timeout", default=10.0, show_default=True, type=float, help="Seconds per request.")
@click.option("--salvage", is_flag=True,
              help="Open a corrupt spool anyway: set each bad stretch aside in "
                   "DIR/<segment>.damaged-<offset>, keep every readable record (exit 1).")
@format_option(default="text", choices=("text", "json"))
def drain(directory: str, url: str, token: str, origin: str | None, drain_batch: int,
          timeout: float, salvage: bool, fmt: str) -> None:
    """Send every pending item, oldest first, with the idempotency key it was spooled
    with (a retry never stores an item twice); verify each receipt."""
    from ledger.client import LedgerClient

    with LedgerClient(url, token, spool_dir=directory, origin=origin, timeout=timeout,
                      drain_batch=drain_batch, spool_salvage=salvage) as client:
        dropped = client.spool.status().dropped
        report = client.drain()
    if fmt == "json":
        emit_mapping({**report.to_dict(), "dropped": dropped}, "json")
    else:
        click.echo(f"sent {report.sent}: {report.appended} appended, {report.replayed} "
                   f"replayed, {report.rejected} rejected; {report.remaining} remaining")
    if report.error:
        click.echo(f"stopped: {report.error}", err=True)
    _say_dropped(dropped)
    if report.remaining or dropped:
        sys.exit(1)
    if report.rejected:
        click.echo(f"rejected items are in {directory}/rejected.jsonl", err=True)
        sys.exit(2)


COMMANDS = [spool]
