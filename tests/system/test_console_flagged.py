"""Verified reads in the web console, in a real browser (Debian's headless Chromium driven
by Playwright) against a real ``ledger serve`` on SQLite and on PostgreSQL.

One ledger per engine: 24 realistic results and four attested ones, a checkpoint and a
clean audit run.  First, untampered, no page shows a flag.  Then one entry per reader-seen
entries column and one per payload kind is rewritten by raw SQL (``tests/tamper.py``) and
a second audit run finds them; for each, as an auditor: the list flags the row (text, not
colour only) with its findings badge, the entry page has the red banner naming the field
with the envelope's (hashed) value and the stored one, the flagged value is marked, and the
proof headline never says the values are proven.  Developers and agents see the flag at
their layer; the charts count flagged rows apart, never under their status; the "with
findings" toggle lists exactly the rewritten entries.

The untampered test runs first in each engine's group (pytest keeps file order inside a
module-scoped parametrization); the ``tampered`` fixture rewrites the rows once.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text

from ledger.crypto.keys import Keyring
from ledger.crypto.tokens import new_es256_key
from ledger.demo.samples import attested, realistic
from ledger.facade import Ledger
from tests import tamper
from tests.api.server import Server, prepare_ledger, start_server
from tests.conftest import ENGINES, engine_url
from tests.system.test_console_browser import CHECKED, PROVEN, Console, browser  # noqa: F401

pytestmark = pytest.mark.slow

ISSUER = "did:qwed:node:flagged-test"
FLAGGED = "not verified (flagged)"  # the charts' series (ledger/console/charts.js)
SLOT = {"result": 0, "preimage": 1, "attestation": 2, "query": 3, "meta": 4, "subject": 5}


@dataclass(frozen=True)
class Tamper:
    """One raw-SQL rewrite: an entries column set to ``value``, or a payload's bytes
    changed; ``needs``: what the target entry must have."""

    name: str
    column: str | None = None
    payload: str | None = None
    needs: str = ""

    @property
    def field(self) -> str:
        return self.column or self.payload or "?"


TAMPERS = [
    Tamper("status", column="status"),
    Tamper("engine", column="engine"),
    Tamper("constraint_id", column="constraint_id"),
    Tamper("proof_ref", column="proof_ref", needs="proof_ref"),
    Tamper("subject", column="subject"),
    Tamper("producer", column="producer"),
    Tamper("idempotency_key", column="idempotency_key"),
    Tamper("admission", column="admission"),
    Tamper("att_verdict", column="att_verdict", needs="attestation"),
    Tamper("att_kid", column="att_kid", needs="attestation"),
    Tamper("att_iss", column="att_iss", needs="attestation"),
    Tamper("payload-result", payload="result"),
    Tamper("payload-preimage", payload="preimage"),
    Tamper("payload-query", payload="query"),
    Tamper("payload-meta", payload="meta"),
    Tamper("payload-attestation", payload="attestation"),
    Tamper("payload-subject", payload="subject"),
]


@dataclass
class Lab:
    server: Server
    db_url: str
    original: dict[int, dict[str, Any]]  # seq -> the auditor's view before any rewrite
    tokens: dict[str, str] = field(default_factory=dict)
    targets: dict[str, int] = field(default_factory=dict)  # tamper name -> seq
    stored: dict[str, Any] = field(default_factory=dict)   # tamper name -> value written
    tampered: bool = False


@pytest.fixture(scope="module", params=ENGINES)
def lab(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Lab:
    tmp = tmp_path_factory.mktemp(f"flagged-{request.param}")
    db_url = engine_url(request.param, request, tmp)
    origin = f"test.example/flagged-{request.param}"
    keys = tmp / "keys"
    prepare_ledger(db_url, keys, origin)
    ring = Keyring.load(keys)
    with Ledger.open(db_url) as ledger:
        ledger.append_many(realistic(24), producer="seed")
        key, jwk = new_es256_key()
        jwk["kid"] = f"{ISSUER}#k1"
        ledger.trust_issuer(ISSUER, {"keys": [jwk]}, reason="flagged test", producer="seed")
        iat = ledger.clock.now_us() // 1_000_000 - 60
        ledger.append_many([attested(i, key, ISSUER, jwk["kid"], iat) for i in range(4)],
                           producer="seed")
        ledger.checkpoint(ring)
        assert ledger.audit().outcome != "failed"
    log = tmp / "serve.log"
    proc, url = start_server(db_url, keys, log)
    srv = Server(request.param, db_url, keys, origin, proc, url, log)
    request.addfinalizer(srv.stop)
    srv.tokens = {r: srv.token(r, f"flagged-{r}") for r in ("auditor", "developer", "agent")}
    with srv.client("auditor") as c:
        rows = c.get("/v1/entries", params={"kind": "result", "limit": 1000}).json()["entries"]
    return Lab(srv, db_url, {r["seq"]: r for r in rows}, srv.tokens)


def _pick(lab: Lab, t: Tamper, used: set[int]) -> int:
    for seq, row in sorted(lab.original.items()):
        names = set(row["payloads"])
        if seq in used or (t.payload and t.payload not in names) or \
                (t.needs and t.needs not in names and row.get(t.needs) is None):
            continue
        return seq
    raise AssertionError(f"no entry to rewrite for {t.name}")


def _column_value(t: Tamper, row: dict[str, Any]) -> str:
    was = row[t.column or ""]
    return {"status": "BLOCKED" if was != "BLOCKED" else "VERIFIED",
            "engine": "logic" if was != "logic" else "math",
            "proof_ref": "sha256:" + "0" * 64, "att_verdict": "invalid",
            "admission": "ADMIT" if was != "ADMIT" else "BLOCKED"}.get(
        t.column or "", f"tampered-{t.column}")


def _payload_bytes(name: str, data: bytes) -> bytes:
    if name in ("result", "meta"):
        doc = json.loads(data)
        doc["tampered"] = True
        return json.dumps(doc).encode()
    if name == "attestation":  # one character of the signature
        return data[:-2] + (b"A" if data[-2:-1] != b"A" else b"B") + data[-1:]
    return data + b" (rewritten)"


@pytest.fixture(scope="module")
def tampered(lab: Lab) -> Lab:
    """Every rewrite of TAMPERS, each on its own entry, then an audit run that finds them."""
    used: set[int] = set()
    with tamper.unlocked(lab.db_url) as conn:
        for t in sorted(TAMPERS, key=lambda t: t.column is not None):  # the rarer first
            seq = _pick(lab, t, used)
            used.add(seq)
            lab.targets[t.name] = seq
            value: Any
            if t.column:
                value = _column_value(t, lab.original[seq])
                tamper.update_entry(conn, seq, **{t.column: value})
            else:
                got = tamper.stored_payload(conn, seq, t.payload or "")
                assert got is not None, t
                value = _payload_bytes(t.payload or "", got[1])
                conn.execute(text("UPDATE payloads SET codec = 0, data = :d WHERE pid = :p"),
                             {"d": value, "p": seq * 8 + SLOT[t.payload or ""]})
            lab.stored[t.name] = value
    lab.tampered = True
    with Ledger.open(lab.db_url) as ledger:
        assert ledger.audit().outcome == "failed"
    return lab


class Tab(Console):
    def __init__(self, ctx: Any, lab: Lab, shots: Path) -> None:
        super().__init__(ctx, lab, shots)  # type: ignore[arg-type]

    def open(self, role: str) -> None:
        self.page.goto(f"{self.site.server.base_url}/console/#token={self.site.tokens[role]}")
        self.ready()


@pytest.fixture
def tab(browser: Any, lab: Lab, tmp_path: Path) -> Iterator[Tab]:  # noqa: F811
    c = Tab(browser, lab, tmp_path)
    yield c
    c.close()
    assert c.errors == [], c.errors  # no CSP violation, no script error, no failed fetch


def _headline(tab: Tab) -> tuple[str, str]:
    v = tab.page.locator("#proof-verdict")
    return v.inner_text(), v.get_attribute("class") or ""


def _chart_table(tab: Tab, chart: str) -> tuple[list[str], list[list[str]]]:
    """(column headings, rows) of a chart's data table."""
    t = tab.page.locator(f"#{chart} table.data")
    heads = [x.strip() for x in t.locator("thead th").all_text_contents()]
    rows = [[c.strip() for c in r.locator("th, td").all_text_contents()]
            for r in t.locator("tbody tr").all()]
    return heads, rows


