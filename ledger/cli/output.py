"""Reusable output options and writers (results to stdout, summaries to stderr)."""

from __future__ import annotations

import csv
import json
import sys
from collections.abc import Callable, Iterable
from typing import Any

import click

FORMATS = ("table", "json", "jsonl", "csv")


def format_option(default: str = "table", choices: tuple[str, ...] = FORMATS) -> Callable[..., Any]:
    return click.option("--format", "fmt", type=click.Choice(choices), default=default,
                        show_default=True, help="Output format.")


def dumps(obj: Any) -> str:
    return json.dumps(obj, ensure_ascii=False, sort_keys=False)


def emit_json(obj: Any) -> None:
    click.echo(json.dumps(obj, ensure_ascii=False, indent=2))


def emit_rows(rows: Iterable[dict[str, Any]], fmt: str, columns: list[str]) -> None:
    """Stream rows as table, json (one array), jsonl or csv."""
    if fmt == "jsonl":
        for r in rows:
            click.echo(dumps(r))
    elif fmt == "json":
        click.echo(json.dumps(list(rows), ensure_ascii=False, indent=2))
    elif fmt == "csv":
        w = csv.DictWriter(sys.stdout, fieldnames=columns, extrasaction="ignore")
        w.writeheader()
        for r in rows:
            w.writerow({k: ("" if r.get(k) is None else r.get(k)) for k in columns})
    else:
        rows = list(rows)
        widths = {c: max([len(c)] + [len(_cell(r.get(c))) for r in rows]) for c in columns}
        click.echo("  ".join(c.ljust(widths[c]) for c in columns).rstrip())
        for r in rows:
            click.echo("  ".join(_cell(r.get(c)).ljust(widths[c]) for c in columns).rstrip())


def emit_mapping(obj: dict[str, Any], fmt: str) -> None:
    if fmt in ("json", "jsonl"):
        click.echo(dumps(obj) if fmt == "jsonl" else json.dumps(obj, ensure_ascii=False,
                                                                  indent=2))
        return
    width = max(len(k) for k in obj)
    for k, v in obj.items():
        click.echo(f"{k.ljust(width)}  {_cell(v)}")


def _cell(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, (dict, list)):
        return dumps(v)
    return str(v)


def integrity_text(integrity: dict[str, Any] | None) -> str:
    """A read verdict in one table cell: ``verified``, or ``NOT VERIFIED`` with each code
    and the fields it names (docs/reads.md)."""
    if not integrity:
        return "-"
    if integrity.get("verified"):
        redacted = integrity.get("redacted") or []
        return "verified" + (f" (redacted: {', '.join(redacted)})" if redacted else "")
    fields = integrity.get("fields")
    return "NOT VERIFIED: " + ", ".join(integrity.get("codes") or []) + (
        f" [{', '.join(fields)}]" if fields else "")
