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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ledger.clock import format_us
from ledger.core.explain import group_findings
from ledger.core.note import parse_checkpoint_body, parse_note
from ledger.errors import NoteError, UsageError
from ledger.ops.audit import AuditOptions, run_audit, summary_line
from ledger.ops.checkpoint import cosigned_note, latest_checkpoint
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
# Bucket widths of the time axis (µs), the smallest that keeps a chart under MAX_BUCKETS bars,
# and how much of an RFC 3339 time labels a bucket of that width.
_MIN = 60 * 10**6
BUCKETS = ((_MIN, 16), (10 * _MIN, 16), (60 * _MIN, 13), (6 * 60 * _MIN, 13),
           (24 * 60 * _MIN, 10), (7 * 24 * 60 * _MIN, 10), (30 * 24 * 60 * _MIN, 10))
MAX_BUCKETS = 60
MAX_SERIES = 8  # a chart's series beyond the largest ones are added up as OTHER_SERIES
OTHER_SERIES = "other"


@dataclass(frozen=True)
class TimeAxis:
    """Consecutive buckets of ``width`` µs from ``start``: every bucket between the first and
    the last entry has a bar, so a quiet period shows as a gap and a spike as a spike."""

    start: int
    width: int
    cut: int
    count: int

    @classmethod
    def over(cls, times: Sequence[int]) -> TimeAxis:
        lo, hi = (min(times), max(times)) if times else (0, 0)
        for width, cut in BUCKETS:
            first = lo - lo % width
            n = (hi - first) // width + 1
            if n <= MAX_BUCKETS:
                return cls(first, width, cut, n)
        width, cut = BUCKETS[-1]
        first = lo - lo % width
        return cls(first, width, cut, (hi - first) // width + 1)

    def index(self, t_us: int) -> int:
        return max(0, min(self.count - 1, (t_us - self.start) // self.width))

    def label(self, i: int) -> str:
        text = format_us(self.start + i * self.width)[:self.cut].replace("T", " ")
        return text + "h" if self.cut == 13 else text

    def labels(self) -> list[str]:
        return [self.label(i) for i in range(self.count)]


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
    axis = TimeAxis.over(times)
    kinds: Counter[str] = Counter()
    status_engine: Counter[tuple[str, str]] = Counter()
    verdicts: Counter[str] = Counter()
    over_time: dict[str, Counter[str]] = {label: Counter() for label in axis.labels()}
    verdict_time: dict[str, Counter[str]] = {label: Counter() for label in axis.labels()}
    seq_bucket: dict[int, str] = {}
    flagged: list[int] = []
    for c in rows:
        label = axis.label(axis.index(c.recorded_at))
        seq_bucket[c.seq] = label
        if not c.integrity.verified or c.seq in tampered:
            # values that did not check are never counted as what they claim
            flagged.append(c.seq)
            over_time[label][FLAGGED_SERIES] += 1
            continue
        kinds[c.kind] += 1
        if c.kind != "result":
            continue
        status, engine = c.values["status"], c.values["engine"]
        status_engine[(status or "?", engine or "?")] += 1
        over_time[label][f"{status} \u00b7 {engine}"] += 1
        v = c.values["att_verdict"] or "none"
        verdicts[v] += 1
        verdict_time[label][v] += 1
    findings_time: dict[str, Counter[str]] = {label: Counter() for label in axis.labels()}
    for f in audit["findings"]:
        label = seq_bucket.get(f["seq"], "ledger-level") if f.get("seq") is not None \
            else "ledger-level"
        findings_time.setdefault(label, Counter())[f["class"]] += 1
    if not audit["findings"]:
        findings_time = {}
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
        "bucket_width_s": axis.width // 10**6,
        "over_time": _top_series(over_time) if rows else {},
        "verdict_time": _top_series(verdict_time) if rows else {},
        "findings_time": {k: dict(v) for k, v in findings_time.items()},
        "findings_grouped": group_findings(audit["findings"]),  # ledger.core.explain
        "audit": audit, "summary_line": summary_line(audit),
    }


def _top_series(buckets: dict[str, Counter[str]], keep: int = MAX_SERIES,
                ) -> dict[str, dict[str, int]]:
    """``buckets`` with only the ``keep`` largest series (and the flagged one, always); the
    rest added up as ``other``, so a chart's legend and its table stay readable."""
    totals: Counter[str] = Counter()
    for b in buckets.values():
        totals.update(b)
    kept = {s for s, _ in totals.most_common() if s != FLAGGED_SERIES}
    kept = set(sorted(kept, key=lambda s: (-totals[s], s))[:keep]) | {FLAGGED_SERIES}
    out: dict[str, dict[str, int]] = {}
    for label, b in buckets.items():
        row: dict[str, int] = {}
        for series, n in b.items():
            key = series if series in kept else OTHER_SERIES
            row[key] = row.get(key, 0) + n
        out[label] = row
    return out


def period_report(ctx: LedgerContext, since: str | None, until: str | None, *,
                  check_attestations: bool = True) -> dict[str, Any]:
    """``ledger report``: audit the entries recorded in ``[since, until)`` (RFC 3339; open
    ends: the whole ledger) and gather the report's figures.  Raises UsageError."""
    f = make_filters(since=since, until=until)
    with connect(ctx.engine) as conn:
        lo, hi = seq_window(conn, f)
    opts = AuditOptions(start=lo, end=hi, check_attestations=check_attestations,
                        command="ledger report")
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
#findings-table td:nth-child(-n+3), #findings-grouped td:nth-child(-n+6), #findings-grouped th,
#status-engine td { overflow-wrap: normal; word-break: keep-all; white-space: nowrap; }
#status-engine td:nth-child(n+2) { text-align: right; font-variant-numeric: tabular-nums; }
nav#toc ol { columns: 2; margin: .3rem 0; }
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
  h2 { break-after: avoid; } figure, tr, pre { break-inside: avoid; }
  /* the figures behind each chart and the full list of findings stay on screen: the
     chart, the grouped findings and the tables above them are what prints */
  table.data, details.screen-only, nav#toc { display: none; }
  table { font-size: 9pt; }
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
        "</header>", _toc(bool(d.get("reverify"))),
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
        + _crosstab(d["status_engine"])
        + _table("Attestation verdicts", ["verdict", "results"], d["verdicts"].items(),
                 "verdicts")
        + (_table("Abstentions by reason", ["reason", "count"], sorted(reasons.items()),
                  "abstention-reasons") if reasons else "")
        + _dl([("policy", e(a.get("policy"))),
               ("attestations checked", e(a.get("attestations_checked"))),
               ("audit started", e(a.get("started_at"))),
               ("audit finished", e(a.get("finished_at")))])
        + "</section>")
    parts.append(_findings_section(a["findings"], d.get("findings_grouped") or []))
    parts.append(reverify_section(d.get("reverify")))
    width = d.get("bucket_width_s")
    axis = f" (one bar per {_duration(width)})" if width else ""
    parts.append('<section id="charts"><h2>Charts</h2>'
                 f'<p class="muted">Time runs left to right{e(axis)}; every period between the '
                 f"first and the last entry has its bar, empty or not. At most {MAX_SERIES} "
                 f"series a chart; the rest are added up as \u201c{OTHER_SERIES}\u201d.</p>"
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


SECTIONS = (("identity", "Ledger and scope"), ("checkpoint", "Checkpoint"),
            ("summary", "Summary and dispositions"), ("findings", "Findings"),
            ("charts", "Charts"), ("reverify", "Re-verify this report"))


REEXECUTION = ("reexecution", "Re-execution of the claims")


def _toc(reexecution: bool = False) -> str:
    """The contents: every section, the re-execution one when the report has it."""
    sections = list(SECTIONS)
    if reexecution:
        sections.insert(4, REEXECUTION)
    return ('<nav id="toc" aria-label="Contents"><h2>Contents</h2><ol>'
            + "".join(f'<li><a href="#{i}">{e(t)}</a></li>' for i, t in sections)
            + "</ol></nav>")


def _duration(seconds: int) -> str:
    for unit, n in (("day", 86400), ("hour", 3600), ("minute", 60)):
        if seconds % n == 0 and seconds >= n:
            k = seconds // n
            return f"{k} {unit}{'s' if k != 1 else ''}" if k != 1 else unit
    return f"{seconds} s"


def _crosstab(rows: Sequence[Sequence[Any]]) -> str:
    """Verified results by engine (rows, the largest first, beyond MAX_SERIES added up as
    other) and status (columns), with totals."""
    cells: dict[str, Counter[str]] = {}
    for status, engine, n in rows:
        cells.setdefault(str(engine), Counter())[str(status)] += int(n)
    order = sorted(cells, key=lambda g: (-sum(cells[g].values()), g))
    if len(order) > MAX_SERIES:
        other: Counter[str] = Counter()
        for g in order[MAX_SERIES:]:
            other.update(cells.pop(g))
        order = order[:MAX_SERIES] + [OTHER_SERIES]
        cells[OTHER_SERIES] = other
    known = ["VERIFIED", "UNVERIFIABLE", "BLOCKED"]
    statuses = known + sorted({s for c in cells.values() for s in c} - set(known))
    body = [[g, *[cells[g].get(s, 0) for s in statuses], sum(cells[g].values())]
            for g in order]
    totals = ["total", *[sum(cells[g].get(s, 0) for g in order) for s in statuses],
              sum(sum(c.values()) for c in cells.values())]
    return _table("Results by engine and status (verified)", ["engine", *statuses, "total"],
                  [*body, totals] if body else [], "status-engine")


def _ranges_text(ranges: Sequence[Sequence[int]], total: int | None = None,
                 most: int = 12) -> str:
    parts = [f"{a}" if a == b else f"{a}\u2013{b}" for a, b in ranges[:most]]
    more = (len(ranges) if total is None else total) - len(parts)
    return ", ".join(parts) + (f" and {more} more run(s)" if more > 0 else "")


def _findings_section(findings: Sequence[dict[str, Any]],
                      grouped: Sequence[dict[str, Any]]) -> str:
    """The findings grouped into incidents (printed), then every finding (on screen, in a
    closed details element; the first MAX_FINDINGS_SHOWN)."""
    if not findings:
        return '<section id="findings"><h2>Findings</h2><p>No findings.</p></section>'
    groups = _table(f"{len(findings)} finding(s) in {len(grouped)} group(s)",
                    ["severity", "code", "class", "field", "findings", "entries (seq)",
                     "what it means", "next step"],
                    [[g["explain"]["severity"], g["code"], g["class"], g["field"] or "\u2014",
                      g["count"],
                      _ranges_text(g["ranges"], g.get("range_count"), most=4) or "\u2014",
                      g["explain"]["explanation"], g["explain"]["next_step"]]
                     for g in grouped], "findings-grouped")
    shown = findings[:MAX_FINDINGS_SHOWN]
    more = len(findings) - len(shown)
    listing = _table(f"{len(findings)} finding(s)"
                     + (f" (the first {len(shown)} shown; all in the JSON report)"
                        if more else ""),
                     ["seq", "code", "class", "message", "expected", "actual"],
                     [[f.get("seq"), f.get("code"), f.get("class"), f.get("message"),
                       f.get("expected"), f.get("actual")] for f in shown], "findings-table")
    return ('<section id="findings"><h2>Findings</h2>' + groups
            + '<details class="screen-only"><summary>Every finding</summary>'
            + listing + "</details></section>")


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


# -- re-execution (ledger reverify): its own class of result, next to the findings ----
REVERIFY_FORMAT = "ledger-reverify-report/1"
REEXEC_OUTCOMES = ("agrees", "disagrees", "not_reexecutable", "engine_error")
MAX_DIFFERENCES_SHOWN = 2000


def reverify_data(rv: Any, *, ledger_id: str, start: int, end: int,
                  source: str = "--reverify-report") -> dict[str, Any]:
    """The figures of the re-execution section from a ``ledger-reverify-report/1``
    (``ledger reverify --json-report``), restricted to the report's scope ``[start, end)``.
    Raises UsageError naming ``source`` and the rule when ``rv`` is not such a report of
    this ledger."""
    def bad(rule: str) -> UsageError:
        return UsageError(f"{source}: {rule}", field="reverify_report")

    if not isinstance(rv, dict) or rv.get("format") != REVERIFY_FORMAT:
        raise bad(f"not a {REVERIFY_FORMAT} document (ledger reverify --json-report)")
    if rv.get("ledger_id") != ledger_id:
        raise bad(f"ledger_id {rv.get('ledger_id')!r} is not this ledger's ({ledger_id})")
    outs = rv.get("outcomes")
    if not isinstance(outs, list) or not all(
            isinstance(o, dict) and isinstance(o.get("seq"), int)
            and o.get("outcome") in REEXEC_OUTCOMES for o in outs):
        raise bad("outcomes must be a list of objects with an integer seq and an outcome "
                  f"in {', '.join(REEXEC_OUTCOMES)}")
    rng = rv["range"] if isinstance(rv.get("range"), dict) else {}
    inside = [o for o in outs if start <= o["seq"] < end]
    by_engine: dict[str, Counter[str]] = {}
    reasons: Counter[tuple[str, str]] = Counter()
    differences: list[list[Any]] = []
    for o in inside:
        by_engine.setdefault(str(o.get("engine")), Counter())[o["outcome"]] += 1
        who = o.get("reexecutor") if isinstance(o.get("reexecutor"), dict) else {}
        label = f"{who.get('name') or '—'} {who.get('version') or ''}".strip()
        if o["outcome"] == "disagrees":
            for d in o.get("differences") or [{}]:
                d = d if isinstance(d, dict) else {}
                differences.append([o["seq"], o.get("engine"), d.get("field"),
                                    _json_text(d.get("stored")), _json_text(d.get("fresh")),
                                    label])
        elif o["outcome"] in ("not_reexecutable", "engine_error"):
            reasons[(o["outcome"], str(o.get("reason")))] += 1
    counts = Counter(o["outcome"] for o in inside)
    outcome = ("disagrees" if counts["disagrees"] else "not_reexecutable"
               if counts["not_reexecutable"] or counts["engine_error"] else "agrees")
    return {
        "range": {"start": rng.get("start"), "end": rng.get("end")},
        "covers_scope": isinstance(rng.get("start"), int) and isinstance(rng.get("end"), int)
        and rng["start"] <= start and rng["end"] >= end,
        "started_at": rv.get("started_at"), "finished_at": rv.get("finished_at"),
        "filters": rv.get("filters"),
        "reexecutors": [f"{r.get('name')} {r.get('version')}" for r in
                        rv.get("reexecutors") or [] if isinstance(r, dict)],
        "outcome": outcome if inside else None,
        "summary": {"entries": len(inside), **{k: counts[k] for k in REEXEC_OUTCOMES}},
        "outside_scope": len(outs) - len(inside),
        "by_engine": [[g, *[c[k] for k in REEXEC_OUTCOMES]] for g, c in
                      sorted(by_engine.items())],
        "reasons": [[k, r, n] for (k, r), n in sorted(reasons.items())],
        "differences": differences,
    }


def _json_text(value: Any) -> str:
    import json

    return value if isinstance(value, str) else json.dumps(value, sort_keys=True)


def _recorded_note(rec: dict[str, Any] | None) -> str:
    """Where a section read from a recorded run (``ledger report --reverify-run``) stands:
    the entry checked (or it is refused before this), and whether the outcomes shown are
    the ones its digest proves."""
    if not rec:
        return ""
    where = (f"entry {rec['seq']} (reverify_run, recorded {rec['recorded_at']}, entry hash "
             f"{rec['entry_hash']})")
    if rec["outcomes_proven"]:
        return ('<p id="reexecution-recorded">From the run recorded in the ledger as '
                f"{e(where)}, checked against its hashes; the outcomes below are the ones "
                "whose digest it records.</p>")
    return ('<p class="outcome outcome-failed" id="reexecution-unproven">NOT PROVEN: the '
            "outcomes kept beside the ledger for the run recorded as "
            f"{e(where)} do not match the digest that entry records (changed, removed or "
            "added since). Every count and row below comes from them and is not proven; "
            "the run's own summary is in the entry (ledger show).</p>")


def reverify_section(rv: dict[str, Any] | None) -> str:
    """The re-execution section (``reverify_data``): disagreements are their own class,
    not integrity findings -- the entry is what its producer wrote, and the installed
    engine, re-run on the stored inputs, decided otherwise."""
    if rv is None:
        return ""
    head = ('<section id="reexecution"><h2>Re-execution of the claims (ledger reverify)</h2>'
            + _recorded_note(rv.get("recorded")))
    s = rv["summary"]
    if not s["entries"]:
        return (head + "<p>The re-verification report given has no entry in this report's "
                f"scope ({rv['outside_scope']} outside it).</p></section>")
    cls = {"agrees": "passed", "disagrees": "failed"}.get(rv["outcome"], "unverified")
    parts = [head,
             f'<p class="outcome outcome-{cls}" id="reexecution-outcome">Re-execution: '
             f'{e(rv["outcome"])}</p>',
             f"<p>{s['entries']} entries re-verified: {s['agrees']} agree, {s['disagrees']} "
             f"disagree, {s['not_reexecutable']} not re-executable, {s['engine_error']} "
             "engine error(s). A disagreement is not an integrity finding: the entry is what "
             "its producer wrote, and its engine, re-run on the stored inputs, decided "
             "otherwise (a wrong or forged result, or engine drift: compare the versions)."
             "</p>",
             _dl([("range", e(f"[{rv['range']['start']}, {rv['range']['end']})")),
                  ("coverage", e("covers the whole scope" if rv["covers_scope"] else
                                 "does NOT cover the whole scope")),
                  ("re-executors", e(", ".join(rv["reexecutors"]) or "none")),
                  ("run", e(f"{rv['started_at'] or '—'} to {rv['finished_at'] or '—'}"))]),
             _table("Re-execution outcomes by engine", ["engine", *REEXEC_OUTCOMES],
                    rv["by_engine"], "reexecution-engines")]
    diffs = rv["differences"]
    if diffs:
        shown = diffs[:MAX_DIFFERENCES_SHOWN]
        more = len(diffs) - len(shown)
        parts.append(_table(f"{s['disagrees']} disagreement(s), {len(diffs)} differing "
                            "field(s)" + (f" (the first {len(shown)} shown)" if more else ""),
                            ["seq", "engine", "field", "stored", "fresh", "re-executor"],
                            shown, "reexecution-disagreements"))
    if rv["reasons"]:
        parts.append(_table("Not re-verified, by reason", ["outcome", "reason", "entries"],
                            rv["reasons"], "reexecution-reasons"))
    if rv["outside_scope"]:
        parts.append(f"<p class=\"muted\">{rv['outside_scope']} outcome(s) of the "
                     "re-verification report are outside this report's scope.</p>")
    return "".join(parts) + "</section>"