def _series_totals(tab: Tab, chart: str) -> dict[str, int]:
    heads, rows = _chart_table(tab, chart)
    return {h: sum(int(r[i]) for r in rows) for i, h in enumerate(heads) if i and h != "total"}


def test_an_untampered_ledger_shows_no_flag(tab: Tab) -> None:
    lab, page = tab.site, tab.page
    assert not lab.tampered, "this test must run before the rewrites (file order)"
    for role in ("auditor", "developer", "agent"):
        tab.open(role)
        tab.go("#/entries?limit=100")
        assert tab.column(1), role
        assert page.locator("#entries-table tbody tr.flagged").count() == 0, role
        assert "not verified:" not in page.inner_text("#entries"), role
        assert "0 not verified (flagged)" in page.inner_text("#page-counts"), role
        assert page.locator("#entries-table .badge").count() == 0, role
        tab.go(f"#/entry/{min(lab.original)}")
        assert page.locator("#integrity-banner").count() == 0, role
        assert page.locator("#entry-findings").count() == 0, role
        assert page.locator(".bad-field").count() == 0, role
        words, cls = _headline(tab)
        assert words.startswith(PROVEN) and words.endswith(CHECKED), (role, words)
        assert "valid" in cls.split(), (role, cls)
        tab.go("#/charts")
        assert FLAGGED not in page.inner_text("#view"), role
        assert "Every counted entry verified" in page.inner_text("#charts-flagged"), role
        page.click("#signout")


