"""The web console and the HTML reports in a real browser: Debian's headless Chromium
driven by Playwright, against a real ``ledger serve`` on SQLite and on PostgreSQL.

Each role signs in; the agent's page is searched for anything beyond layer 1 (developer
fields, constraint ids, evidence, hashes) in the DOM and in every response it received;
filters and keyset paging; an entry's inclusion proof verifies in the browser, and fails
with the right code when the served proof is altered in flight; checkpoints, audit runs
and charts; the reports render with no console error and fetch nothing.  Screenshots go
to the test's tmp dir (and to ``$LEDGER_CONSOLE_SCREENSHOTS`` when set: docs/img/).
"""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from ledger.crypto.keys import Keyring
from ledger.crypto.tokens import new_es256_key
from ledger.demo.samples import attested, realistic
from ledger.facade import Ledger
from ledger.store.anchors import COSIGNATURE, AnchorRow, add_anchor
from tests import tamper
from tests.api.server import Server, prepare_ledger, start_server
from tests.api.test_console_routes import CONSOLE_PATHS
from tests.api.test_read import SECRET, sentinel
from tests.conftest import ENGINES, engine_url

pytestmark = pytest.mark.slow
sync_api = pytest.importorskip("playwright.sync_api")

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]
ROOT = Path(__file__).resolve().parents[2]
HEX64 = re.compile(r"[0-9a-f]{64}")
B64_HASH = re.compile(r"[A-Za-z0-9+/]{43}=")
B64URL_JWT = re.compile(r"eyJ[A-Za-z0-9_-]{10,}")
ISSUER = "did:qwed:node:browser-test"
# the headline of an entry whose hash the browser proved in the tree and whose values the
# server checked (never "Valid" alone: docs/console.md)
PROVEN = "This entry's hash is in the signed tree of size"
CHECKED = "the values below were checked against it by the server"


@dataclass
class Site:
    server: Server
    sentinel_seq: int
    counts: dict[str, int]
    tmp: Path
    db_url: str = ""
    tokens: dict[str, str] = field(default_factory=dict)


DOC_VIEWPORTS = ({"width": 1440, "height": 900}, {"width": 390, "height": 844})


def doc_screenshot(page: Any, path: Path) -> None:
    """The screenshot docs/console.md shows, at a width it documents: 390 px when the page
    is already that narrow, else 1440 x 900 (the viewport is put back afterwards)."""
    size = page.viewport_size
    wide = DOC_VIEWPORTS[0]
    if size and size["width"] not in (w["width"] for w in DOC_VIEWPORTS):
        page.set_viewport_size(wide)
        try:
            page.screenshot(path=str(path))
        finally:
            page.set_viewport_size(size)
    else:
        page.screenshot(path=str(path))


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    if not Path(CHROMIUM).exists():
        pytest.skip("Debian chromium is not installed (scripts/ensure-tools installs it)")
    profile = tmp_path_factory.mktemp("chromium-profile")
    with sync_api.sync_playwright() as p:
        ctx = p.chromium.launch_persistent_context(
            str(profile), executable_path=CHROMIUM, args=ARGS, headless=True,
            viewport={"width": 1100, "height": 760})
        yield ctx
        ctx.close()


