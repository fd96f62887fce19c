"""What the console downloads, against a real server on both engines: the entries of a
filter as CSV and JSON (the same rows the API serves), the signed export bundle of the
filter as a zip that ``ledger verify-export`` accepts, and a run's findings as CSV."""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys
import zipfile
from pathlib import Path

from ledger.facade import Ledger
from ledger.ops.query import CSV_COLUMNS
from tests.api.server import Server
from tests.api.test_navigation import nav  # noqa: F401 -- the module's server fixture


def _jsonl(c, **params) -> list[dict]:
    r = c.get("/v1/export", params=params)
    assert r.status_code == 200
    return [json.loads(x) for x in r.text.splitlines()]


def test_csv_and_json_hold_the_rows_the_api_serves(nav: Server) -> None:  # noqa: F811
    for role in ("auditor", "agent"):
        layer = "auditor" if role == "auditor" else "agent"
        with nav.client(role) as c:
            want = _jsonl(c, status=["VERIFIED", "BLOCKED"])
            assert want
            r = c.get("/v1/export", params={"status": ["VERIFIED", "BLOCKED"], "format": "csv"})
            assert r.headers["content-type"].startswith("text/csv")
            got = list(csv.reader(io.StringIO(r.text)))
            assert got[0] == CSV_COLUMNS[layer]
            assert [int(x[0]) for x in got[1:]] == [w["seq"] for w in want]
            cols = got[0]
            for row, w in zip(got[1:], want):
                cell = dict(zip(cols, row))
                assert cell["status"] == (w["status"] or "")
                assert json.loads(cell["integrity"]) == w["integrity"]
            arr = c.get("/v1/export", params={"status": ["VERIFIED", "BLOCKED"],
                                              "format": "json"})
            assert arr.headers["content-type"] == "application/json"
            assert arr.json() == want
            assert c.get("/v1/export", params={"format": "xml"}).status_code == 400
    with nav.client("auditor") as c:  # the flagged entry 4 keeps its verdict in the CSV
        rows = {int(x["seq"]): x for x in csv.DictReader(io.StringIO(
            c.get("/v1/export", params={"format": "csv"}).text))}
        assert json.loads(rows[4]["integrity"])["verified"] is False
        assert json.loads(rows[5]["integrity"])["verified"] is True


def test_the_signed_bundle_of_a_filter_verifies_offline(nav: Server,  # noqa: F811
                                                        tmp_path: Path) -> None:
    with nav.client("auditor") as c:
        n = c.get("/v1/entries", params={"status": "BLOCKED", "count": "true"}
                  ).json()["index_total"]
        r = c.get("/v1/export/bundle", params={"status": "BLOCKED"}, timeout=60)
        assert r.status_code == 200 and r.headers["content-type"] == "application/zip"
        assert int(r.headers["x-ledger-export-entries"]) == n
        for bad in ({"format": "zip"}, {"has_findings": "true"}):
            assert c.get("/v1/export/bundle", params=bad).status_code == 400, bad
    with zipfile.ZipFile(io.BytesIO(r.content)) as z:
        z.extractall(tmp_path)
    [folder] = list(tmp_path.iterdir())
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["filters"] == {"status": ["BLOCKED"]} and manifest["counts"]["entries"] == n
    done = subprocess.run([sys.executable, "-m", "ledger.cli.main", "verify-export",
                           str(folder)], capture_output=True, text=True, timeout=120)
    # entry 4 (whose status column was rewritten to BLOCKED or away from it) is evidence of
    # tampering in the bundle if it is in it; any other bundle verifies
    in_bundle = any(json.loads(x)["seq"] == 4 for x in
                    (folder / "entries.jsonl").read_text().splitlines())
    assert done.returncode == (1 if in_bundle else 0), done.stderr
    for role in ("developer", "agent"):
        with nav.client(role) as c:
            r = c.get("/v1/export/bundle")
            assert r.status_code == 403 and r.json()["error"]["code"] == "forbidden_format"


def test_findings_csv_holds_the_runs_findings(nav: Server) -> None:  # noqa: F811
    with Ledger.open(nav.db_url) as ledger:
        run_id = ledger.audit().run_id
    with nav.client("auditor") as c:
        doc = c.get(f"/v1/audits/{run_id}").json()
        r = c.get(f"/v1/audits/{run_id}", params={"format": "csv"})
        assert r.headers["content-type"].startswith("text/csv")
        rows = list(csv.DictReader(io.StringIO(r.text)))
        assert [(int(x["seq"]), x["code"], x["class"]) for x in rows] == [
            (f["seq"], f["code"], f["class"]) for f in doc["finding_list"]]
        [mis] = [x for x in rows if x["code"] == "column_mismatch"]
        assert (mis["field"], mis["severity"], mis["seq"]) == ("status", "critical", "4")
        assert c.get(f"/v1/audits/{run_id}", params={"format": "pdf"}).status_code == 400