@pytest.mark.parametrize("t", TAMPERS, ids=[t.name for t in TAMPERS])
def test_a_rewritten_row_is_flagged_for_an_auditor(tab: Tab, tampered: Lab, t: Tamper) -> None:
    lab, page = tampered, tab.page
    seq, before = lab.targets[t.name], lab.original[lab.targets[t.name]]
    tab.open("auditor")
    # the list: the row is flagged in words, with its findings badge
    tab.go("#/entries?limit=100")
    row = page.locator(f"#entries-table tbody tr[data-seq='{seq}']")
    assert "flagged" in (row.get_attribute("class") or "").split()
    mark = row.locator("td.integrity").inner_text()
    assert mark.startswith("\u26a0 not verified:") and t.field in mark, mark
    assert row.locator(".badge").inner_text().endswith(("finding", "findings"))
    if t.column:  # the list shows the envelope's value, never the rewritten column
        assert lab.stored[t.name] not in row.inner_text()
        if t.column in ("status", "engine", "constraint_id"):  # columns of the list
            assert row.locator("td.bad-field").count() == 1
    # the entry page: the banner names the field with the hashed and the stored value
    tab.go(f"#/entry/{seq}")
    banner = page.locator("#integrity-banner")
    assert banner.get_attribute("role") == "alert"
    problems = {r[0]: r for r in (
        [c.strip() for c in tr.locator("td").all_inner_texts()]
        for tr in banner.locator("#integrity-problems tbody tr").all())}
    assert t.field in problems, problems
    _, code, expected, stored = problems[t.field]
    if t.column:
        want = before[t.column] if t.column != "subject" else None  # a v2 subject: no column
        assert code == "column_mismatch"
        assert expected == ("—" if want is None else str(want)) and stored == lab.stored[t.name]
        dd = page.locator("dl.fields dt", has_text=t.column).first.locator("xpath=following-sibling::dd[1]")
        assert "did not check" in dd.inner_text()
        assert lab.stored[t.name] not in dd.inner_text()
    else:
        assert code == "payload_digest_mismatch"
        assert expected == before["payloads"][t.payload]  # the envelope's commitment
    # the headline never says the values are proven
    words, cls = _headline(tab)
    assert "valid" not in cls.split() and not words.startswith("Valid"), words
    assert CHECKED not in words
    if t.payload:
        # the auditor's bundle carries the payload bytes: the browser finds them itself
        assert words.startswith("Invalid: payload_digest_mismatch"), words
    else:
        assert words.startswith(PROVEN) and "values shown are flagged" in words, words
    # the audit finding, with the run that found it
    findings = page.locator("#entry-findings")
    assert findings.locator("a", has_text="run #").count() >= 1
    if t.name == "status":
        page.set_viewport_size({"width": 1440, "height": 900})
        tab.shot("flagged-entry")
        page.locator("#proof").scroll_into_view_if_needed()
        tab.shot("flagged-proof")


