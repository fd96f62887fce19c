"""The HTML report of a large, varied ledger reads as a report: a table of contents, a true
time axis (a quiet period is a gap, a spike a spike), charts capped at the largest series
plus "other", a cross-tab of engine x status, findings grouped into incidents, and a PDF
whose tables print legibly (its text extracted and read)."""

from __future__ import annotations

import html
import shutil
import subprocess
from pathlib import Path

import pytest

from ledger.clock import FixedClock
from ledger.facade import Ledger
from ledger.ops.audit import AuditOptions
from ledger.ops.report import (
    FLAGGED_SERIES,
    MAX_BUCKETS,
    MAX_SERIES,
    OTHER_SERIES,
    report_data,
)
from ledger.report import render_html
from tests import tamper as T
from tests.client.submissions import blocked, verified

DAY = 86_400 * 10**6
T0 = 1_788_000_000 * 10**6  # 2026-08-29


def _ledger(url: str) -> None:
    """20 engines over 90 days: a burst on day 0, nothing for 40 days, a spike on day 60."""
    with Ledger.init(url, origin="report.example/scale", clock=FixedClock(T0, 1000)) as L:
        L.append_many([{**verified(i, "a"), "engine": f"engine-{i % 20:02d}"}
                       for i in range(60)], producer="p")
    with Ledger.open(url, clock=FixedClock(T0 + 40 * DAY, 1000)) as L:
        L.append_many([blocked(i, "b") for i in range(5)], producer="p")
    with Ledger.open(url, clock=FixedClock(T0 + 60 * DAY, 1000)) as L:
        L.append_many([{**verified(100 + i, "c"), "engine": "engine-spike"}
                       for i in range(120)], producer="p")
    with T.unlocked(url) as conn:  # one incident: a column rewritten on a range of rows
        for seq in range(10, 30):
            T.update_entry(conn, seq, engine="sql-v2")


def test_a_large_report_has_a_time_axis_top_series_a_crosstab_and_grouped_findings(
        db_url: str) -> None:
    _ledger(db_url)
    with Ledger.open(db_url) as L:
        audit = L.audit(AuditOptions())
        d = report_data(L.ctx, audit, title="t")
    labels = list(d["over_time"])
    assert 1 < len(labels) <= MAX_BUCKETS
    totals = [sum(v.values()) for v in d["over_time"].values()]
    assert totals[0] > 0 and totals[-1] > 0 and totals.count(0) >= len(totals) // 3  # gaps
    assert max(totals) == totals[-1] >= 120  # the spike is its own bar
    series = {s for v in d["over_time"].values() for s in v}
    assert len(series - {FLAGGED_SERIES, OTHER_SERIES}) <= MAX_SERIES
    assert OTHER_SERIES in series and FLAGGED_SERIES in series
    assert sum(v.get(FLAGGED_SERIES, 0) for v in d["over_time"].values()) == 20
    [group] = [g for g in d["findings_grouped"] if g["code"] == "column_mismatch"]
    assert group["count"] == 20 and group["ranges"] == [[10, 29]]
    assert group["field"] == "engine" and group["explain"]["next_step"]
    page = render_html(d)
    for anchor in ("identity", "checkpoint", "summary", "findings", "charts", "reverify"):
        assert f'href="#{anchor}"' in page and f'id="{anchor}"' in page
    assert "Results by engine and status (verified)" in page and ">other<" in page
    assert "10\u201329" in page and "20 finding(s) in 1 group(s)" in page
    # what it means, and the next step (as escaped text)
    assert html.escape(group["explain"]["explanation"], quote=True) in page


@pytest.mark.skipif(not (shutil.which("chromium") and shutil.which("pdftotext")),
                    reason="needs Debian's chromium and pdftotext (scripts/ensure-tools)")
def test_the_printed_report_has_legible_tables(sqlite_url: str, tmp_path: Path) -> None:
    _ledger(sqlite_url)
    with Ledger.open(sqlite_url) as L:
        d = report_data(L.ctx, L.audit(AuditOptions()), title="Ledger report")
    html = tmp_path / "r.html"
    html.write_text(render_html(d), encoding="utf-8")
    pdf = tmp_path / "r.pdf"
    subprocess.run(["chromium", "--headless", "--no-sandbox", "--disable-gpu",
                    "--no-pdf-header-footer", f"--print-to-pdf={pdf}", html.as_uri()],
                   check=True, capture_output=True, timeout=120)
    text = subprocess.run(["pdftotext", "-layout", str(pdf), "-"], check=True,
                          capture_output=True, text=True, timeout=60).stdout
    pages = text.count("\f") + 1
    assert pages <= 8, pages
    lines = [ln for ln in text.splitlines() if ln.strip()]
    # a code and a seq range each stand whole on one line, never a character per line
    assert any("column_mismatch" in ln and "10\u201329" in ln for ln in lines), lines[:80]
    assert any("engine-spike" in ln and "120" in ln for ln in lines)
    short = [ln for ln in lines if len(ln.strip()) == 1]
    assert len(short) < len(lines) // 10, short[:20]
    assert "Every finding" not in text  # the full list stays on screen
