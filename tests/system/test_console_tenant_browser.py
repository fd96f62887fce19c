"""The web console signed in with a tenant's token, in a real browser (Debian's headless
Chromium driven by Playwright) against a real ``ledger serve`` on SQLite and PostgreSQL.

A ledger with entries of the tenants ``acme`` and ``globex`` and of ``default``; globex's
hold distinctive values (``GLOBEX`` and ``S3CRET`` in every field, a producer and an engine
only globex has).  An auditor token of acme: the entries view lists acme's entries and
acme's count only; globex's entry opened by its seq shows exactly what a seq no entry has
shows; the charts count acme's entries only; a view that spans every tenant shows the
refusal, never an empty answer; and no page text, no DOM and no response the browser
received holds anything of globex.
"""

from __future__ import annotations

import json
import random
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ledger.crypto.keys import Keyring
from ledger.crypto.tokens import ledger_signer
from ledger.demo.samples import (
    fact_unverifiable,
    logic_verified,
    math_disproven,
    math_verified,
    realistic,
    schema_blocked,
    sql_blocked,
)
from ledger.facade import Ledger
from ledger.ops.audit import AuditOptions
from ledger.ops.tokens import mint_access_token
from tests.api.server import Server, prepare_ledger, start_server
from tests.api.test_read import SECRET, sentinel
from tests.conftest import ENGINES, engine_url
from tests.system.test_console_browser import PROVEN, Console, Site, browser  # noqa: F401

pytestmark = pytest.mark.slow
pytest.importorskip("playwright.sync_api")

A, B = "acme", "globex"
MISSING = 10**6  # a seq no entry has
B_PRODUCER = "GLOBEX-producer"


def globex(i: int) -> dict[str, Any]:
    s = sentinel(f"globex-{i}") if i % 3 == 0 else logic_verified(i, random.Random(i))
    s["subject"] = f"GLOBEX-subject-{i}"
    return s


class TenantSite(Site):
    seqs: dict[str, list[int]]
    b_hashes: list[str]


@pytest.fixture(scope="module", params=ENGINES)
def tsite(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory,
          ) -> TenantSite:
    """acme: 6 results; globex: 13 (sentinels and logic results, its own producer);
    default: 4; interleaved, checkpointed, audited."""
    tmp = tmp_path_factory.mktemp(f"console-tenants-{request.param}")
    db_url = engine_url(request.param, request, tmp)
    origin = f"test.example/browser-tenants-{request.param}"
    keys = tmp / "keys"
    prepare_ledger(db_url, keys, origin)
    ring = Keyring.load(keys)
    seqs: dict[str, list[int]] = {A: [], B: [], "default": []}
    b_hashes: list[str] = []
    rng = random.Random(21)  # acme: every engine but logic, which only globex uses
    a_subs = [make(i, rng) for i, make in enumerate(
        [math_verified, math_disproven, fact_unverifiable, sql_blocked, schema_blocked,
         math_verified])]
    plan = [(A, a_subs[:3], "acme-bot"), (B, [globex(i) for i in range(7)], B_PRODUCER),
            ("default", realistic(4, seed=5), "seed"), (A, a_subs[3:], "acme-bot"),
            (B, [globex(i) for i in range(7, 13)], B_PRODUCER)]
    with Ledger.open(db_url) as ledger:
        for tenant, subs, producer in plan:
            for r in ledger.append_many(subs, producer=producer, tenant=tenant):
                seqs[tenant].append(r.seq)
                if tenant == B:
                    b_hashes.append(r.entry_hash.removeprefix("sha256:"))
        ledger.checkpoint(ring)
        ledger.audit(AuditOptions(command="ledger audit", actor="ops"))
        # the newest run audits the default tenant's chain only (its audit_run entry joins
        # that chain): the operator's Audits view must still open on the whole-ledger audit
        # and say which run covers one tenant; acme lists neither
        assert ledger.audit_tenant("default", record=True, actor="ops",
                                   command="ledger audit --tenant default").findings == ()
        seqs["default"].append(ledger.head()["size"] - 1)
    log = tmp / "serve.log"
    proc, url = start_server(db_url, keys, log)
    srv = Server(request.param, db_url, keys, origin, proc, url, log)
    request.addfinalizer(srv.stop)
    signer = ledger_signer(ring, origin)
    tokens = {"acme-auditor": mint_access_token(
        signer, role="auditor", subject="acme-auditor", ttl_s=3600, issuer=origin,
        audience=origin, now_s=int(time.time()), tenant=A),
        "auditor": srv.token("auditor", "operator-auditor")}
    srv.tokens = tokens
    site = TenantSite(srv, seqs[B][0], {}, tmp, db_url, tokens)
    site.seqs, site.b_hashes = seqs, b_hashes
    return site


@pytest.fixture
def tab(browser: Any, tsite: TenantSite, tmp_path: Path) -> Iterator[Console]:  # noqa: F811
    c = Console(browser, tsite, tmp_path)
    yield c
    c.close()
    # the refused views and the missing seqs answer 403 and 404: nothing else may fail
    assert [e for e in c.errors if "403" not in e and "404" not in e] == [], c.errors


def markers(site: TenantSite) -> list[str]:
    """What only globex's entries hold."""
    return ["GLOBEX", SECRET, B_PRODUCER, "logic", *site.b_hashes]


def holds_nothing_of_b(tab: Console, site: TenantSite, where: str) -> None:
    text, html = tab.page.inner_text("body"), tab.page.content()
    for m in markers(site):
        assert m not in text and m not in html, (where, m)
    assert "globex" not in text.lower() and "globex" not in html.lower(), where