@pytest.mark.parametrize("role", ["developer", "agent"])
@pytest.mark.parametrize("name", ["status", "engine", "payload-result", "payload-subject",
                                  "payload-preimage"])
def test_developers_and_agents_see_the_flag_at_their_layer(tab: Tab, tampered: Lab,
                                                           role: str, name: str) -> None:
    lab, page = tampered, tab.page
    t = next(x for x in TAMPERS if x.name == name)
    seq = lab.targets[name]
    tab.open(role)
    tab.go("#/entries?limit=100")
    row = page.locator(f"#entries-table tbody tr[data-seq='{seq}']")
    assert "flagged" in (row.get_attribute("class") or "").split()
    mark = row.locator("td.integrity").inner_text()
    code = "column_mismatch" if t.column else "payload_digest_mismatch"
    assert mark.startswith("\u26a0 not verified:") and code in mark, mark
    assert (t.field in mark) == (role == "developer"), mark  # agents get the codes only
    tab.go(f"#/entry/{seq}")
    banner = page.inner_text("#integrity-banner")
    assert code in banner
    assert page.locator("#integrity-problems").count() == 0  # the values are layer 3
    if role == "developer":
        assert t.field in page.inner_text("#integrity-fields")
        if t.column == "engine":
            assert f"hashed) value {lab.original[seq]['engine']}" in banner
        assert code in page.inner_text("#entry-findings") or \
            "payload_modified" in page.inner_text("#entry-findings")
    else:  # agents: the codes only, no fields, no findings
        assert page.locator("#integrity-fields").count() == 0
        assert page.locator("#entry-findings").count() == 0
    words, cls = _headline(tab)
    assert words.startswith(PROVEN) and "values shown are flagged" in words, words
    assert "valid" not in cls.split() and CHECKED not in words


@pytest.mark.parametrize("role", ["auditor", "developer", "agent"])
def test_the_charts_count_flagged_rows_apart(tab: Tab, tampered: Lab, role: str) -> None:
    lab, page = tampered, tab.page
    flagged = set(lab.targets.values())  # every layer's read checks every payload
    tab.open(role)
    tab.go("#/charts")
    totals = _series_totals(tab, "chart-status")
    assert totals.pop(FLAGGED) == len(flagged), totals
    by_status: dict[str, int] = {}
    for series, n in totals.items():
        status = series.split(" · ")[0]
        by_status[status] = by_status.get(status, 0) + n
    want: dict[str, int] = {}
    for seq, row in lab.original.items():
        if seq not in flagged:  # a clean row counts under its (envelope's) status
            want[row["status"]] = want.get(row["status"], 0) + 1
    assert by_status == want
    legend = page.locator("#chart-status svg").text_content() or ""
    assert FLAGGED in legend
    assert f"{len(flagged)} entries not verified" in page.inner_text("#charts-flagged")
    # over the whole ledger: the counts say which audit run and how many were checked live
    assert "Counts over the whole ledger" in page.inner_text("#charts-covers")
    if role == "auditor":
        att = _series_totals(tab, "chart-attestations")
        assert att.get(FLAGGED) == len(flagged), att
        assert att.get("invalid", 0) == 0  # the rewritten att_verdict is not counted


def test_the_with_findings_toggle_lists_the_rewritten_entries(tab: Tab, tampered: Lab) -> None:
    lab, page = tampered, tab.page
    tab.open("auditor")
    tab.go("#/entries?limit=100")
    assert f"{len(TAMPERS)} not verified (flagged)" in page.inner_text("#page-counts")
    page.check("#f-has_findings")
    tab.click("#filters button[type=submit]")
    assert "has_findings=true" in page.evaluate("location.hash")
    assert sorted(int(s) for s in tab.column(1)) == sorted(lab.targets.values())
    counts = page.inner_text("#page-counts")
    assert f"{len(TAMPERS)} with audit findings" in counts
    assert page.locator("#entries-table tbody tr.flagged").count() == len(TAMPERS)
    page.set_viewport_size({"width": 1440, "height": 900})
    tab.shot("flagged-list")
    # the audit run's finding links to the entry, whose page names the run
    tab.go("#/audits")
    seq = lab.targets["status"]
    tab.click(f"#findings-table tbody tr td:first-child a:text-is('{seq}')")
    assert page.evaluate("location.hash") == f"#/entry/{seq}"
    assert "column_mismatch" in page.inner_text("#entry-findings")
