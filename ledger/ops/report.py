"""Self-contained HTML reports: ``ledger audit --html FILE`` and ``ledger report --html``.

One HTML file with no external resource (no script at all, styles inline in one
``<style>`` element, charts as inline SVG): the ledger's identity and the scope, the
signed checkpoint the report stands on, summary counts and dispositions, every finding,
charts, and the exact commands that re-verify it.  Print CSS makes "print to PDF" a
clean document.  Every value that comes from the ledger is escaped with ``html.escape``.

:func:`report_data` gathers the figures (reads only); :func:`render_html` turns them
into the page (pure); :func:`period_report` is ``ledger report``: an audit of the entries
recorded in ``[since, until)`` and its figures.
"""

from __future__ import annotations

import datetime as dt
import html
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from ledger.clock import format_us
from ledger.core.note import parse_checkpoint_body, parse_note
from ledger.errors import NoteError
from ledger.ops.anchor import cosigned_note
from ledger.ops.audit import AuditOptions, run_audit, summary_line
from ledger.ops.checkpoint import latest_checkpoint
from ledger.ops.context import LedgerContext
from ledger.ops.query import make_filters, seq_window
from ledger.ops.verified import checked_headers
from ledger.store.anchors import COSIGNATURE, TIMESTAMP, anchors_of
from ledger.store.db import connect

FORMAT = "ledger-html-report/1"
# Finding classes that say a stored value is not what was hashed: such an entry is counted
# as flagged, never under the values it shows (docs/reads.md).
TAMPER_CLASSES = frozenset({"payload_modified", "reordered", "forked", "deleted"})
FLAGGED_SERIES = "not verified (flagged)"
MAX_FLAGGED_LISTED = 200
MAX_FINDINGS_SHOWN = 2000
PATTERNS = ("solid", "hatch", "dots", "cross", "vert", "back")
FILLS = ("#8fd19e", "#f5c26b", "#f19a9a", "#9ec5fe", "#d7b8f3", "#cfd4d9")


def e(value: Any) -> str:
    """Escaped text of ``value`` (None as an em dash)."""
    return "\u2014" if value is None else html.escape(str(value), quote=True)


# -- gathering -----------------------------------------------------------------------
def _bucket_label(t_us: int, cut: int) -> str:
    text = format_us(t_us)[:cut].replace("T", " ")
    return text + "h" if cut == 13 else text


def _cut(times: Sequence[int]) -> int:
    span = (max(times) - min(times)) if times else 0
    return 16 if span < 3 * 3600 * 10**6 else 13 if span < 2 * 86400 * 10**6 else 10


def _checkpoint(ctx: LedgerContext, end: int) -> dict[str, Any] | None:
    row = latest_checkpoint(ctx)
    if row is None:
        return None
    anchors = anchors_of(ctx.engine, row.size)
    note = cosigned_note(ctx, row.size, row.note)
    try:
        parsed = parse_note(row.note)
        parse_checkpoint_body(parsed.text)
        signers = sorted({s.name for s in parsed.signatures})
        root_b64 = parsed.text.split("\n")[2]
    except NoteError:
        signers, root_b64 = [], None
    return {"size": row.size, "created_at": format_us(row.created_at), "root_b64": root_b64,
            "signers": signers, "note": note, "covers_scope": row.size >= end,
            "cosigners": [a.name for a in anchors if a.kind == COSIGNATURE],
            "timestamps": [a.name for a in anchors if a.kind == TIMESTAMP]}


