"""Values of the wrong storage class written behind the ledger's back (SQLite only:
PostgreSQL's column types refuse them).

SQLite keeps whatever a superuser writes: TEXT in a BLOB column, a BLOB in a string column,
TEXT that is not UTF-8 (which ``sqlite3`` cannot even read back as ``str``).  The audit must
hash what is stored, report the row that holds such a value and go on with the rest -- never
stop with a driver error; the other readers (``ledger show``, ``query``, the service) refuse
that one entry with an error that names the column, and read the others as ever; the HTML
report draws the value as stored and shows the audit that names the entry.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner
from sqlalchemy import text
from sqlalchemy.exc import OperationalError

from ledger import Ledger
from ledger.cli.main import cli
from ledger.core.entry import SLOTS
from ledger.demo.samples import realistic
from ledger.errors import IntegrityError
from ledger.ops.audit import AuditOptions, run_audit
from tests import tamper as T
from tests.api.server import Server, prepare_ledger, start_server

N = 12
NOT_UTF8 = "CAST(X'FFFE41' AS TEXT)"  # TEXT whose bytes are not UTF-8
RESULT, PREIMAGE, QUERY = SLOTS["result"], SLOTS["preimage"], SLOTS["query"]

CASES = {
    # (table, column, new value as SQL, the slot of a payload row) -> the findings at the row
    "payload data: TEXT, not UTF-8": ("payloads", "data", NOT_UTF8, RESULT,
                                      {"payload_digest_mismatch"}),
    "payload salt: TEXT, not UTF-8": ("payloads", "salt", NOT_UTF8, PREIMAGE,
                                      {"payload_digest_mismatch"}),
    "payload data: the same bytes as UTF-8 TEXT": ("payloads", "data", "CAST(data AS TEXT)",
                                                   QUERY, set()),
    "envelope: TEXT, not UTF-8": ("entries", "envelope", NOT_UTF8, None,
                                  {"envelope_hash_mismatch", "envelope_unreadable"}),
    "engine: TEXT, not UTF-8": ("entries", "engine", NOT_UTF8, None, {"column_mismatch"}),
    "engine: its bytes as a BLOB": ("entries", "engine", "CAST(engine AS BLOB)", None,
                                    {"column_mismatch"}),
    "kind: TEXT, not UTF-8": ("entries", "kind", NOT_UTF8, None, {"foreign_envelope"}),
}


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("workers", [1, 2])
def test_a_value_of_the_wrong_storage_class_is_reported_and_the_audit_goes_on(
        sqlite_url: str, case: str, workers: int) -> None:
    table, column, value, slot, expected = CASES[case]
    with Ledger.init(sqlite_url) as L:
        assert all(r.ok for r in L.append_many(realistic(N)))
    with T.unlocked(sqlite_url) as conn:
        # a verified row with a query: it has every payload the cases change
        seq = conn.execute(text(f"SELECT MIN(pid / 8) FROM payloads WHERE pid % 8 = {QUERY} "
                                f"AND pid / 8 IN (SELECT pid / 8 FROM payloads "
                                f"WHERE pid % 8 = {PREIMAGE})")).scalar()
        assert seq is not None
        where = f"seq = {seq}" if slot is None else f"pid = {seq * 8 + slot}"
        assert conn.execute(text(f"UPDATE {table} SET {column} = {value} WHERE {where}")
                            ).rowcount == 1
        if slot is not None:  # the tampered payload is really stored (not a missing slot)
            assert conn.execute(text(f"SELECT typeof({column}) FROM payloads WHERE {where}")
                                ).scalar() == "text"
    with Ledger.open(sqlite_url) as L:
        report = run_audit(L, AuditOptions(workers=workers))
    got = {f.code for f in report.findings}
    assert {f.seq for f in report.findings} <= {seq}
    assert got == expected
    summary = report.summary
    assert summary.rows == N
    assert summary.verified == N - (1 if expected else 0)
    assert report.outcome == ("failed" if expected else "passed")


@pytest.fixture
def not_utf8_engine(tmp_path: Path) -> tuple[str, Path, str, int]:
    """A SQLite ledger (with a signing key) whose entry ``seq`` has TEXT that is not UTF-8 in
    its engine column: (url, keys dir, origin, seq)."""
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    keys, origin = tmp_path / "keys", "test.example/types"
    prepare_ledger(url, keys, origin)
    with Ledger.open(url) as L:
        assert all(r.ok for r in L.append_many(realistic(N)))
    seq = 4
    with T.unlocked(url) as conn:
        conn.execute(text(f"UPDATE entries SET engine = {NOT_UTF8} WHERE seq = {seq}"))
    return url, keys, origin, seq


@pytest.mark.parametrize("args", [["show", "{seq}"], ["query"]], ids=["show", "query"])
def test_readers_flag_stored_text_that_is_not_utf8(
        not_utf8_engine: tuple[str, Path, str, int], args: list[str]) -> None:
    """The entry is read as stored and flagged (docs/reads.md): ``show`` names the column
    and exits 1, ``query`` serves the page with the row flagged; no driver error."""
    url, _, _, seq = not_utf8_engine
    r = CliRunner().invoke(cli, ["--db", url, *[a.format(seq=seq) for a in args]])
    assert "Traceback" not in r.output and not isinstance(r.exception, OperationalError)
    if args[0] == "show":
        assert r.exit_code == 1, r.output
        assert "column_mismatch (engine)" in r.stderr and "0xfffe41" in r.stderr
    else:
        assert r.exit_code == 0, r.output
        assert "1 row(s) did not verify" in r.stderr
    ok = CliRunner().invoke(cli, ["--db", url, "show", str(seq + 1)])
    assert ok.exit_code == 0, ok.output  # the other entries read as ever


def test_the_service_serves_that_entry_flagged_and_the_others_verified(
        not_utf8_engine: tuple[str, Path, str, int], tmp_path: Path) -> None:
    url, keys, origin, seq = not_utf8_engine
    proc, base = start_server(url, keys, tmp_path / "serve.log")
    srv = Server("sqlite", url, keys, origin, proc, base, tmp_path / "serve.log")
    try:
        srv.tokens = {"auditor": srv.token("auditor", "test-auditor")}
        with srv.client("auditor") as c:
            bad = c.get(f"/v1/entries/{seq}")
            good = c.get(f"/v1/entries/{seq + 1}")
            page = c.get("/v1/entries", params={"limit": 100})
        assert bad.status_code == 200, bad.text
        integrity = bad.json()["entry"]["integrity"]
        assert integrity["codes"] == ["column_mismatch"] and integrity["fields"] == ["engine"]
        assert bad.json()["entry"]["engine"] == "sql"  # the envelope's value
        assert good.status_code == 200 and good.json()["entry"]["integrity"]["verified"]
        assert page.status_code == 200 and page.json()["flagged"] == 1
    finally:
        srv.stop()


def test_the_html_report_shows_the_audit_that_names_the_entry(
        not_utf8_engine: tuple[str, Path, str, int], tmp_path: Path) -> None:
    """``ledger report`` audits the period and draws its figures from the hashed envelopes:
    the entry whose column holds unreadable text is flagged and never counted under that
    label, and the audit in the report names the entry; the exit code is the audit's (1:
    findings)."""
    url, _, _, seq = not_utf8_engine
    out = tmp_path / "report.html"
    r = CliRunner().invoke(cli, ["--db", url, "report", "--html", str(out)])
    assert r.exit_code == 1, r.output
    assert not isinstance(r.exception, (OperationalError, IntegrityError)), r.exception
    page = out.read_text("utf-8")
    assert "column_mismatch" in page and "\ufffd\ufffdA" not in page
    assert "1 entr(y/ies) did not verify" in page and f"seq {seq}" in page