@pytest.fixture(scope="module", params=ENGINES)
def site(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Site:
    """A ledger of 40 realistic results and a sentinel (every layer-2/3 value holds
    SECRET) at seq 40, a trusted issuer (41) and two attested results (42, 43); two
    checkpoints (30, 44), the second with a stored witness cosignature; a clean audit run,
    then entry 3's status column changed behind the ledger's back and a second audit run
    that finds it."""
    tmp = tmp_path_factory.mktemp(f"console-{request.param}")
    db_url = engine_url(request.param, request, tmp)
    origin = f"test.example/browser-{request.param}"
    keys = tmp / "keys"
    prepare_ledger(db_url, keys, origin)
    ring = Keyring.load(keys)
    subs = realistic(40)
    with Ledger.open(db_url) as ledger:
        ledger.append_many(subs[:30], producer="seed")
        ledger.checkpoint(ring)
        ledger.append_many(subs[30:], producer="seed")
        seq = ledger.append(sentinel("browser"), producer=f"{SECRET}-producer").seq
        key, jwk = new_es256_key()
        jwk["kid"] = f"{ISSUER}#k1"
        ledger.trust_issuer(ISSUER, {"keys": [jwk]}, reason="browser test", producer="seed")
        iat = ledger.clock.now_us() // 1_000_000 - 60
        ledger.append_many([attested(i, key, ISSUER, jwk["kid"], iat) for i in range(2)],
                           producer="seed")
        ledger.checkpoint(ring)
        line = "\u2014 witness.example/w1 " + base64.b64encode(bytes(range(76))).decode() + "\n"
        add_anchor(ledger.engine, AnchorRow(44, COSIGNATURE, "witness.example/w1", line, None,
                                            ledger.clock.now_us()))
        ledger.audit()
        status3 = ledger.get(3)["status"]
    with tamper.unlocked(db_url) as conn:
        tamper.update_entry(conn, 3, status="BLOCKED" if status3 != "BLOCKED" else "VERIFIED")
    with Ledger.open(db_url) as ledger:
        assert ledger.audit().outcome == "failed"
    counts: dict[str, int] = {}
    for s in subs:
        counts[s["result"]["status"]] = counts.get(s["result"]["status"], 0) + 1
    log = tmp / "serve.log"
    proc, url = start_server(db_url, keys, log)
    srv = Server(request.param, db_url, keys, origin, proc, url, log)
    request.addfinalizer(srv.stop)
    tokens = {r: srv.token(r, f"browser-{r}") for r in
              ("auditor", "developer", "agent", "producer", "custodian")}
    srv.tokens = tokens
    return Site(srv, seq, counts, tmp, db_url, tokens)


class Console:
    """One tab of the console; collects console messages, page errors and responses."""

    def __init__(self, ctx: Any, site: Site, shots: Path) -> None:
        self.page = ctx.new_page()
        self.site = site
        self.shots = shots
        self.errors: list[str] = []
        self.responses: list[Any] = []
        self.page.on("console", lambda m: self.errors.append(m.text) if m.type in (
            "error", "warning") else None)
        self.page.on("pageerror", lambda e: self.errors.append(f"pageerror: {e}"))
        self.page.on("response", lambda r: self.responses.append(r))

    def open(self, role: str) -> None:
        self.page.goto(f"{self.site.server.base_url}/console/#token={self.site.tokens[role]}")
        self.ready()

    def ready(self) -> None:
        self.page.wait_for_selector('#view[data-ready="true"]', timeout=20_000)

    def go(self, hash_: str) -> None:
        self.page.evaluate("h => { document.getElementById('view').dataset.ready = 'no';"
                           " location.hash = h; }", hash_)
        self.ready()

    def click(self, selector: str) -> None:
        self.page.evaluate("() => { document.getElementById('view').dataset.ready = 'no'; }")
        self.page.click(selector)
        self.ready()

    def shot(self, name: str) -> None:
        self.page.screenshot(path=str(self.shots / f"{self.site.server.kind}-{name}.png"),
                             full_page=True)
        docs = os.environ.get("LEDGER_CONSOLE_SCREENSHOTS")
        if docs and self.site.server.kind == "sqlite":
            doc_screenshot(self.page, Path(docs) / f"console-{name}.png")

    def column(self, n: int) -> list[str]:
        return [t.strip() for t in self.page.locator(
            f"#entries-table tbody tr td:nth-child({n})").all_inner_texts()]

    def close(self) -> None:
        self.page.close()


@pytest.fixture
def tab(browser: Any, site: Site, tmp_path: Path) -> Iterator[Console]:
    c = Console(browser, site, tmp_path)
    yield c
    c.close()
    assert c.errors == [], c.errors  # no CSP violation, no script error, no failed fetch


def test_auditor_sees_every_view(tab: Console) -> None:
    site, page = tab.site, tab.page
    tab.open("auditor")
    assert page.evaluate("location.hash") == "#/entries"  # the token left the URL
    assert page.evaluate("sessionStorage.getItem('ledger-console-token')") == \
        site.tokens["auditor"]
    assert "role auditor, layer auditor" in page.inner_text("#identity")
    assert page.evaluate("[...document.querySelectorAll('input,select,textarea')]"
                         ".filter(e => !e.labels.length).length") == 0
    assert len(tab.column(1)) == 25
    assert page.locator("#entries-table th", has_text="constraint id").count() == 1
    tab.shot("entries")
    # filters: the server's answer, row for row
    page.select_option("#f-status", "BLOCKED")
    tab.click("#filters button[type=submit]")
    with site.server.client("auditor") as c:
        want = [e["seq"] for e in c.get("/v1/entries", params={"status": "BLOCKED",
                                                               "limit": 25}).json()["entries"]]
    assert [int(s) for s in tab.column(1)] == want
    # entry 3 is found through its rewritten status column: shown with the envelope's
    # status, flagged, and marked as not matching the filter
    flagged = page.locator("#entries-table tbody tr.flagged")
    assert [int(x) for x in flagged.locator("td:first-child").all_inner_texts()] == [3]
    assert "do not match the filters" in flagged.inner_text()
    statuses = tab.column(4)
    assert statuses[want.index(3)] != "BLOCKED"
    assert set(statuses[:want.index(3)] + statuses[want.index(3) + 1:]) == {"BLOCKED"}
    page.select_option("#f-engine", "sql")
    tab.click("#filters button[type=submit]")
    assert set(tab.column(5)) == {"sql"} and set(tab.column(4)) == {"BLOCKED"}
    # keyset paging, forward and back
    tab.go("#/entries?limit=10")
    first = [int(s) for s in tab.column(1)]
    assert first == list(range(10))
    tab.click("#next-page")
    second = [int(s) for s in tab.column(1)]
    assert second == list(range(10, 20))
    tab.click("#next-page")
    assert [int(s) for s in tab.column(1)] == list(range(20, 30))
    tab.click("#prev-page")
    assert [int(s) for s in tab.column(1)] == second
    tab.click("#prev-page")
    assert [int(s) for s in tab.column(1)] == first
    assert page.locator("#prev-page").count() == 0
    # one entry: three layers, payloads, the proof checked here
    tab.go(f"#/entry/{site.sentinel_seq}")
    assert page.inner_text("#proof-verdict").startswith(PROVEN)
    assert page.inner_text("#proof-verdict").endswith(CHECKED)
    assert page.locator("#proof-verdict.valid").count() == 1
    assert page.locator("#integrity-banner").count() == 0
    payloads = page.inner_text("#payloads")
    assert f"{SECRET}-evidence-browser" in payloads and f"{SECRET} query browser" in payloads
    assert page.locator("section.layer", has_text="Not disclosed").count() == 0
    tab.shot("entry")
    # an attested entry: the token decoded; its proof (a cosigned checkpoint) still valid
    tab.go("#/entry/42")
    payloads = page.inner_text("#payloads")
    assert "qwed-attestation+jwt" in payloads and ISSUER in payloads
    assert "Verdict recorded: valid" in payloads
    assert page.inner_text("#proof-verdict").startswith(PROVEN)
    # checkpoints
    tab.go("#/checkpoints")
    items = page.locator("#checkpoint-list > li")
    assert items.count() == 2
    assert "size 44" in items.nth(0).inner_text() and "size 30" in items.nth(1).inner_text()
    assert site.server.origin in items.nth(0).inner_text()
    assert "witness.example/w1" in items.nth(0).inner_text()  # the stored cosigner
    assert "cosigners\nnone" in items.nth(1).inner_text().replace("\t", "\n")
    tab.shot("checkpoints")
    # audits: two runs, the second one's finding
    tab.go("#/audits")
    assert page.locator("#runs-table tbody tr").count() == 2
    findings = page.inner_text("#findings-table")
    assert "column_mismatch" in findings and "payload_modified" in findings
    assert page.locator("#findings-table tbody tr td:first-child a", has_text="3").count() >= 1
    # the findings as incidents, with the severity, explanation and next step of the code
    # the runs are library calls (no command): the latest complete one is shown, and says so
    assert "(the latest complete run; no complete run of an audit command is recorded)" in \
        page.inner_text("#run-label")
    row = page.locator("#incidents-table tbody tr[data-code=column_mismatch]")
    cells = row.locator("td").all_inner_texts()
    assert [c.strip() for c in cells[:6]] == ["CRITICAL", "column_mismatch", "payload_modified",
                                              "status", "1", "3"]
    assert "indexed column was changed" in cells[6] and "docs/audit.md#code-column_mismatch" in cells[7]
    # fixed colours: the failed series is red, the verified one green (never by place)
    fills = page.evaluate("[...document.querySelectorAll('#view figure svg pattern rect')]"
                          ".map(r => getComputedStyle(r).fill)")
    assert fills[:3] == ["rgb(241, 154, 154)", "rgb(245, 194, 107)", "rgb(143, 209, 158)"]
    page.locator("#run-detail").scroll_into_view_if_needed()
    tab.shot("audits")
    tab.click("#incidents-table tbody tr[data-code=column_mismatch] td:last-child a")
    assert "code column_mismatch, class payload_modified, field status" in page.inner_text("#findings-h")
    assert [t.strip() for t in page.locator("#findings-table tbody tr td:first-child").all_inner_texts()] == ["3"]
    # charts: status x engine, attestation verdicts, findings over time; with their tables
    tab.go("#/charts")
    for chart in ("chart-status", "chart-attestations", "chart-findings"):
        assert page.locator(f"#{chart} svg").count() == 1, chart
        assert page.locator(f"#{chart} table.data").count() == 1, chart
    legend = page.inner_text("#chart-status")
    assert "BLOCKED · sql" in legend and "VERIFIED · math" in legend
    assert "valid" in page.inner_text("#chart-attestations")
    page.locator("#chart-status details summary").click()
    tab.shot("charts")
    # sign out: the token is gone from the tab
    page.click("#signout")
    assert page.evaluate("sessionStorage.getItem('ledger-console-token')") is None
    assert page.is_visible("#signin")


def _flip(text: str, at: int) -> str:
    c = text[at]
    return text[:at] + ("B" if c == "A" else "A" if c.isalpha() else
                        "1" if c == "0" else "0") + text[at + 1:]


def _tamper(kind: str) -> Any:
    def change(proof: dict[str, Any]) -> None:
        if kind == "path":
            h = proof["inclusion_path"][0]
            proof["inclusion_path"][0] = ("0" if h[0] != "0" else "1") + h[1:]
        elif kind == "envelope":
            proof["entry"]["envelope"] = proof["entry"]["envelope"].replace(
                '"status":"VERIFIED"', '"status":"VERIFIEE"')
        elif kind == "signature":
            # the ledger's own signature line (the witness cosignature after it is ignored)
            body, _, sigs = proof["checkpoint"].rpartition("\n\n")
            lines = sigs.rstrip("\n").split("\n")
            mine = next(i for i, x in enumerate(lines) if x.split(" ")[1] == proof["origin"])
            name, _, b64 = lines[mine].rpartition(" ")
            lines[mine] = f"{name} {_flip(b64, 20)}"
            proof["checkpoint"] = body + "\n\n" + "\n".join(lines) + "\n"
        elif kind == "size":
            proof["tree_size"] += 1
    return change


def test_navigation_newest_first_jump_and_pick_lists(tab: Console) -> None:
    site, page = tab.site, tab.page
    tab.open("auditor")
    with site.server.client("auditor") as c:
        newest = [e["seq"] for e in c.get("/v1/entries", params={
            "order": "desc", "limit": 10}).json()["entries"]]
        total = c.get("/v1/entries", params={"count": "true", "limit": 1}).json()["index_total"]
        engines = c.get("/v1/entries/values", params={"field": "engine"}).json()["values"]
        h17 = c.get("/v1/entries/17").json()["entry"]["entry_hash"]
    # newest first, then the last page (the oldest), back to the first (the newest)
    page.select_option("#f-order", "desc")
    page.select_option("#f-limit", "10")
    tab.click("#filters button[type=submit]")
    assert [int(s) for s in tab.column(1)] == newest
    assert page.locator("#first-page").count() == 0 and page.locator("#prev-page").count() == 0
    assert page.inner_text("#index-total").startswith(f"{total} entries are selected")
    assert "not a count of verified matches" in page.inner_text("#index-total")
    tab.click("#next-page")
    assert [int(s) for s in tab.column(1)] == [s - 10 for s in newest]
    tab.click("#last-page")
    assert [int(s) for s in tab.column(1)] == list(range(9, -1, -1))
    assert page.locator("#next-page").count() == 0
    tab.click("#prev-page")
    assert [int(s) for s in tab.column(1)] == list(range(19, 9, -1))
    tab.click("#first-page")
    assert [int(s) for s in tab.column(1)] == newest
    # oldest first: the last page holds the newest ten, in ascending order
    tab.go("#/entries?limit=10")
    tab.click("#last-page")
    assert [int(s) for s in tab.column(1)] == sorted(newest)
    # pick-lists from the server, several values at once
    assert page.locator("#f-engine option").all_inner_texts() == engines
    page.select_option("#f-status", ["VERIFIED", "UNVERIFIABLE"])
    tab.click("#filters button[type=submit]")
    shown = tab.column(4)
    assert shown and set(shown) <= {"VERIFIED", "UNVERIFIABLE"}
    assert "status=UNVERIFIABLE&status=VERIFIED" in page.evaluate("location.hash")
    # jump to a seq, to an entry hash; a wrong hash says so
    page.fill("#f-jump", "5")
    tab.click("#jump button[type=submit]")
    assert page.evaluate("location.hash") == "#/entry/5"
    tab.go("#/entries")
    page.fill("#f-jump", h17)
    tab.click("#jump button[type=submit]")
    page.wait_for_url("**/console/#/entry/17")
    tab.ready()
    tab.go("#/entries")
    page.fill("#f-jump", "0" * 64)
    page.click("#jump button[type=submit]")
    page.locator("#jump-error", has_text="No entry").wait_for()
    assert "No entry has the entry hash" in page.inner_text("#jump-error")
    tab.errors = [e for e in tab.errors if "404" not in e]  # the lookup said no


def test_downloads_are_the_apis_answers(tab: Console, tmp_path: Path) -> None:
    site, page = tab.site, tab.page
    tab.open("auditor")
    tab.go("#/entries?status=BLOCKED&status=UNVERIFIABLE&limit=10")

    def fetched(selector: str) -> bytes:
        with page.expect_download() as info:
            page.click(selector)
        path = tmp_path / info.value.suggested_filename
        info.value.save_as(path)
        return path.read_bytes()

    params = {"status": ["BLOCKED", "UNVERIFIABLE"]}
    with site.server.client("auditor") as c:
        for button, fmt in (("#download-csv", "csv"), ("#download-json", "json")):
            want = c.get("/v1/export", params={**params, "format": fmt}).content
            assert fetched(button) == want, fmt  # every page of the filter, as served
        zipped = fetched("#download-bundle")
        assert zipped[:2] == b"PK"
        assert "Saved ledger-export.zip" in page.inner_text("#download-status")
        runs = c.get("/v1/audits").json()["runs"]
        tab.go(f"#/audits?run={runs[0]['run_id']}")
        want = c.get(f"/v1/audits/{runs[0]['run_id']}", params={"sort": "seq",
                                                               "format": "csv"}).content
        assert fetched("#findings-csv") == want
        tab.go("#/checkpoints")
        note = c.get("/v1/checkpoints").json()["checkpoints"][-1]
        assert fetched(f"#note-{note['size']}").decode() == note["note"]


def _forked(site: Site, size: int) -> str:
    """A checkpoint of ``size`` over another tree, correctly signed by the ledger's key: what
    a ledger that shows two histories hands out."""
    from ledger.core.note import Checkpoint, format_checkpoint_body
    from ledger.crypto.note_sign import sign_note

    body = format_checkpoint_body(Checkpoint(site.server.origin, size, bytes(range(32))))
    signers = Keyring.load(site.server.keys_dir).signers(site.server.origin)
    return body + "\n" + "".join(sign_note(body, name, key) for name, key in signers)


@pytest.mark.parametrize("change", ["none", "fork", "path"])
def test_checkpoint_consistency_is_checked_in_the_browser(tab: Console, change: str) -> None:
    site, page = tab.site, tab.page

    def handle(route: Any) -> None:
        body = route.fetch().json()
        newest = body["checkpoints"][-1]
        if change == "fork":
            newest["note"] = _forked(site, newest["size"])
        elif change == "path":
            p = newest["consistency"]["path"][0]
            newest["consistency"]["path"][0] = ("1" if p[0] != "1" else "2") + p[1:]
        route.fulfill(json=body)

    page.route("**/v1/checkpoints?*", handle)
    tab.open("auditor")
    tab.go("#/checkpoints")
    verdict = page.inner_text("#consistency-44")
    assert page.inner_text("#consistency-30").startswith("The first stored checkpoint")
    if change == "none":
        assert verdict.startswith("\u2713 consistent with the checkpoint of size 30")
        assert page.locator("#consistency-44.valid").count() == 1
        summary = page.inner_text("#checkpoint-summary")
        assert "1 consecutive checkpoint pair(s), each verified consistent" in summary
        # the one without a witness is said so; the cosigned one is not
        assert page.locator("li[data-size='30'] .unwitnessed").count() == 1
        assert page.locator("li[data-size='44'] .unwitnessed").count() == 0
        assert "1 of 2 checkpoint(s) cosigned by no witness" in summary
        with site.server.client("auditor") as c:
            cps = c.get("/v1/checkpoints").json()["checkpoints"]
        root = next(x for x in cps if x["size"] == 44)["root_hex"]
        assert root in page.inner_text("li[data-size='44']")
        tab.shot("checkpoints")
    else:
        assert verdict.startswith("\u2717 Not consistent with the checkpoint before it: "
                                  "consistency_invalid"), verdict
        assert page.locator("#consistency-44.invalid").count() == 1
        assert "NOT consistent" in page.inner_text("#checkpoint-summary")


AXE = Path(__file__).resolve().parents[2] / ".tools" / "node_modules" / "axe-core" / "axe.min.js"


def axe_violations(page: Any) -> list[str]:
    """axe-core's violations of any impact on the page as it is: ``rule (impact): n node(s)``.
    The script is evaluated through the DevTools protocol, which the page's CSP does not
    govern (the page itself still runs no inline script)."""
    if not page.evaluate("typeof window.axe !== 'undefined'"):
        page.evaluate(AXE.read_text(encoding="utf-8"))
    found = page.evaluate("axe.run(document, {resultTypes: ['violations']})"
                          ".then(r => r.violations.map(v => [v.id, v.impact, v.nodes.length, "
                          "v.nodes.slice(0, 3).map(n => n.target.join(' '))]))")
    return [f"{rule} ({impact}): {n} node(s), e.g. {where}" for rule, impact, n, where in found]


@pytest.mark.parametrize("width,height", [(1440, 900), (390, 844)])
def test_every_view_passes_axe_at_both_widths(tab: Console, width: int, height: int) -> None:
    if not AXE.exists():
        pytest.skip("axe-core is not installed (scripts/ensure-tools installs it from npm "
                    "into .tools/)")
    page = tab.page
    page.set_viewport_size({"width": width, "height": height})
    tab.open("auditor")
    with tab.site.server.client("auditor") as c:
        run = c.get("/v1/audits").json()["runs"][0]["run_id"]
    seen = {}
    for view in ("#/entries?limit=25", f"#/entry/{tab.site.sentinel_seq}", "#/entry/3",
                 "#/checkpoints", f"#/audits?run={run}", "#/charts"):
        print("view", view, flush=True)
        tab.go(view)
        seen[view] = axe_violations(page)
        # nothing wider than the screen: the page never scrolls sideways
        wide = page.evaluate("w => [...document.querySelectorAll('body *')].filter(e => "
                             "e.getBoundingClientRect().right > w + 1 && !e.closest('.scroll, "
                             "figure, pre')).map(e => e.tagName + '#' + e.id + '.' + "
                             "e.className).slice(0, 5)", width)
        assert page.evaluate("document.documentElement.scrollWidth") <= width + 1, (view, wide)
    bad = {k: v for k, v in seen.items() if v}
    assert bad == {}, bad


def test_the_entries_list_fits_a_phone(tab: Console) -> None:
    """At 390 px (without axe-core too): the list never scrolls sideways; its screenshot is
    the one docs/console.md shows."""
    page = tab.page
    page.set_viewport_size({"width": 390, "height": 844})
    tab.open("auditor")
    tab.go("#/entries?limit=25")
    assert len(tab.column(1)) == 25
    assert page.evaluate("document.documentElement.scrollWidth") <= 391
    tab.shot("mobile-entries")


@pytest.mark.parametrize("role,kind,code", [
    ("auditor", "path", "inclusion_invalid"),
    ("auditor", "envelope", "body_hash_mismatch"),
    ("auditor", "signature", "checkpoint_signature_invalid"),
    ("developer", "path", "inclusion_invalid"),
    ("agent", "size", "tree_size_mismatch"),
])
def test_a_proof_altered_in_flight_is_invalid(tab: Console, role: str, kind: str,
                                              code: str) -> None:
    site, page = tab.site, tab.page
    tab.open(role)
    tab.go(f"#/entry/{site.sentinel_seq}")
    assert page.inner_text("#proof-verdict").startswith(PROVEN), page.inner_text("#proof")
    change = _tamper(kind)

    def handle(route: Any) -> None:
        response = route.fetch()
        body = response.json()
        before = json.dumps(body["proof"])
        change(body["proof"])
        after = json.dumps(body["proof"])
        assert sum(a != b for a, b in zip(before, after, strict=False)) == 1 or kind == "size"
        route.fulfill(response=response, body=json.dumps(body))

    page.route(re.compile(r"/v1/entries/\d+\?proof=true$"), handle)
    page.click("#verify-again")
    page.wait_for_selector("#proof-verdict.invalid", timeout=20_000)
    verdict = page.inner_text("#proof-verdict")
    assert verdict.startswith(f"Invalid: {code}"), verdict
    assert page.locator("ol.steps li.bad").count() == 1
    if role == "auditor" and kind == "path":
        tab.shot("proof-invalid")
    page.unroute(re.compile(r"/v1/entries/\d+\?proof=true$"))


def _dom_holds_only_layer_1(page: Any, where: str) -> None:
    html = page.content()
    text = page.inner_text("body")
    # layer-2/3 names and values of the seeded entries (messages may say "constraints")
    for needle in (SECRET, "constraint_id", "constraint id", "developer_fields", "sha256:",
                   "proof_ref", "math_verifier", "logic_verifier", "precision.float",
                   "cashflows", "sympy", "calculated_value", "z3", "att_verdict"):
        assert needle not in html, (where, needle)
    assert page.locator("th", has_text="engine").count() == 0, where
    assert not HEX64.search(html), (where, HEX64.search(html))
    assert not B64_HASH.search(html), (where, B64_HASH.search(html))
    assert not B64URL_JWT.search(html), where  # the token is not in the DOM either
    assert "Not disclosed" in text or where != "entry"


def test_the_agent_page_holds_layer_1_only(tab: Console) -> None:
    site, page = tab.site, tab.page
    page.goto(f"{site.server.base_url}/console/")
    page.focus("#token")  # signing in from the keyboard
    page.keyboard.insert_text(site.tokens["agent"])
    page.keyboard.press("Tab")
    page.keyboard.press("Enter")
    tab.ready()
    page.wait_for_selector("#entries-table")
    assert "layer agent" in page.inner_text("#identity")
    controls = page.evaluate("[...document.querySelectorAll('#filters [name]')]"
                             ".map(e => e.name)")
    assert controls == ["status", "since", "until", "order", "limit"]
    _dom_holds_only_layer_1(page, "entries")
    tab.shot("agent-entries")
    page.select_option("#f-status", "VERIFIED")
    tab.click("#filters button[type=submit]")
    assert set(tab.column(3)) == {"VERIFIED"}
    _dom_holds_only_layer_1(page, "filtered")
    tab.go(f"#/entry/{site.sentinel_seq}")
    assert page.inner_text("#proof-verdict").startswith(PROVEN)
    assert page.locator("section.layer", has_text="Not disclosed").count() == 2
    _dom_holds_only_layer_1(page, "entry")
    tab.shot("agent-entry")
    tab.go("#/checkpoints")
    assert page.locator("#checkpoint-list > li").count() == 2
    _dom_holds_only_layer_1(page, "checkpoints")
    tab.go("#/audits")
    assert page.is_visible("#audits-denied")
    _dom_holds_only_layer_1(page, "audits")
    tab.go("#/charts")
    assert page.locator("#chart-status svg").count() == 1
    assert page.locator("#chart-attestations").count() == 0
    _dom_holds_only_layer_1(page, "charts")
    # what the page received: nothing of layer 2 or 3, and only the console's requests
    api = [r for r in tab.responses if "/console/" not in r.url]
    assert api
    templates = [re.compile("^" + re.escape(p).replace(r"\$\{seq\}", r"\d+")
                            .replace(r"\$\{pick\}", r"\d+") + "$") for p in CONSOLE_PATHS]
    for r in api:
        path = httpx.URL(r.url).path
        assert any(t.match(path) for t in templates), r.url
        body = r.body()
        assert SECRET.encode() not in body, r.url
        if path == "/v1/entries/values" and r.status == 200:  # the status pick-list
            assert set(json.loads(body)["values"]) <= {"VERIFIED", "UNVERIFIABLE", "BLOCKED"}
        elif path.startswith("/v1/entries") and r.status == 200:
            doc = json.loads(body)
            for row in doc.get("entries") or [doc["entry"]]:
                assert set(row) <= {"seq", "recorded_at", "kind", "status", "agent_message",
                                    "integrity"}
                assert set(row["integrity"]) <= {"verified", "codes", "filter_match"}
    tab.errors = [e for e in tab.errors if "403" not in e]  # the audits route said no


def test_developer_and_roles_without_a_layer(tab: Console) -> None:
    site, page = tab.site, tab.page
    tab.open("developer")
    assert page.locator("#entries-table th", has_text="constraint id").count() == 1
    assert page.locator("#f-proof_ref").count() == 0 and page.locator("#f-engine").count()
    tab.go(f"#/entry/{site.sentinel_seq}")
    assert f"{SECRET}.cid.browser" in page.inner_text("body")
    assert f"{SECRET}-evidence" not in page.content()
    assert page.locator("section.layer", has_text="Not disclosed").count() == 1
    tab.go("#/audits")
    assert page.is_visible("#audits-denied")
    for role in ("producer", "custodian"):
        page.click("#signout")
        tab.open(role)
        assert "no reading layer" in page.inner_text("#identity")
        assert "has no reading layer" in page.inner_text("#view")
    page.click("#signout")
    page.fill("#token", "not-a-token")
    page.click("#signin-form button[type=submit]")
    page.wait_for_selector("#signin-error:not(:empty)")
    assert "not a JWT" in page.inner_text("#signin-error")
    forged = site.tokens["agent"][:-4] + ("AAAA" if not site.tokens["agent"].endswith(
        "AAAA") else "BBBB")
    page.fill("#token", forged)
    page.click("#signin-form button[type=submit]")
    page.wait_for_selector("#signin-error:has-text('invalid_token')")
    tab.errors = [e for e in tab.errors if "403" not in e and "401" not in e]


def test_the_verifier_reproduces_the_worked_vector(tab: Console) -> None:
    """verify.js on tests/vectors/proof_bundle.json (docs/format-checkpoint.md) with the
    vector key: valid; one byte changed in each part: the documented code."""
    if tab.site.server.kind != "sqlite":
        pytest.skip("engine-independent; run once")
    page = tab.page
    page.goto(f"{tab.site.server.base_url}/console/")
    bundle = json.loads((ROOT / "tests" / "vectors" / "proof_bundle.json").read_text())
    jwks = {"keys": [{"kty": "OKP", "crv": "Ed25519", "key_name": "ledger.example/log",
                      "x": "ebVWLo_mVPlAeLES6KmLp5AfhTrmlb7X4OORC60ElmQ"}]}
    run = """async ([b, k]) => { const m = await import('/console/verify.js');
               const r = await m.verifyProof(b, k); return [r.ok, r.code || null]; }"""
    assert page.evaluate(run, [bundle, jwks]) == [True, None]
    cases = {
        "inclusion_invalid": lambda b: b["inclusion_path"].__setitem__(
            1, "0" + b["inclusion_path"][1][1:]),
        "payload_digest_mismatch": lambda b: b["entry"]["payloads"]["result"].__setitem__(
            "data_b64", "eyJuIjo3fQ=="),
        "entry_hash_mismatch": lambda b: b["entry"].__setitem__(
            "recorded_at_us", b["entry"]["recorded_at_us"] + 1),
        "leaf_index_mismatch": lambda b: b.__setitem__("leaf_index", 5),
        "origin_mismatch": lambda b: b.__setitem__("origin", "other.example/log"),
        "checkpoint_signature_invalid": lambda b: b.__setitem__(
            "checkpoint", b["checkpoint"].replace("YkCieB/X", "YkCieB/Y")),
        "ledger_id_mismatch": lambda b: b.__setitem__(
            "ledger_id", "00000000-0000-4000-8000-000000000002"),
        "proof_format_unknown": lambda b: b.__setitem__("format", "x"),
    }
    for code, mutate in cases.items():
        b = json.loads(json.dumps(bundle))
        mutate(b)
        assert page.evaluate(run, [b, jwks]) == [False, code], code
    other = {"keys": [{**jwks["keys"][0], "x": "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"}]}
    assert page.evaluate(run, [bundle, other]) == [False, "checkpoint_signature_invalid"]


def test_the_verifier_recomputes_a_tenant_link(tab: Console, tmp_path: Path) -> None:
    """verify.js on the bundles of a ledger of two tenants: the default tenant's entries by
    the v1 link, the other tenant's by its tenant link (docs/format-checkpoint.md); its
    tenant or tseq changed: entry_hash_mismatch; a bundle naming the default tenant, or one
    of the two keys without the other: proof_malformed."""
    if tab.site.server.kind != "sqlite":
        pytest.skip("engine-independent; run once")
    url, origin = f"sqlite:///{tmp_path / 'tenants.db'}", "tenants.example/log"
    prepare_ledger(url, tmp_path / "keys", origin)
    with Ledger.open(url) as ledger:
        for i, t in enumerate(("default", "acme", "acme", "default")):
            ledger.append(realistic(4)[i], tenant=t)
        ledger.checkpoint(Keyring.load(tmp_path / "keys"))
        bundles = [ledger.prove(seq) for seq in range(4)]
    jwks = json.loads((tmp_path / "keys" / "jwks.json").read_text())
    page = tab.page
    page.goto(f"{tab.site.server.base_url}/console/")
    run = """async ([b, k]) => { const m = await import('/console/verify.js');
               const r = await m.verifyProof(b, k); return [r.ok, r.code || null]; }"""
    assert [b["entry"].get("tenant") for b in bundles] == [None, "acme", "acme", None]
    for b in bundles:
        assert page.evaluate(run, [b, jwks]) == [True, None]
    for key, value, code in (("tenant", "beta", "entry_hash_mismatch"),
                             ("tseq", 0, "entry_hash_mismatch"),
                             ("tenant", "default", "proof_malformed"),
                             ("tseq", None, "proof_malformed")):
        b = json.loads(json.dumps(bundles[2]))
        b["entry"][key] = value
        if value is None:
            del b["entry"][key]
        assert page.evaluate(run, [b, jwks]) == [False, code], (key, value)


def test_the_reports_render_offline_with_no_console_errors(browser: Any, site: Site,
                                                           tmp_path: Path) -> None:
    env = {**os.environ, "LEDGER_DB_URL": site.db_url}
    audit_html, report_html = tmp_path / "audit.html", tmp_path / "report.html"
    r = subprocess.run([sys.executable, "-m", "ledger", "audit", "--html", str(audit_html)],
                       env=env, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode == 1, r.stderr  # the changed status column is a finding
    r = subprocess.run([sys.executable, "-m", "ledger", "report", "--html", str(report_html),
                        "--since", "2000-01-01"], env=env, cwd=ROOT, capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 1, r.stderr
    for path in (audit_html, report_html):
        page = browser.new_page()
        errors: list[str] = []
        requests: list[str] = []
        page.on("console", lambda m, e=errors: e.append(m.text) if m.type in (
            "error", "warning") else None)
        page.on("pageerror", lambda x, e=errors: e.append(str(x)))
        page.on("request", lambda q, rq=requests: rq.append(q.url))
        page.goto(path.as_uri())
        assert errors == [] and requests == [path.as_uri()], (errors, requests)
        assert page.locator("script").count() == 0
        assert page.inner_text("#outcome") == "Outcome: failed"
        # the findings grouped into incidents are shown (and print); every finding is in a
        # closed details element, opened by a click
        assert "column_mismatch" in page.inner_text("#findings-grouped")
        page.click("#findings details summary")
        assert "column_mismatch" in page.inner_text("#findings-table")
        assert page.locator("#charts svg").count() == 3
        assert site.server.origin in page.inner_text("#identity")
        cp = page.inner_text("#checkpoint")
        assert "44" in cp and "witness.example/w1" in cp and "covers the whole scope" in cp
        assert "ledger audit --from 0 --to 44 --checkpoint checkpoint-44.txt" in \
            page.inner_text("#commands")
        page.screenshot(path=str(tmp_path / f"{site.server.kind}-{path.stem}.png"),
                        full_page=True)
        docs = os.environ.get("LEDGER_CONSOLE_SCREENSHOTS")
        if docs and site.server.kind == "sqlite" and path == audit_html:
            doc_screenshot(page, Path(docs) / "report.png")
        page.emulate_media(media="print")
        page.pdf(path=str(tmp_path / f"{path.stem}.pdf"))
        assert (tmp_path / f"{path.stem}.pdf").stat().st_size > 5000
        page.close()
    shutil.copy(audit_html, tmp_path / "kept-audit.html")
