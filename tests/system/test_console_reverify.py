"""The console's Re-verification view in a real browser (Debian's headless Chromium driven
by Playwright) against a real ``ledger serve`` on SQLite and on PostgreSQL: a false math
identity stored as VERIFIED, re-executed by QWED's real math engine in a sandboxed worker
(``ledger reverify --record``), shows as a disagreement beside the integrity findings --
the recorded run's entry verified by the server's read check, its outcomes proven by the
recorded digest -- projected for each role; an outcome changed behind the ledger's back
is shown flagged NOT proven."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text

from ledger.facade import Ledger
from ledger.ops.reverify import ReverifyOptions
from tests import tamper
from tests.api.server import Server, prepare_ledger, start_server
from tests.conftest import ENGINES, engine_url
from tests.system.test_console_browser import Console, Site
from tests.system.test_console_browser import browser as browser  # the fixture

pytestmark = pytest.mark.slow
pytest.importorskip("qwed_new")

QUERY = "(x + 1)**2 = x**2 + 1"  # false: the stored result claims it is an identity


def forged_identity() -> dict[str, Any]:
    """A self-consistent VERIFIED result for a false identity (its proof_ref is the hash of
    its evidence): every audit check passes, re-execution disagrees."""
    fields = {"left_side": "(x + 1)**2", "right_side": "x**2 + 1",
              "simplified_difference": "0"}
    proof = "sha256:" + hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).hexdigest()
    return {"result": {"status": "VERIFIED", "agent_message": "Identity is true",
                       "developer_fields": {"is_valid": True, "result": True, **fields},
                       "proof_ref": proof},
            "engine": "math", "query": QUERY, "evidence": fields}


@pytest.fixture(scope="module", params=ENGINES)
def site(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Site:
    tmp = tmp_path_factory.mktemp(f"reverify-console-{request.param}")
    db_url = engine_url(request.param, request, tmp)
    origin = f"test.example/reverify-{request.param}"
    keys = tmp / "keys"
    prepare_ledger(db_url, keys, origin)
    with Ledger.open(db_url) as ledger:
        assert ledger.append(forged_identity(), producer="seed").ok
        assert ledger.audit().outcome == "passed"  # the hash checks: only re-execution sees it
        report = ledger.reverify(ReverifyOptions(record=True, producer="nightly",
                                                 time_limit_s=60))
    assert report["outcome"] == "disagrees" and report["recorded_seq"] == 1, report["outcomes"]
    log = tmp / "serve.log"
    proc, url = start_server(db_url, keys, log)
    srv = Server(request.param, db_url, keys, origin, proc, url, log)
    request.addfinalizer(srv.stop)
    tokens = {r: srv.token(r, f"reverify-{r}") for r in ("auditor", "developer", "agent")}
    srv.tokens = tokens
    return Site(srv, 0, {}, tmp, db_url, tokens)


@pytest.fixture
def tab(browser: Any, site: Site, tmp_path: Path) -> Iterator[Console]:
    c = Console(browser, site, tmp_path)
    yield c
    c.close()
    assert c.errors == [], c.errors


def _rows(tab: Console, selector: str) -> list[list[str]]:
    return [[c.strip() for c in r.locator("td").all_inner_texts()]
            for r in tab.page.locator(selector).all()]


def test_the_disagreement_is_on_the_console_for_each_role(tab: Console) -> None:
    tab.open("auditor")
    tab.go("#/reverify")
    (run,) = _rows(tab, "#reverify-runs-table tbody tr")
    assert run[:4] == ["#1", run[1], "verified", "disagrees"], run
    assert run[-1] == "proven by the entry's digest" and run[5:8] == ["1", "0", "1"], run
    rows = _rows(tab, "#reverify-run-1 table.reverify-disagreements tbody tr")
    by_field = {r[2]: r for r in rows}
    assert by_field["developer_fields.is_valid"][:5] == ["0", "math",
                                                         "developer_fields.is_valid",
                                                         "true", "false"], rows
    assert by_field["proof_ref"][3].startswith("sha256:"), rows
    assert by_field["developer_fields.is_valid"][5].startswith("qwed qwed 8.0.0"), rows
    assert tab.page.locator("#reverify-unproven-1").count() == 0
    tab.shot("reverify-auditor")
    # the audits stay what they were: the entry is what its producer wrote
    tab.go("#/audits")
    assert "disagree" not in tab.page.inner_text("#view")

    tab.open("developer")
    tab.go("#/reverify")
    rows = _rows(tab, "#reverify-run-1 table.reverify-disagreements tbody tr")
    by_field = {r[2]: r for r in rows}
    assert by_field["developer_fields.is_valid"][3:5] == ["true", "false"], rows
    assert by_field["proof_ref"][3:5] == ["withheld (auditor layer)"] * 2, rows
    assert "sha256:" not in tab.page.inner_text("#view")

    tab.open("agent")
    tab.go("#/reverify")
    assert _rows(tab, "#reverify-run-1 table.reverify-disagreements tbody tr") == [["0"]]
    shown = tab.page.inner_text("#view")
    for hidden in ("math", "is_valid", "qwed", "sha256:", "simplified"):
        assert hidden not in shown, hidden
    answers = [r for r in tab.responses if "/v1/reverify-runs" in r.url]
    assert answers and all(r.status == 200 for r in answers)
    body = answers[-1].text()
    for hidden in ("math", "is_valid", "qwed", "sha256:", "nightly"):
        assert hidden not in body, hidden


def test_an_outcome_changed_behind_the_ledger_is_flagged_not_proven(tab: Console,
                                                                    site: Site) -> None:
    with tamper.connect(site.db_url) as conn:
        raw = conn.execute(text("SELECT outcome FROM reverify_outcomes WHERE seq = 0")
                           ).scalar_one()
        out = json.loads(raw)
        out["differences"] = [d for d in out["differences"] if d["field"] != "proof_ref"]
        conn.execute(text("UPDATE reverify_outcomes SET outcome = :o WHERE seq = 0"),
                     {"o": json.dumps(out, sort_keys=True)})
    tab.open("auditor")
    tab.go("#/reverify")
    (run,) = _rows(tab, "#reverify-runs-table tbody tr")
    assert run[2] == "verified" and "NOT proven" in run[-1], run
    banner = tab.page.inner_text("#reverify-unproven-1")
    assert "NOT PROVEN" in banner and "do not match the digest" in banner
    caption = tab.page.inner_text("#reverify-run-1 table.reverify-disagreements caption")
    assert "NOT proven" in caption
    tab.shot("reverify-unproven")
