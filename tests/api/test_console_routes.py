"""The web console's server side against a real server on both engines: the static
files and their Content-Security-Policy, and the read-only listings it uses
(``GET /v1/checkpoints``, ``GET /v1/audits``) under the role rules."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from ledger.crypto.keys import Keyring, load_public_keys
from ledger.demo.samples import realistic
from ledger.facade import Ledger
from ledger.verify.proof import open_signed_checkpoint
from tests import tamper
from tests.api.server import Server, prepare_ledger, start_server
from tests.conftest import ENGINES, engine_url

CONSOLE = Path(__file__).resolve().parents[2] / "ledger" / "console"
# Every API path the console's code requests (its template literals as written).
CONSOLE_PATHS = {"/v1/entries", "/v1/entries/${seq}", "/v1/checkpoints", "/v1/audits",
                 "/v1/audits/${pick}", "/.well-known/jwks.json", "/v1/entries/values",
                 "/v1/entries/by-hash/${hashText}", "/v1/export", "/v1/export/bundle",
                 "/v1/aggregates", "/v1/reverify-runs"}


def seeded_server(kind: str, request: pytest.FixtureRequest, tmp: Path) -> Server:
    """A ledger of 12 results, two checkpoints, a clean audit run, then entry 3's status
    column changed behind the ledger's back and a second run that finds it."""
    db_url = engine_url(kind, request, tmp)
    origin = f"test.example/console-{kind}"
    keys = tmp / "keys"
    prepare_ledger(db_url, keys, origin)
    ring = Keyring.load(keys)
    with Ledger.open(db_url) as ledger:
        ledger.append_many(realistic(8), producer="seed")
        ledger.checkpoint(ring)
        ledger.append_many(realistic(4), producer="seed")
        ledger.checkpoint(ring)
        ledger.audit()
    with tamper.unlocked(db_url) as conn:
        tamper.update_entry(conn, 3, status="VERIFIED" if ledger_status(db_url, 3)
                            != "VERIFIED" else "BLOCKED")
    with Ledger.open(db_url) as ledger:
        assert ledger.audit().outcome == "failed"
    log = tmp / "serve.log"
    proc, url = start_server(db_url, keys, log)
    srv = Server(kind, db_url, keys, origin, proc, url, log)
    srv.tokens = {r: srv.token(r, f"t-{r}") for r in ("auditor", "developer", "agent",
                                                       "producer", "custodian")}
    request.addfinalizer(srv.stop)
    return srv


def ledger_status(db_url: str, seq: int) -> Any:
    with Ledger.open(db_url) as ledger:
        return ledger.get(seq)["status"]


@pytest.fixture(scope="module", params=ENGINES)
def seeded(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory,
           ) -> Iterator[Server]:
    yield seeded_server(request.param, request, tmp_path_factory.mktemp("console"))


def test_console_files_carry_a_strict_csp(seeded: Server) -> None:
    with httpx.Client(base_url=seeded.base_url, timeout=30) as c:
        r = c.get("/console", follow_redirects=False)
        assert r.status_code == 308 and r.headers["location"] == "/console/"
        for name, ctype in (("", "text/html"), ("app.js", "text/javascript"),
                            ("verify.js", "text/javascript"), ("console.css", "text/css")):
            r = c.get(f"/console/{name}")
            assert r.status_code == 200 and r.headers["content-type"].startswith(ctype)
            csp = r.headers["content-security-policy"]
            assert "script-src 'self'" in csp and "default-src 'none'" in csp
            assert "unsafe-inline" not in csp and "unsafe-eval" not in csp
            assert "frame-ancestors 'none'" in csp and "connect-src 'self'" in csp
            assert r.headers["x-content-type-options"] == "nosniff"
        for bad in ("nope.js", "..%2fapp.py", "%2e%2e", "index.html%00"):
            r = c.get(f"/console/{bad}")
            assert r.status_code == 404, bad
        assert c.get("/console/../api/app.py").status_code == 404


def test_console_markup_has_no_inline_script_or_style() -> None:
    page = (CONSOLE / "index.html").read_text()
    assert re.findall(r"<script\b[^>]*>", page) == ['<script type="module" src="app.js">']
    assert "style=" not in page and "<style" not in page and " on" not in page.replace(
        " only", "")
    for js in CONSOLE.glob("*.js"):
        code = js.read_text().replace('"http://www.w3.org/2000/svg"', "SVG_NS")
        for bad in ("innerHTML", "outerHTML", "insertAdjacentHTML", "eval(", "new Function",
                    ".style.", "setAttribute(\"style\"", "document.write", "http://",
                    "https://"):
            assert bad not in code, (js.name, bad)


def test_the_layer_leak_tests_cover_every_request_of_the_console() -> None:
    """The paths the console requests are exactly these; tests/api/test_read.py replays
    each of them as the agent (and the browser tests record the live requests)."""
    code = (CONSOLE / "app.js").read_text()
    paths = set(re.findall(r"""(?:api|fetch|download)\(["`]([^"`]+)["`]""", code))
    assert paths == CONSOLE_PATHS
    from tests.api.test_read import agent_requests

    replayed = {p for p, _ in agent_requests(7, "t")}
    for p in CONSOLE_PATHS:
        concrete = p.replace("${seq}", "7").replace("${pick}", "1").replace(
            "${hashText}", "ab" * 32)
        assert concrete in replayed, p


