"""The markup every part of the HTML report shares: escaping and the definition list and
table builders.  Every value that comes from the ledger goes through :func:`e`
(``html.escape``)."""

from __future__ import annotations

import html
from collections.abc import Iterable, Sequence
from typing import Any


def e(value: Any) -> str:
    """Escaped text of ``value`` (None as an em dash)."""
    return "\u2014" if value is None else html.escape(str(value), quote=True)


def dl(pairs: Iterable[tuple[str, Any]]) -> str:
    return "<dl>" + "".join(f"<dt>{e(k)}</dt><dd>{v}</dd>" for k, v in pairs) + "</dl>"


def mono(value: Any) -> str:
    return f'<span class="mono">{e(value)}</span>'


def table(caption: str, head: Sequence[str], rows: Iterable[Sequence[Any]],
           table_id: str) -> str:
    th = "".join(f'<th scope="col">{e(h)}</th>' for h in head)
    body = "".join("<tr>" + "".join(f"<td>{e(c)}</td>" for c in r) + "</tr>" for r in rows)
    return (f'<table id="{table_id}"><caption>{e(caption)}</caption><thead><tr>{th}</tr>'
            f"</thead><tbody>{body}</tbody></table>")