def chart_total(tab: Console, chart: str) -> int:
    return int(tab.page.evaluate(
        "id => [...document.querySelectorAll(`#${id} table.data tbody tr`)]"
        ".reduce((a, tr) => a + Number(tr.lastElementChild.textContent), 0)", chart))


def test_a_tenant_auditor_sees_its_tenant_only(tab: Console) -> None:
    site: TenantSite = tab.site  # type: ignore[assignment]
    page = tab.page
    tab.open("acme-auditor")
    assert "tenant acme (its entries only)" in page.inner_text("#identity")
    # the entries view: acme's entries, acme's count
    assert [int(s) for s in tab.column(1)] == site.seqs[A]
    assert page.inner_text("#index-total").startswith("6 entries are selected")
    holds_nothing_of_b(tab, site, "entries")
    tab.shot("tenant-entries")
    # the pick-lists hold acme's values only
    producers = page.locator("#f-producer option").all_inner_texts()
    assert [p.strip() for p in producers] == ["acme-bot"]
    # an entry of acme: its proof verifies in the browser (the tenant link recomputed)
    tab.go(f"#/entry/{site.seqs[A][-1]}")
    assert page.inner_text("#proof-verdict").startswith(PROVEN)
    holds_nothing_of_b(tab, site, "acme entry")
    # globex's entries, opened by their seq: what a seq no entry has shows, byte for byte
    tab.go(f"#/entry/{MISSING}")
    missing = re.sub(rf"\b{MISSING}\b", "N", page.inner_text("#view"))
    for seq in site.seqs[B]:
        tab.go(f"#/entry/{seq}")
        assert re.sub(rf"\b{seq}\b", "N", page.inner_text("#view")) == missing, seq
        assert "404 not_found" in missing
        holds_nothing_of_b(tab, site, f"globex entry {seq}")
    # the charts: acme's 6 results only
    tab.go("#/charts")
    covers = page.inner_text("#charts-covers")
    assert "tenant acme only" in covers and "6 entries checked now" in covers
    assert chart_total(tab, "chart-status") == 6
    assert chart_total(tab, "chart-attestations") == 6
    # every count shown (the data tables' cells, the line above the charts without its
    # times): none is globex's count or the ledger's
    cells = page.evaluate("[...document.querySelectorAll('#view table.data tbody tr')]"
                          ".flatMap(tr => [...tr.cells].slice(1).map(c => c.textContent))")
    said = re.sub(r"\d{4}-\d\d-\d\dT[\d:.]+Z", "", covers)
    numbers = {int(n) for n in re.findall(r"\d+", " ".join([*cells, said]))}
    assert numbers and max(numbers) <= 6  # acme has 6 entries; the one audit run is #1
    assert not numbers & {len(site.seqs[B]), 13 + 6, 13 + 6 + 4}  # globex's, the ledger's
    holds_nothing_of_b(tab, site, "charts")
    tab.shot("tenant-charts")
    # views that span every tenant: refused and said so, or answered without globex
    for view in ("audits", "reverify"):
        tab.go(f"#/{view}")
        if view == "audits":  # no run of acme is recorded: the whole-ledger one and the
            # default tenant's are not acme's to see
            assert "No audit run is recorded" in page.inner_text("#view")
        if page.locator("#tenant-scope").count():
            assert page.is_visible("#tenant-scope")
            assert "operator-level token" in page.inner_text("#tenant-scope")
            assert "nothing here is a count of zero" in page.inner_text("#tenant-scope")
            assert page.locator("#audits-denied").count() == 0
        holds_nothing_of_b(tab, site, view)
    tab.go("#/checkpoints")
    assert "its size is not your tenant's count" in page.inner_text("#view")
    holds_nothing_of_b(tab, site, "checkpoints")
    # nothing of globex in any answer the browser received
    for r in tab.responses:
        if "/v1/" not in r.url:
            continue
        try:
            body = r.text()
        except Exception:  # noqa: BLE001 -- a body the browser did not keep
            continue
        for m in markers(site):
            assert m not in body, (r.url, m)


def test_the_operator_sees_both_tenants(tab: Console) -> None:
    """The same ledger through an operator-level auditor: every entry and whole-ledger
    charts (so the tenant's view above is a scope, not an empty ledger)."""
    site: TenantSite = tab.site  # type: ignore[assignment]
    page = tab.page
    tab.open("auditor")
    total = sum(len(v) for v in site.seqs.values())
    assert page.inner_text("#index-total").startswith(f"{total} entries are selected")
    tab.go(f"#/entry/{site.seqs[B][0]}")
    assert SECRET in page.inner_text("#view")
    tab.go("#/audits")
    assert "the latest complete audit)" in page.inner_text("#run-label")
    assert "tenant" not in page.inner_text("#run-label")
    rows = page.evaluate("[...document.querySelectorAll('#runs-table tbody tr')]"
                         ".map(tr => tr.textContent)")
    assert len(rows) == 2 and "tenant default only" in rows[0] and "tenant" not in rows[1]
    tab.go("#/charts")
    assert "Counts over the whole ledger" in page.inner_text("#charts-covers")
    assert chart_total(tab, "chart-status") == total - 1  # the audit_run entry: no status
    with site.server.client("auditor") as c:
        doc = c.get("/v1/aggregates").json()
    assert json.dumps(doc).count(B_PRODUCER) >= 1
