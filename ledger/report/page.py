"""The HTML report as one page: ``ledger audit --html FILE`` and ``ledger report --html``.

One HTML file with no external resource (no script at all, styles inline in one
``<style>`` element, charts as inline SVG): the ledger's identity and the scope, the
signed checkpoint the report stands on, summary counts and dispositions, every finding,
charts, and the exact commands that re-verify it.  Print CSS makes "print to PDF" a
clean document.  Every value that comes from the ledger is escaped with ``html.escape``.

:func:`render_html` turns the figures of ``ledger.ops.report.report_data`` into the page
(pure); :func:`write_html` writes it.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from ledger.ops.report import MAX_SERIES, OTHER_SERIES, AuditReport
from ledger.report.charts import stacked_bars
from ledger.report.markup import dl, e, mono, table
from ledger.report.reexecution import reverify_section
from ledger.report.sections import commands, crosstab, duration, findings_section, flagged, toc

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



def _head(d: dict[str, Any]) -> list[str]:
    """The document's head and the page header."""
    return [
        "<!doctype html>", '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; '
        'style-src \'unsafe-inline\'; img-src data:">',
        f"<title>{e(d['title'])} — {e(d['origin'])}</title><style>{CSS}</style></head><body>",
        f"<header><h1>{e(d['title'])}</h1><p class=\"muted\">{e(d['origin'])} · generated "
        f"{e(d['generated_at'])} by <code>{e(d['command'])}</code> · {e(d['format'])}</p>"
        "</header>"]


def _identity(d: dict[str, Any]) -> str:
    s = d["scope"]
    scope_text = (f"entries [{s['start']}, {s['end']}) — {s['entries']} entries recorded "
                  f"{s['first_recorded_at'] or '—'} to {s['last_recorded_at'] or '—'}")
    return '<section id="identity"><h2>Ledger and scope</h2>' + dl([
        ("origin", mono(d["origin"])), ("ledger id", mono(d["ledger_id"])),
        ("scope", e(scope_text)),
        ("since", e(s["since"] or "the first entry")),
        ("until", e(s["until"] or "the head when the report was made")),
    ]) + "</section>"


def _checkpoint(d: dict[str, Any]) -> str:
    s, cp = d["scope"], d["checkpoint"]
    if not cp:
        return ('<section id="checkpoint"><h2>The checkpoint this report stands on</h2>'
                '<p><strong>No checkpoint is signed yet</strong>: nothing outside the '
                'database pins this history (ledger checkpoint).</p></section>')
    covers = ("covers the whole scope" if cp["covers_scope"] else
              f"does NOT cover the scope's last {s['end'] - cp['size']} entries "
              "(sign a newer one with ledger checkpoint)")
    return ('<section id="checkpoint"><h2>The checkpoint this report stands on</h2>'
            + dl([("tree size", e(cp["size"])), ("signed", e(cp["created_at"])),
                  ("root (base64)", mono(cp["root_b64"])),
                  ("signers", e(", ".join(cp["signers"]) or "none readable")),
                  ("cosigners", e(", ".join(cp["cosigners"]) or "none")),
                  ("timestamps", e(", ".join(cp["timestamps"]) or "none")),
                  ("coverage", e(covers))])
            + f'<pre id="checkpoint-note">{e(cp["note"])}</pre></section>')


def _summary(d: dict[str, Any]) -> str:
    a: AuditReport = d["audit"]
    summary = a.summary
    reasons = Counter(x.reason for x in a.abstentions)
    return (
        '<section id="summary"><h2>Summary and dispositions</h2>'
        f'<p class="outcome outcome-{e(a.outcome)}" id="outcome">Outcome: {e(a.outcome)}'
        f'</p><p>{e(d["summary_line"])}</p>'
        + table("Rows by disposition", ["rows", "verified", "failed", "unverified",
                                        "findings", "abstentions"],
                [[summary.rows, summary.verified, summary.failed,
                  summary.unverified, len(a.findings), len(a.abstentions)]],
                "dispositions")
        + flagged(d)
        + table("Entries by kind (verified)", ["kind", "entries"], d["kinds"].items(),
                "kinds")
        + crosstab(d["status_engine"])
        + table("Attestation verdicts", ["verdict", "results"], d["verdicts"].items(),
                "verdicts")
        + (table("Abstentions by reason", ["reason", "count"], sorted(reasons.items()),
                 "abstention-reasons") if reasons else "")
        + dl([("policy", e(a.policy)),
              ("attestations checked", e(a.attestations_checked)),
              ("audit started", e(a.started_at)),
              ("audit finished", e(a.finished_at))])
        + "</section>")


def _charts(d: dict[str, Any]) -> str:
    width = d.get("bucket_width_s")
    axis = f" (one bar per {duration(width)})" if width else ""
    return ('<section id="charts"><h2>Charts</h2>'
            f'<p class="muted">Time runs left to right{e(axis)}; every period between the '
            f"first and the last entry has its bar, empty or not. At most {MAX_SERIES} "
            f"series a chart; the rest are added up as \u201c{OTHER_SERIES}\u201d.</p>"
            + stacked_bars("Results by status × engine over time", d["over_time"])
            + stacked_bars("Attestation verdicts over time", d["verdict_time"])
            + stacked_bars("Findings by class over time (by the entry's time)",
                           d["findings_time"])
            + "</section>")


def render_html(d: dict[str, Any]) -> str:
    """The report as one self-contained HTML document (no script, no external resource)."""
    a: AuditReport = d["audit"]
    parts = [*_head(d), toc(bool(d.get("reverify"))), _identity(d), _checkpoint(d),
             _summary(d), findings_section(a.findings, d.get("findings_grouped") or []),
             reverify_section(d.get("reverify")), _charts(d),
             '<section id="reverify"><h2>Re-verify this report</h2>'
             "<p>These commands recompute everything above from the ledger and its "
             "signed checkpoint, without trusting this file:</p>" + commands(d)
             + "</section></body></html>"]
    return "\n".join(parts) + "\n"


def write_html(path: str | Path, d: dict[str, Any]) -> None:
    """Render ``d`` and write it to ``path`` (UTF-8)."""
    Path(path).write_text(render_html(d), encoding="utf-8")