def report_data(ctx: LedgerContext, audit: dict[str, Any], *, title: str,
                since: str | None = None, until: str | None = None,
                command: str = "ledger audit") -> dict[str, Any]:
    """Every figure of the report for the audit ``audit`` (a ``ledger-audit-report/1``)
    over its range: counts by kind, status x engine and attestation verdict, per time
    bucket, and the checkpoint the report stands on."""
    start, end = int(audit["range"]["start"]), int(audit["range"]["end"])
    tampered = {f["seq"] for f in audit["findings"] if f.get("class") in TAMPER_CLASSES}
    with connect(ctx.engine) as conn:
        rows = list(checked_headers(conn, ctx.ledger_id, start, end))
    times = [c.recorded_at for c in rows]
    cut = _cut(times)
    kinds: Counter[str] = Counter()
    status_engine: Counter[tuple[str, str]] = Counter()
    verdicts: Counter[str] = Counter()
    over_time: dict[str, Counter[str]] = {}
    verdict_time: dict[str, Counter[str]] = {}
    seq_bucket: dict[int, str] = {}
    flagged: list[int] = []
    for c in rows:
        label = _bucket_label(c.recorded_at, cut)
        seq_bucket[c.seq] = label
        if not c.integrity.verified or c.seq in tampered:
            # values that did not check are never counted as what they claim
            flagged.append(c.seq)
            over_time.setdefault(label, Counter())[FLAGGED_SERIES] += 1
            continue
        kinds[c.kind] += 1
        if c.kind != "result":
            continue
        status, engine = c.values["status"], c.values["engine"]
        status_engine[(status or "?", engine or "?")] += 1
        over_time.setdefault(label, Counter())[f"{status} \u00b7 {engine}"] += 1
        v = c.values["att_verdict"] or "none"
        verdicts[v] += 1
        verdict_time.setdefault(label, Counter())[v] += 1
    findings_time: dict[str, Counter[str]] = {}
    for f in audit["findings"]:
        label = seq_bucket.get(f["seq"], "ledger-level") if f.get("seq") is not None \
            else "ledger-level"
        findings_time.setdefault(label, Counter())[f["class"]] += 1
    return {
        "format": FORMAT, "title": title, "command": command,
        "generated_at": format_us(ctx.clock.now_us()),
        "ledger_id": ctx.meta.ledger_id, "origin": ctx.meta.origin,
        "scope": {"start": start, "end": end, "since": since, "until": until,
                  "entries": len(rows),
                  "first_recorded_at": format_us(min(times)) if times else None,
                  "last_recorded_at": format_us(max(times)) if times else None},
        "checkpoint": _checkpoint(ctx, end),
        "flagged": {"entries": len(flagged), "seqs": flagged[:MAX_FLAGGED_LISTED]},
        "kinds": dict(sorted(kinds.items())),
        "status_engine": [[s, g, n] for (s, g), n in sorted(status_engine.items())],
        "verdicts": dict(sorted(verdicts.items())),
        "over_time": {k: dict(v) for k, v in sorted(over_time.items())},
        "verdict_time": {k: dict(v) for k, v in sorted(verdict_time.items())},
        "findings_time": {k: dict(v) for k, v in sorted(findings_time.items())},
        "audit": audit, "summary_line": summary_line(audit),
    }


def period_report(ctx: LedgerContext, since: str | None, until: str | None, *,
                  check_attestations: bool = True) -> dict[str, Any]:
    """``ledger report``: audit the entries recorded in ``[since, until)`` (RFC 3339; open
    ends: the whole ledger) and gather the report's figures.  Raises UsageError."""
    f = make_filters(since=since, until=until)
    with connect(ctx.engine) as conn:
        lo, hi = seq_window(conn, f)
    opts = AuditOptions(start=lo, end=hi, check_attestations=check_attestations)
    if hi is not None and hi <= lo:
        opts.start, opts.end = lo, lo
    audit = run_audit(ctx, opts)
    return report_data(ctx, audit, title="Ledger report", since=since, until=until,
                       command="ledger report")


# -- charts --------------------------------------------------------------------------
def _pattern(pid: str, i: int) -> str:
    kind, fill = PATTERNS[i % len(PATTERNS)], FILLS[i % len(FILLS)]
    ink = {"hatch": '<path d="M0,6 L6,0" stroke="#1b1f24" stroke-width="1.1"/>',
           "back": '<path d="M0,0 L6,6" stroke="#1b1f24" stroke-width="1.1"/>',
           "dots": '<circle cx="3" cy="3" r="1.2" fill="#1b1f24"/>',
           "cross": '<path d="M0,3 H6 M3,0 V6" stroke="#1b1f24" stroke-width="1.1"/>',
           "vert": '<path d="M3,0 V6" stroke="#1b1f24" stroke-width="1.1"/>'}.get(kind, "")
    return (f'<pattern id="{pid}" width="6" height="6" patternUnits="userSpaceOnUse">'
            f'<rect width="6" height="6" fill="{fill}"/>{ink}</pattern>')


_charts = iter(range(1, 10**9))


