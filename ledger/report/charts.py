"""The report's charts: inline SVG stacked bars, each followed by the same figures as a
table, so nothing depends on colour."""

from __future__ import annotations

from ledger.report.markup import e

PATTERNS = ("solid", "hatch", "dots", "cross", "vert", "back")
FILLS = ("#8fd19e", "#f5c26b", "#f19a9a", "#9ec5fe", "#d7b8f3", "#cfd4d9")


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

