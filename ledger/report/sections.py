"""The sections of the HTML report between its header and its charts: the contents, the
flagged entries, the engine x status cross-tab, the findings, and the commands that
re-verify the report."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from ledger.ops.report import MAX_SERIES, OTHER_SERIES, AuditReport, Finding
from ledger.report.markup import e, table

MAX_FINDINGS_SHOWN = 2000


def commands(d: dict[str, Any]) -> str:
    s, cp = d["scope"], d["checkpoint"]
    a: AuditReport = d["audit"]
    size = cp["size"] if cp else None
    lines = ["# with the ledger's database: LEDGER_DB_URL, or --db URL before the command",
             "# the ledger's public keys: its keyring's jwks.json, or "
             "GET /.well-known/jwks.json from the service"]
    if cp:
        lines.append(f"# save the signed checkpoint below as checkpoint-{size}.txt")
    to = f" --to {s['end']}"
    check = f" --checkpoint checkpoint-{size}.txt --key jwks.json" if cp else ""
    no_att = "" if a.attestations_checked else " --no-attestations"
    lines.append(f"ledger audit --from {s['start']}{to}{check}{no_att} --json-report audit.json")
    if cp:
        last = max(0, min(s["end"], size) - 1)
        lines.append(f"ledger prove {last} --checkpoint checkpoint-{size}.txt --out proof.json")
        lines.append("ledger verify-proof proof.json --key jwks.json")
    if d["command"] == "ledger report":
        extra = "".join(f" --{k} {v}" for k, v in (("since", s["since"]), ("until", s["until"]))
                        if v)
        lines.append(f"ledger report --html report.html{extra}")
    lines.append(f"# the audit's outcome here: {a.outcome} ({d['summary_line']})")
    return "<pre id=\"commands\">" + e("\n".join(lines)) + "</pre>"



def flagged(d: dict[str, Any]) -> str:
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


def toc(reexecution: bool = False) -> str:
    """The contents: every section, the re-execution one when the report has it."""
    sections = list(SECTIONS)
    if reexecution:
        sections.insert(4, REEXECUTION)
    return ('<nav id="toc" aria-label="Contents"><h2>Contents</h2><ol>'
            + "".join(f'<li><a href="#{i}">{e(t)}</a></li>' for i, t in sections)
            + "</ol></nav>")


def duration(seconds: int) -> str:
    for unit, n in (("day", 86400), ("hour", 3600), ("minute", 60)):
        if seconds % n == 0 and seconds >= n:
            k = seconds // n
            return f"{k} {unit}{'s' if k != 1 else ''}" if k != 1 else unit
    return f"{seconds} s"


def crosstab(rows: Sequence[Sequence[Any]]) -> str:
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
    return table("Results by engine and status (verified)", ["engine", *statuses, "total"],
                  [*body, totals] if body else [], "status-engine")


def _ranges_text(ranges: Sequence[Sequence[int]], total: int | None = None,
                 most: int = 12) -> str:
    parts = [f"{a}" if a == b else f"{a}\u2013{b}" for a, b in ranges[:most]]
    more = (len(ranges) if total is None else total) - len(parts)
    return ", ".join(parts) + (f" and {more} more run(s)" if more > 0 else "")


def findings_section(findings: Sequence[Finding],
                      grouped: Sequence[dict[str, Any]]) -> str:
    """The findings grouped into incidents (printed), then every finding (on screen, in a
    closed details element; the first MAX_FINDINGS_SHOWN)."""
    if not findings:
        return '<section id="findings"><h2>Findings</h2><p>No findings.</p></section>'
    groups = table(f"{len(findings)} finding(s) in {len(grouped)} group(s)",
                    ["severity", "code", "class", "field", "findings", "entries (seq)",
                     "what it means", "next step"],
                    [[g["explain"]["severity"], g["code"], g["class"], g["field"] or "\u2014",
                      g["count"],
                      _ranges_text(g["ranges"], g.get("range_count"), most=4) or "\u2014",
                      g["explain"]["explanation"], g["explain"]["next_step"]]
                     for g in grouped], "findings-grouped")
    shown = findings[:MAX_FINDINGS_SHOWN]
    more = len(findings) - len(shown)
    listing = table(f"{len(findings)} finding(s)"
                     + (f" (the first {len(shown)} shown; all in the JSON report)"
                        if more else ""),
                     ["seq", "code", "class", "message", "expected", "actual"],
                     [[f.seq, f.code, str(f.cls), f.message, f.expected, f.actual]
                      for f in shown], "findings-table")
    return ('<section id="findings"><h2>Findings</h2>' + groups
            + '<details class="screen-only"><summary>Every finding</summary>'
            + listing + "</details></section>")