def stacked_bars(title: str, buckets: dict[str, dict[str, int]]) -> str:
    """An inline SVG stacked bar chart (one bar per bucket, one pattern and colour and a
    legend label per series, a <title> on every segment), then the same figures as a
    table, so nothing depends on colour."""
    if not buckets:
        return f'<p class="muted">{e(title)}: no data in scope.</p>'
    cid = f"c{next(_charts)}"
    series = sorted({s for b in buckets.values() for s in b})
    w, h, left, bottom, top, right = 640, 240, 44, 46, 16, 12
    totals = {k: sum(v.values()) for k, v in buckets.items()}
    top_value = max(1, *totals.values())
    plot_w, plot_h = w - left - right, h - top - bottom
    legend_rows = (len(series) + 2) // 3
    out = [f'<svg class="chart" viewBox="0 0 {w} {h + 24 * legend_rows}" role="img" '
           f'aria-labelledby="{cid}-t" xmlns="http://www.w3.org/2000/svg">'
           f'<title id="{cid}-t">{e(title)}</title><defs>'
           + "".join(_pattern(f"{cid}-p{i}", i) for i in range(len(series))) + "</defs>",
           f'<line x1="{left}" y1="{top + plot_h}" x2="{w - right}" y2="{top + plot_h}" '
           'stroke="#57606a"/>',
           f'<line x1="{left}" y1="{top}" x2="{left}" y2="{top + plot_h}" stroke="#57606a"/>']
    for frac in (0.0, 0.5, 1.0):
        y = top + plot_h - frac * plot_h
        out.append(f'<text x="{left - 4}" y="{y + 4:.1f}" text-anchor="end" class="tick">'
                   f'{round(frac * top_value)}</text>')
    bw = plot_w / len(buckets)
    step = max(1, -(-len(buckets) // 12))
    for i, (label, values) in enumerate(buckets.items()):
        bar_w = min(bw * 0.7, 56)
        x = left + i * bw + (bw - bar_w) / 2
        y = float(top + plot_h)
        for j, s in enumerate(series):
            v = values.get(s, 0)
            if not v:
                continue
            seg = v / top_value * plot_h
            y -= seg
            out.append(f'<rect x="{x:.1f}" y="{y:.1f}" width="{bar_w:.1f}" height="{seg:.1f}" '
                       f'fill="url(#{cid}-p{j})" stroke="#1b1f24" stroke-width="0.6">'
                       f'<title>{e(label)}: {e(s)} {v}</title></rect>')
        out.append(f'<text x="{x + bar_w / 2:.1f}" y="{y - 3:.1f}" text-anchor="middle" '
                   f'class="tick">{totals[label]}</text>')
        if i % step == 0:
            out.append(f'<text x="{x + bar_w / 2:.1f}" y="{top + plot_h + 14}" '
                       f'text-anchor="middle" class="tick">{e(label)}</text>')
    for i, s in enumerate(series):
        x, y = left + (i % 3) * 200, h + 24 * (i // 3)
        out.append(f'<rect x="{x}" y="{y - 10}" width="14" height="14" fill="url(#{cid}-p{i})"'
                   f' stroke="#1b1f24" stroke-width="0.6"/><text x="{x + 20}" y="{y + 2}" '
                   f'class="legend">{e(s)}</text>')
    out.append("</svg>")
    head = "".join(f'<th scope="col">{e(s)}</th>' for s in series)
    body = "".join(
        f'<tr><th scope="row">{e(label)}</th>'
        + "".join(f"<td>{values.get(s, 0)}</td>" for s in series)
        + f"<td>{totals[label]}</td></tr>" for label, values in buckets.items())
    table = (f'<table class="data"><caption>{e(title)} (figures)</caption><thead><tr><th></th>'
             f'{head}<th scope="col">total</th></tr></thead><tbody>{body}</tbody></table>')
    return f'<figure>{"".join(out)}<figcaption>{e(title)}</figcaption></figure>{table}'


# -- the page ------------------------------------------------------------------------
CSS = """
:root { color-scheme: light; }
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color: #1b1f24;
  max-width: 960px; margin: 1.5rem auto; padding: 0 1rem; }
h1 { font-size: 1.5rem; margin-bottom: .2rem; } h2 { font-size: 1.15rem; margin-top: 1.6rem;
  border-bottom: 1px solid #d0d7de; padding-bottom: .2rem; }
table { border-collapse: collapse; width: 100%; margin: .5rem 0 1rem; font-size: .85rem; }
th, td { text-align: left; border-bottom: 1px solid #d0d7de; padding: .25rem .4rem;
  vertical-align: top; overflow-wrap: anywhere; }
#findings-table td:nth-child(n+5) { font-family: ui-monospace, monospace; font-size: .75rem; }
caption { text-align: left; font-weight: 600; padding: .3rem 0; }
.mono, pre, code { font-family: ui-monospace, monospace; font-size: .8rem;
  overflow-wrap: anywhere; }
pre { background: #f6f8fa; padding: .5rem; white-space: pre-wrap; }
dl { display: grid; grid-template-columns: max-content 1fr; gap: .15rem .8rem; }
dt { font-weight: 600; } dd { margin: 0; overflow-wrap: anywhere; }
.outcome { font-weight: 700; border: 2px solid; padding: .3rem .6rem; display: inline-block; }
.outcome-passed { color: #1a7f37; } .outcome-failed { color: #cf222e; }
.outcome-unverified { color: #9a6700; }
.muted { color: #57606a; }
svg.chart { width: 100%; max-width: 720px; height: auto; display: block; }
svg .tick, svg .legend { font-size: 11px; fill: #1b1f24; }
@page { margin: 16mm 14mm; }
@media print {
  body { max-width: none; margin: 0; font-size: 10.5pt; }
  h2 { break-after: avoid; } figure, table.data, tr, pre { break-inside: avoid; }
  pre { background: none; border: 1px solid #d0d7de; }
  a { color: inherit; text-decoration: none; }
}
"""


def _dl(pairs: Iterable[tuple[str, Any]]) -> str:
    return "<dl>" + "".join(f"<dt>{e(k)}</dt><dd>{v}</dd>" for k, v in pairs) + "</dl>"


def _mono(value: Any) -> str:
    return f'<span class="mono">{e(value)}</span>'


def _table(caption: str, head: Sequence[str], rows: Iterable[Sequence[Any]],
           table_id: str) -> str:
    th = "".join(f'<th scope="col">{e(h)}</th>' for h in head)
    body = "".join("<tr>" + "".join(f"<td>{e(c)}</td>" for c in r) + "</tr>" for r in rows)
    return (f'<table id="{table_id}"><caption>{e(caption)}</caption><thead><tr>{th}</tr>'
            f"</thead><tbody>{body}</tbody></table>")


def _commands(d: dict[str, Any]) -> str:
    s, cp, a = d["scope"], d["checkpoint"], d["audit"]
    size = cp["size"] if cp else None
    lines = ["# with the ledger's database: LEDGER_DB_URL, or --db URL before the command",
             "# the ledger's public keys: its keyring's jwks.json, or "
             "GET /.well-known/jwks.json from the service"]
    if cp:
        lines.append(f"# save the signed checkpoint below as checkpoint-{size}.txt")
    to = f" --to {s['end']}"
    check = f" --checkpoint checkpoint-{size}.txt --key jwks.json" if cp else ""
    no_att = "" if a.get("attestations_checked", True) else " --no-attestations"
    lines.append(f"ledger audit --from {s['start']}{to}{check}{no_att} --json-report audit.json")
    if cp:
        last = max(0, min(s["end"], size) - 1)
        lines.append(f"ledger prove {last} --checkpoint checkpoint-{size}.txt --out proof.json")
        lines.append("ledger verify-proof proof.json --key jwks.json")
    if d["command"] == "ledger report":
        extra = "".join(f" --{k} {v}" for k, v in (("since", s["since"]), ("until", s["until"]))
                        if v)
        lines.append(f"ledger report --html report.html{extra}")
    lines.append(f"# the audit's outcome here: {a['outcome']} ({d['summary_line']})")
    return "<pre id=\"commands\">" + e("\n".join(lines)) + "</pre>"


def render_html(d: dict[str, Any]) -> str:
    """The report as one self-contained HTML document (no script, no external resource)."""
    a, s, cp = d["audit"], d["scope"], d["checkpoint"]
    summary = a["summary"]
    scope_text = (f"entries [{s['start']}, {s['end']}) — {s['entries']} entries recorded "
                  f"{s['first_recorded_at'] or '—'} to {s['last_recorded_at'] or '—'}")
    parts = [
        "<!doctype html>", '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; '
        'style-src \'unsafe-inline\'; img-src data:">',
        f"<title>{e(d['title'])} — {e(d['origin'])}</title><style>{CSS}</style></head><body>",
        f"<header><h1>{e(d['title'])}</h1><p class=\"muted\">{e(d['origin'])} · generated "
        f"{e(d['generated_at'])} by <code>{e(d['command'])}</code> · {e(d['format'])}</p>"
        "</header>",
        '<section id="identity"><h2>Ledger and scope</h2>' + _dl([
            ("origin", _mono(d["origin"])), ("ledger id", _mono(d["ledger_id"])),
            ("scope", e(scope_text)),
            ("since", e(s["since"] or "the first entry")),
            ("until", e(s["until"] or "the head when the report was made")),
        ]) + "</section>",
    ]
    if cp:
        covers = ("covers the whole scope" if cp["covers_scope"] else
                  f"does NOT cover the scope's last {s['end'] - cp['size']} entries "
                  "(sign a newer one with ledger checkpoint)")
        parts.append('<section id="checkpoint"><h2>The checkpoint this report stands on</h2>'
                     + _dl([("tree size", e(cp["size"])), ("signed", e(cp["created_at"])),
                            ("root (base64)", _mono(cp["root_b64"])),
                            ("signers", e(", ".join(cp["signers"]) or "none readable")),
                            ("cosigners", e(", ".join(cp["cosigners"]) or "none")),
                            ("timestamps", e(", ".join(cp["timestamps"]) or "none")),
                            ("coverage", e(covers))])
                     + f'<pre id="checkpoint-note">{e(cp["note"])}</pre></section>')
    else:
        parts.append('<section id="checkpoint"><h2>The checkpoint this report stands on</h2>'
                     '<p><strong>No checkpoint is signed yet</strong>: nothing outside the '
                     'database pins this history (ledger checkpoint).</p></section>')
    reasons = Counter(x["reason"] for x in a["abstentions"])
    parts.append(
        '<section id="summary"><h2>Summary and dispositions</h2>'
        f'<p class="outcome outcome-{e(a["outcome"])}" id="outcome">Outcome: {e(a["outcome"])}'
        f'</p><p>{e(d["summary_line"])}</p>'
        + _table("Rows by disposition", ["rows", "verified", "failed", "unverified",
                                         "findings", "abstentions"],
                 [[summary["rows"], summary["verified"], summary["failed"],
                   summary["unverified"], len(a["findings"]), len(a["abstentions"])]],
                 "dispositions")
        + _flagged(d)
        + _table("Entries by kind (verified)", ["kind", "entries"], d["kinds"].items(),
                 "kinds")
        + _table("Results by status and engine (verified)", ["status", "engine", "results"],
                 d["status_engine"], "status-engine")
        + _table("Attestation verdicts", ["verdict", "results"], d["verdicts"].items(),
                 "verdicts")
        + (_table("Abstentions by reason", ["reason", "count"], sorted(reasons.items()),
                  "abstention-reasons") if reasons else "")
        + _dl([("policy", e(a.get("policy"))),
               ("attestations checked", e(a.get("attestations_checked"))),
               ("audit started", e(a.get("started_at"))),
               ("audit finished", e(a.get("finished_at")))])
        + "</section>")
    shown = a["findings"][:MAX_FINDINGS_SHOWN]
    more = len(a["findings"]) - len(shown)
    parts.append('<section id="findings"><h2>Findings</h2>' + (
        _table(f"{len(a['findings'])} finding(s)"
               + (f" (the first {len(shown)} shown; all in the JSON report)" if more else ""),
               ["seq", "code", "class", "message", "expected", "actual"],
               [[f.get("seq"), f.get("code"), f.get("class"), f.get("message"),
                 f.get("expected"), f.get("actual")] for f in shown], "findings-table")
        if shown else "<p>No findings.</p>") + "</section>")
    parts.append('<section id="charts"><h2>Charts</h2>'
                 + stacked_bars("Results by status × engine over time", d["over_time"])
                 + stacked_bars("Attestation verdicts over time", d["verdict_time"])
                 + stacked_bars("Findings by class over time (by the entry's time)",
                                d["findings_time"])
                 + "</section>")
    parts.append('<section id="reverify"><h2>Re-verify this report</h2>'
                 "<p>These commands recompute everything above from the ledger and its "
                 "signed checkpoint, without trusting this file:</p>" + _commands(d)
                 + "</section></body></html>")
    return "\n".join(parts) + "\n"


def _flagged(d: dict[str, Any]) -> str:
    """What the tables below leave out: the entries whose stored values did not check
    against what was hashed (or on which the audit found such damage)."""
    fl = d.get("flagged") or {"entries": 0, "seqs": []}
    if not fl["entries"]:
        return ('<p id="flagged">Every entry in scope checked against what was hashed; the '
                'tables count the hashed values.</p>')
    listed = ", ".join(str(x) for x in fl["seqs"])
    more = fl["entries"] - len(fl["seqs"])
    return (f'<p id="flagged" class="outcome outcome-failed"><strong>{fl["entries"]} '
            "entr(y/ies) did not verify</strong> and are not counted in the tables or "
            f"charts below under the values they show (seq {e(listed)}"
            + (f" and {more} more" if more else "") + "; see the findings).</p>")


def write_html(path: str | Path, d: dict[str, Any]) -> None:
    """Render ``d`` and write it to ``path`` (UTF-8)."""
    Path(path).write_text(render_html(d), encoding="utf-8")


def parse_day(text: str) -> str:
    """``YYYY-MM-DD`` as the RFC 3339 start of that UTC day; other text as given."""
    try:
        day = dt.date.fromisoformat(text)
    except ValueError:
        return text
    return f"{day.isoformat()}T00:00:00Z" if len(text) == 10 else text