def test_checkpoints_listing_pages_and_verifies(seeded: Server, tmp_path: Path) -> None:
    jwks = tmp_path / "jwks.json"
    jwks.write_text(httpx.get(seeded.base_url + "/.well-known/jwks.json").text)
    keys = load_public_keys(jwks)
    for role in ("auditor", "developer", "agent"):
        with seeded.client(role) as c:
            body = c.get("/v1/checkpoints").json()
            assert [cp["size"] for cp in body["checkpoints"]] == [8, 12]
            assert body["next_after"] is None
            for cp in body["checkpoints"]:
                parsed, signers = open_signed_checkpoint(cp["note"], keys)
                assert parsed.size == cp["size"] and signers == [seeded.origin]
                assert cp["signers"] == [seeded.origin] and cp["origin"] == seeded.origin
                assert cp["cosigners"] == [] and cp["timestamps"] == []
            first = c.get("/v1/checkpoints", params={"limit": 1}).json()
            assert [x["size"] for x in first["checkpoints"]] == [8]
            assert first["next_after"] == 8
            rest = c.get("/v1/checkpoints", params={"after": 8}).json()
            assert [x["size"] for x in rest["checkpoints"]] == [12]
            r = c.get("/v1/checkpoints", params={"limit": 0})
            assert r.status_code == 400
            r = c.get("/v1/checkpoints", params={"size": 1})
            assert r.status_code == 400 and r.json()["code"] == "unknown_parameter"
    for role in ("producer", "custodian"):
        with seeded.client(role) as c:
            assert c.get("/v1/checkpoints").status_code == 403


def test_audit_runs_for_auditors_only(seeded: Server) -> None:
    with seeded.client("auditor") as c:
        body = c.get("/v1/audits").json()
        runs = body["runs"]
        assert len(runs) == 2 and runs[0]["run_id"] > runs[1]["run_id"]  # newest first
        newest, oldest = runs
        assert oldest["findings"] == 0 and oldest["summary"]["failed"] == 0
        assert newest["findings"] >= 1 and newest["summary"]["failed"] >= 1
        assert newest["state"] == "complete" and newest["range"] == {"start": 0, "end": 12}
        page = c.get("/v1/audits", params={"limit": 1}).json()
        assert [r["run_id"] for r in page["runs"]] == [newest["run_id"]]
        assert page["next_before"] == newest["run_id"]
        older = c.get("/v1/audits", params={"before": page["next_before"]}).json()
        assert [r["run_id"] for r in older["runs"]] == [oldest["run_id"]]
        one = c.get(f"/v1/audits/{newest['run_id']}").json()
        codes = {(f["code"], f["class"], f["seq"]) for f in one["finding_list"]}
        assert ("column_mismatch", "payload_modified", 3) in codes
        f = next(f for f in one["finding_list"] if f["code"] == "column_mismatch")
        assert "expected" in f and "actual" in f
        r = c.get("/v1/audits/999999")
        assert r.status_code == 404 and r.json()["code"] == "not_found"
        assert c.get("/v1/audits/0").status_code == 400
        assert c.get("/v1/audits", params={"after": 1}).status_code == 400
    for role in ("developer", "agent", "producer", "custodian"):
        with seeded.client(role) as c:
            for path in ("/v1/audits", "/v1/audits/1"):
                r = c.get(path)
                assert r.status_code == 403 and r.json()["code"] == "forbidden", (role, path)
    assert httpx.get(seeded.base_url + "/v1/audits").status_code == 401


def test_an_audit_run_answers_incidents_and_pages_of_findings(seeded: Server) -> None:
    with seeded.client("auditor") as c:
        newest = c.get("/v1/audits").json()["runs"][0]
        assert set(newest["label"]) == {"command", "actor", "scope", "checkpoints"}
        assert newest["label"]["scope"] == "whole ledger: seqs [0, 12)"
        one = c.get(f"/v1/audits/{newest['run_id']}").json()
        [inc] = [g for g in one["incidents"] if g["code"] == "column_mismatch"]
        assert (inc["field"], inc["count"], inc["ranges"]) == ("status", 1, [[3, 3]])
        assert inc["explain"]["severity"] == "critical" and inc["explain"]["next_step"]
        page = c.get(f"/v1/audits/{newest['run_id']}",
                     params={"code": "column_mismatch", "field": "status", "limit": 1}).json()
        assert [f["seq"] for f in page["finding_list"]] == [3] and page["finding_total"] == 1
        for bad in ({"sort": "size"}, {"limit": 0}, {"offset": -1}, {"page": 2}):
            r = c.get(f"/v1/audits/{newest['run_id']}", params=bad)
            assert r.status_code == 400, bad
            assert r.headers["content-type"].startswith("application/problem+json")


def test_checkpoints_carry_hex_roots_and_consistency_proofs(seeded: Server,
                                                             tmp_path: Path) -> None:
    from ledger.core.merkle import verify_consistency

    jwks = tmp_path / "jwks.json"
    jwks.write_text(httpx.get(seeded.base_url + "/.well-known/jwks.json").text)
    keys = load_public_keys(jwks)
    with seeded.client("auditor") as c:
        first, second = c.get("/v1/checkpoints", params={"consistency": "true"}).json()[
            "checkpoints"]
        cp1, _ = open_signed_checkpoint(first["note"], keys)
        cp2, _ = open_signed_checkpoint(second["note"], keys)
        assert (first["root_hex"], second["root_hex"]) == (cp1.root_hash.hex(),
                                                           cp2.root_hash.hex())
        assert first["consistency"] is None  # nothing before the first
        assert second["consistency"]["from"] == 8
        path = [bytes.fromhex(x) for x in second["consistency"]["path"]]
        verify_consistency(8, 12, path, cp1.root_hash, cp2.root_hash)  # raises if not
        # a later page starts from the checkpoint of size `after`
        [again] = c.get("/v1/checkpoints", params={"consistency": "true", "after": 8}).json()[
            "checkpoints"]
        assert again["consistency"] == second["consistency"]
        assert "consistency" not in c.get("/v1/checkpoints").json()["checkpoints"][1]
