"""The console on a ledger of 100,245 entries (marked slow; a real Chromium and a real
server, SQLite and PostgreSQL): charts over the whole time range from the server's counts
(the October spike visible, the rewritten rows counted as flagged in their own day), a run's
findings as one incident, newest first and the last page, each within a time and transfer
budget.  The ledger is written with the benchmark's fill (``bench.common.submissions``, batches
through ``Ledger.append_many``), not over HTTP.  The figures are printed (run with ``-s``)."""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bench.common import submissions
from ledger.clock import FixedClock
from ledger.facade import Ledger
from ledger.ops.audit import AuditOptions
from tests import tamper
from tests.api.server import Server, prepare_ledger, start_server
from tests.conftest import ENGINES, engine_url
from tests.system.test_console_browser import CHROMIUM, Console, browser  # noqa: F401

pytestmark = pytest.mark.slow

BATCH, EVEN, SPIKE, LIVE = 1000, 80, 20, 245
N = BATCH * (EVEN + SPIKE)
# (next year's autumn: prepare_ledger's own entries are recorded now, and times never go back)
SEP1 = int(dt.datetime(2027, 9, 1, tzinfo=dt.UTC).timestamp() * 1e6)
OCT15 = int(dt.datetime(2027, 10, 15, tzinfo=dt.UTC).timestamp() * 1e6)
DAY = 86_400_000_000
TAMPERED_DAY = "2027-11-20"


def _times() -> list[int]:
    even = [SEP1 + i * (122 * DAY) // EVEN for i in range(EVEN)]
    spike = [OCT15 + 3600_000_000 + i * 60_000_000 for i in range(SPIKE)]
    return sorted(even + spike)


@pytest.fixture(scope="module", params=ENGINES)
def big(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory,
        ) -> Iterator[tuple[Server, list[int]]]:
    tmp = tmp_path_factory.mktemp(f"scale-{request.param}")
    db_url = engine_url(request.param, request, tmp)
    origin = f"test.example/scale-{request.param}"
    keys = tmp / "keys"
    prepare_ledger(db_url, keys, origin)
    clock = FixedClock(SEP1)
    batches = _times()
    with Ledger.open(db_url, clock=clock) as ledger:
        for i, t in enumerate(batches):
            clock.advance(t - clock.now_us())
            ledger.append_many(submissions(BATCH, seed=i, start=i * BATCH), producer="gw")
    day = int(dt.datetime.fromisoformat(TAMPERED_DAY).replace(tzinfo=dt.UTC).timestamp() * 1e6)
    first = next(i for i, t in enumerate(batches) if t >= day) * BATCH
    rewritten = list(range(first + 10, first + 15))
    with tamper.unlocked(db_url) as conn:
        for seq in rewritten:
            conn.exec_driver_sql(
                "UPDATE entries SET status = CASE WHEN status = 'BLOCKED' THEN 'VERIFIED' "
                f"ELSE 'BLOCKED' END WHERE seq = {seq}")
    with Ledger.open(db_url, clock=clock) as ledger:
        report = ledger.audit(AuditOptions(command="ledger audit", actor="scale-test"))
        assert report.summary.failed == len(rewritten)
        clock.advance(DAY * 130 - (clock.now_us() - SEP1))
        ledger.append_many(submissions(LIVE, seed=999, start=N), producer="late")
    log = tmp / "serve.log"
    proc, url = start_server(db_url, keys, log)
    srv = Server(request.param, db_url, keys, origin, proc, url, log)
    request.addfinalizer(srv.stop)
    srv.tokens = {r: srv.token(r, f"scale-{r}") for r in ("auditor", "agent")}
    yield srv, rewritten


class _Site:
    def __init__(self, server: Server) -> None:
        self.server = server
        self.tokens = server.tokens


def _timed(tab: Console, hash_: str) -> float:
    t0 = time.perf_counter()
    tab.go(hash_)
    return time.perf_counter() - t0


def test_the_workbench_at_100k(browser: Any, big: tuple[Server, list[int]],  # noqa: F811
                               tmp_path: Path) -> None:
    srv, rewritten = big
    tab = Console(browser, _Site(srv), tmp_path)  # type: ignore[arg-type]
    page = tab.page
    try:
        tab.open("auditor")
        figures = {}
        tab.responses.clear()
        figures["charts_s"] = _timed(tab, "#/charts")
        agg = [r for r in tab.responses if "/v1/aggregates" in r.url]
        figures["charts_bytes"] = sum(len(r.body()) for r in tab.responses
                                      if "/console/" not in r.url)
        figures["aggregates_bytes"] = len(agg[0].body())
        covers = page.inner_text("#charts-covers")
        assert f"({N + LIVE} entries)" in covers and f"0–{N - 1} as audit run" in covers
        assert f"({LIVE}) checked now" in covers
        # the whole range: September to December (daily buckets), the spike on 15 October
        rows = page.locator("#chart-status table.data tbody tr")
        # (the data table is in a closed <details>: its text, not its rendering)
        labels = [t.strip() for t in page.locator(
            "#chart-status table.data tbody tr th").all_text_contents()]
        assert labels[0].startswith("2027-09-01") and labels[-1] >= "2027-12-", (len(labels), labels[:3], labels[-3:])
        totals = [int(t) for t in page.locator(
            "#chart-status table.data tbody tr td:last-child").all_text_contents()]
        assert labels[totals.index(max(totals))] == "2027-10-15"
        assert sum(totals) == N + LIVE  # every entry counted once: results + flagged
        # the rewritten rows: flagged, in their own day, never under a status
        head = [t.strip() for t in page.locator(
            "#chart-status table.data thead th").all_text_contents()]
        col = head.index("not verified (flagged)")
        flagged = {labels[i]: int(rows.nth(i).locator("th, td").nth(col).text_content() or 0)
                   for i in range(rows.count())}
        assert {k: v for k, v in flagged.items() if v} == {TAMPERED_DAY: len(rewritten)}
        assert f"{len(rewritten)} entries not verified" in page.inner_text("#charts-flagged")
        # the run's findings: one incident of five rows in one range
        figures["audits_s"] = _timed(tab, "#/audits")
        cells = page.locator("#incidents-table tbody tr[data-code=column_mismatch] td"
                             ).all_inner_texts()
        assert cells[3:6] == ["status", str(len(rewritten)),
                              f"{rewritten[0]}–{rewritten[-1]}"]
        # newest first, then the last page (the oldest)
        figures["newest_s"] = _timed(tab, "#/entries?order=desc&limit=25")
        assert int(tab.column(1)[0]) == N + LIVE - 1
        t0 = time.perf_counter()
        tab.click("#last-page")
        figures["last_page_s"] = time.perf_counter() - t0
        assert int(tab.column(1)[-1]) == 0
        print(f"\n[{srv.kind}] 100k workbench figures: " + ", ".join(
            f"{k}={v:.3f}" if isinstance(v, float) else f"{k}={v}" for k, v in figures.items()))
        assert figures["charts_s"] < 5 and figures["aggregates_bytes"] < 1_000_000
        assert tab.errors == [], tab.errors
    finally:
        tab.close()
