"""``ledger query``: filtered, keyset-paginated reads in three disclosure layers.

Exit codes: 0 success (also when nothing matches); 2 usage; 4 could not run.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

import click

from ledger.cli.output import dumps, emit_rows, format_option, integrity_text
from ledger.cli.state import CommandObj
from ledger.ops.query import (
    CSV_COLUMNS,
    MAX_LIMIT,
    STRING_FILTERS,
    TABLE_COLUMNS,
    Filters,
    make_filters,
)
from ledger.ops.view import LAYERS

_HELP = {
    "kind": "Entry kind (result, key_event, audit_run, redaction, hold, import, reverify_run).",
    "engine": "Engine name.",
    "status": "VERIFIED, UNVERIFIABLE or BLOCKED (the action or outcome for other kinds).",
    "constraint_id": "developer_fields.constraint_id.",
    "proof_ref": "proof_ref (sha256:<hex>).",
    "subject": "Producer correlation id.",
    "producer": "Who appended the entry.",
    "att_verdict": "Attestation verdict at append: none, unchecked or valid.",
    "att_kid": "Attestation key id (the token's kid).",
    "tenant": "Tenant (docs/tenants.md); `ledger export --tenant T` alone is the tenant's "
              "complete chain.",
}


def filter_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """The filter options shared by ``query`` and ``export`` (each text filter repeatable:
    several values match any of them; different filters must all match)."""
    for name in reversed(STRING_FILTERS):
        fn = click.option(f"--{name.replace('_', '-')}", name, multiple=True, metavar="TEXT",
                          help=_HELP[name] + " Repeatable.")(fn)
    fn = click.option("--until", default=None, metavar="RFC3339",
                      help="Recorded before this time (exclusive).")(fn)
    fn = click.option("--since", default=None, metavar="RFC3339",
                      help="Recorded at or after this time, e.g. 2026-01-01T00:00:00Z.")(fn)
    return fn


def filters_from(kw: dict[str, Any], start: int = 0, end: int | None = None) -> Filters:
    return make_filters(**{n: kw.pop(n) or None for n in STRING_FILTERS},
                        since=kw.pop("since"), until=kw.pop("until"), start=start, end=end,
                        has_findings=kw.pop("has_findings", False))


class _Flagged:
    """Counts the rows streamed through it that did not verify."""

    def __init__(self) -> None:
        self.n = 0

    def __call__(self, rows: Iterable[dict[str, Any]]) -> Iterator[dict[str, Any]]:
        for r in rows:
            self.n += not (r.get("integrity") or {}).get("verified", True)
            yield r


def _cells(rows: Iterable[dict[str, Any]], fmt: str) -> Iterator[dict[str, Any]]:
    """CSV cells holding objects are JSON text (not Python reprs); a table shows the
    integrity verdict as one word and what did not check."""
    for r in rows:
        if fmt == "csv":
            yield {k: dumps(v) if isinstance(v, (dict, list)) else v for k, v in r.items()}
        elif fmt == "table":
            yield {**r, "integrity": integrity_text(r.get("integrity"))}
        else:
            yield r


@click.command()
@filter_options
@click.option("--after", type=click.IntRange(min=-1), default=-1, show_default=True,
              metavar="SEQ", help="Keyset pagination: rows with seq > SEQ (the previous "
              "page's next-after).")
@click.option("--limit", type=click.IntRange(1, MAX_LIMIT), default=100, show_default=True,
              help="Rows per page.")
@click.option("--all", "all_pages", is_flag=True, help="Stream every matching row (all pages).")
@click.option("--has-findings", "has_findings", is_flag=True,
              help="Only entries the latest complete audit run (or a later partial run) "
                   "found something on.")
@click.option("--layer", type=click.Choice(LAYERS), default="agent", show_default=True,
              help="agent: status and agent_message only; developer: + engine, "
                   "constraint_id, subject, developer_fields; auditor: everything "
                   "(proof_ref, preimage, attestation, envelope, hashes).")
@format_option()
@click.pass_obj
def query(obj: CommandObj, /, after: int, limit: int, all_pages: bool, layer: str, fmt: str,
          **kw: Any) -> None:
    """Find entries by status, engine, constraint id, time, proof_ref, subject,
    attestation verdict or kid, kind.  Filter values are matched exactly (no
    wildcards).  Every row is checked against what was hashed and shows the envelope's
    values with its integrity verdict; rows that did not verify are counted on stderr.
    Prints one page; the next page's --after goes to stderr."""
    from ledger.facade import Ledger

    f = filters_from(kw)
    columns = (TABLE_COLUMNS if fmt == "table" else CSV_COLUMNS)[layer]
    flagged = _Flagged()
    with Ledger.open(obj["db_url"]) as ledger:
        if all_pages:
            emit_rows(_cells(flagged(ledger.iter_query(f, after=after, layer=layer)), fmt),
                      fmt, columns)
        else:
            page = ledger.query_page(f, after=after, limit=limit, layer=layer)
            emit_rows(_cells(flagged(page.rows), fmt), fmt, columns)
            if page.next_after is not None:
                click.echo(f"more rows: next page with --after {page.next_after}", err=True)
    if flagged.n:
        click.echo(f"{flagged.n} row(s) did not verify against what was hashed (see their "
                   "integrity; run `ledger audit`)", err=True)


COMMANDS = [query]
