"""``ledger import qwed`` on a log written by QWED 8.0.0's own AuditLogger: every rule —
a clean import with provenance and the insufficient_evidence abstention, a re-run, a
resumed run, a JSON Lines dump, a dry run, an edited row, a deleted row (broken link), a
wrong secret, no secret, a row re-signed after it was imported, and a row id the import
entry cannot record (refused before anything is written)."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text

from ledger.core.qwed_log import entry_hmac, expected_hashes
from ledger.store.qwed_source import read_rows
from tests.integrations.conftest import (
    SECRET,
    audit,
    ledger_cli,
    new_ledger,
    qwed_pg_url,
    secret_file,
    write_qwed_log,
)

ROWS = 32


def do_import(db_url: str, source: str, *extra: str) -> tuple[int, dict, str]:
    code, out, err = ledger_cli(db_url, "import", "qwed", "--source", source, *extra)
    return code, json.loads(out), err


def entries(db_url: str, where: str = "1=1") -> list:
    eng = create_engine(db_url.replace("postgresql://", "postgresql+psycopg://", 1))
    with eng.connect() as conn:
        rows = list(conn.execute(text(f"SELECT seq, kind, status, subject, idempotency_key, "
                                      f"att_verdict FROM entries WHERE {where} ORDER BY seq")))
    eng.dispose()
    return rows


def copy(src: str, tmp: Path, name: str = "qwed.db") -> Path:
    dst = tmp / name
    shutil.copy(src, dst)
    return dst


def test_clean_import_then_rerun_appends_nothing(db_url: str, qwed_sqlite: str,
                                                 tmp_path: Path) -> None:
    new_ledger(db_url)
    source = f"sqlite:///{qwed_sqlite}"
    code, rep, _ = do_import(db_url, source, "--hmac-secret-file", secret_file(tmp_path))
    assert code == 0, rep
    assert (rep["rows"], rep["imported"], rep["quarantined"], rep["hmac"]) == \
        (ROWS, ROWS, [], "checked")
    assert set(rep["organizations"]) == {"1", "2"}
    results = entries(db_url, "kind = 'result'")
    assert len(results) == ROWS and results[0].idempotency_key == "qwed:default:1:1"
    verified = [r for r in results if r.status == "VERIFIED"]
    assert verified and all(r.att_verdict == "valid" for r in verified)  # attestation checked
    (imp,) = entries(db_url, "kind = 'import'")
    assert imp.subject == "qwed:default" and imp.status == "clean"
    code, report = audit(db_url, tmp_path)
    assert code == 3 and report["findings"] == []
    reasons = {(a["check"], a["reason"]) for a in report["abstentions"]}
    assert reasons == {("proof_ref", "insufficient_evidence")}
    assert len(report["abstentions"]) == len(verified)
    _, shown, _ = ledger_cli(db_url, "show", str(verified[0].seq), "--format", "json")
    prov = json.loads(json.loads(shown)["payloads"]["meta"]["text"])["import"]
    assert prov["hmac"] == "valid" and prov["source_entry_hash"] and prov["organization_id"] == 1

    code, again, _ = do_import(db_url, source, "--hmac-secret-file", secret_file(tmp_path))
    assert code == 0 and (again["imported"], again["replayed"]) == (0, ROWS)
    assert again["import_seq"] is None and len(entries(db_url)) == len(entries(db_url))
    assert len(entries(db_url, "kind = 'import'")) == 1


def test_resumed_run_and_json_lines_dump_add_only_what_is_missing(
        sqlite_url: str, qwed_sqlite: str, tmp_path: Path) -> None:
    new_ledger(sqlite_url)
    code, first, _ = do_import(sqlite_url, f"sqlite:///{qwed_sqlite}", "--organization", "1")
    assert code == 0 and first["imported"] == ROWS // 2 and first["hmac"] == "unchecked"
    dump = tmp_path / "log.jsonl"
    with sqlite3.connect(qwed_sqlite) as conn:
        conn.row_factory = sqlite3.Row
        rows = [dict(r) for r in conn.execute("SELECT * FROM verificationlog ORDER BY id DESC")]
    dump.write_text("".join(json.dumps(r) + "\n" for r in rows))
    code, rest, _ = do_import(sqlite_url, str(dump), "--hmac-secret-file",
                              secret_file(tmp_path))
    assert code == 0 and (rest["imported"], rest["replayed"]) == (ROWS // 2, ROWS // 2)
    assert len(entries(sqlite_url, "kind = 'result'")) == ROWS


def _import_document(db_url: str) -> dict:
    (imp,) = entries(db_url, "kind = 'import'")
    _, shown, _ = ledger_cli(db_url, "show", str(imp.seq), "--format", "json")
    return json.loads(json.loads(shown)["payloads"]["report"]["text"])


IMPORT_KEYS = {"type", "source", "label", "namespace", "outcome", "hmac", "rows", "imported",
               "replayed", "legacy", "quarantined", "organizations"}  # docs/format.md §10.3


def test_the_import_entry_records_nothing_of_the_importing_machine(
        db_url: str, qwed_sqlite: str, tmp_path: Path) -> None:
    """The path of the dump (or the URL) is printed, never hashed into the chain; the
    operator's --label is recorded, as documented key by key."""
    new_ledger(db_url)
    dump = tmp_path / "home-of-the-operator" / "secret-project" / "verificationlog.jsonl"
    dump.parent.mkdir(parents=True)
    with sqlite3.connect(qwed_sqlite) as conn:
        conn.row_factory = sqlite3.Row
        rows = [dict(r) for r in conn.execute("SELECT * FROM verificationlog ORDER BY id")]
    dump.write_text("".join(json.dumps(r) + "\n" for r in rows))
    code, rep, _ = do_import(db_url, str(dump), "--label", "QWED prod, nightly dump")
    assert code == 0 and rep["source"] == str(dump)  # the printed report says where
    doc = _import_document(db_url)
    assert set(doc) == IMPORT_KEYS
    assert doc["label"] == "QWED prod, nightly dump" and doc["source"] == "qwed:default"
    text = json.dumps(doc)
    for part in (str(tmp_path), "home-of-the-operator", "secret-project", "verificationlog"):
        assert part not in text


def test_an_import_without_label_records_null_and_a_bad_label_is_refused(
        sqlite_url: str, qwed_sqlite: str, tmp_path: Path) -> None:
    new_ledger(sqlite_url)
    before = entries(sqlite_url)
    for bad in ("", " ", "x" * 257, "line\nbreak"):
        code, out, err = ledger_cli(sqlite_url, "import", "qwed", "--source",
                                    f"sqlite:///{qwed_sqlite}", "--label", bad)
        assert code == 2 and "label" in err, (bad, err)
    assert entries(sqlite_url) == before  # nothing written
    code, _, _ = do_import(sqlite_url, f"sqlite:///{qwed_sqlite}")
    doc = _import_document(sqlite_url)
    assert code == 0 and doc["label"] is None and set(doc) == IMPORT_KEYS
    assert str(qwed_sqlite) not in json.dumps(doc) and "sqlite" not in json.dumps(doc)


def test_dry_run_writes_nothing(sqlite_url: str, qwed_sqlite: str, tmp_path: Path) -> None:
    new_ledger(sqlite_url)
    before = entries(sqlite_url)
    code, rep, err = do_import(sqlite_url, f"sqlite:///{qwed_sqlite}", "--dry-run")
    assert code == 0 and rep["imported"] == ROWS and "(dry run)" in err
    assert entries(sqlite_url) == before


def test_an_edited_row_is_quarantined_and_the_rest_imported(sqlite_url: str, qwed_sqlite: str,
                                                            tmp_path: Path) -> None:
    new_ledger(sqlite_url)
    src = copy(qwed_sqlite, tmp_path)
    with sqlite3.connect(src) as conn:
        conn.execute("UPDATE verificationlog SET query = 'DROP TABLE audit' WHERE id = 5")
    code, rep, err = do_import(sqlite_url, f"sqlite:///{src}", "--hmac-secret-file",
                               secret_file(tmp_path))
    assert code == 1
    assert [(q["id"], q["code"]) for q in rep["quarantined"]] == [(5, "qwed_hash_mismatch")]
    assert "row 5: qwed_hash_mismatch" in err and rep["imported"] == ROWS - 1
    eng = create_engine(sqlite_url)
    with eng.connect() as conn:
        (qcode,) = conn.execute(text("SELECT code FROM quarantine")).one()
    assert qcode == "qwed_hash_mismatch"
    (imp,) = entries(sqlite_url, "kind = 'import'")
    assert imp.status == "quarantined"


def test_a_deleted_row_breaks_the_link_of_the_next(sqlite_url: str, qwed_sqlite: str,
                                                   tmp_path: Path) -> None:
    new_ledger(sqlite_url)
    src = copy(qwed_sqlite, tmp_path)
    with sqlite3.connect(src) as conn:
        org, = conn.execute("SELECT organization_id FROM verificationlog WHERE id = 7").fetchone()
        nxt, = conn.execute("SELECT min(id) FROM verificationlog WHERE organization_id = ? "
                            "AND id > 7", (org,)).fetchone()
        conn.execute("DELETE FROM verificationlog WHERE id = 7")
    code, rep, _ = do_import(sqlite_url, f"sqlite:///{src}")
    assert code == 1
    assert [(q["id"], q["code"]) for q in rep["quarantined"]] == [(nxt, "qwed_link_broken")]
    assert rep["imported"] == ROWS - 2


def test_a_wrong_secret_quarantines_every_row(sqlite_url: str, qwed_sqlite: str,
                                              tmp_path: Path) -> None:
    new_ledger(sqlite_url)
    code, rep, _ = do_import(sqlite_url, f"sqlite:///{qwed_sqlite}", "--hmac-secret-file",
                             secret_file(tmp_path, "not-the-secret"))
    assert code == 1 and rep["imported"] == 0
    assert {q["code"] for q in rep["quarantined"]} == {"qwed_hmac_invalid"}
    assert len(rep["quarantined"]) == ROWS and entries(sqlite_url, "kind = 'import'") == []


def test_a_row_resigned_after_import_is_an_idempotency_conflict(
        sqlite_url: str, qwed_sqlite: str, tmp_path: Path) -> None:
    """Someone with QWED's key and database rewrites an imported row (hash and HMAC
    recomputed): QWED's chain still verifies, but the ledger already holds the original."""
    new_ledger(sqlite_url)
    src = copy(qwed_sqlite, tmp_path)
    assert do_import(sqlite_url, f"sqlite:///{src}")[0] == 0
    with sqlite3.connect(src) as conn:
        conn.row_factory = sqlite3.Row
        last = dict(conn.execute("SELECT * FROM verificationlog ORDER BY id DESC").fetchone())
        last["is_verified"] = bool(last["is_verified"])
        assert last["entry_hash"] in expected_hashes(last)  # the recipe, recomputed here
        new = expected_hashes({**last, "raw_llm_output": "rewritten"})[0]
        conn.execute("UPDATE verificationlog SET raw_llm_output = ?, entry_hash = ?, "
                     "hmac_signature = ? "
                     "WHERE id = ?", ("rewritten", new, entry_hmac(SECRET.encode(), new),
                                      last["id"]))
    code, rep, _ = do_import(sqlite_url, f"sqlite:///{src}", "--hmac-secret-file",
                             secret_file(tmp_path))
    assert code == 1
    assert [(q["id"], q["code"]) for q in rep["quarantined"]] == \
        [(last["id"], "idempotency_conflict")]


@pytest.mark.postgres
def test_import_from_qwed_on_postgresql(sqlite_url: str, pg_database: str,
                                        tmp_path: Path) -> None:
    url = qwed_pg_url(pg_database)
    write_qwed_log(url.replace("postgresql+psycopg://", "postgresql+psycopg://", 1), 1)
    new_ledger(sqlite_url)
    code, rep, _ = do_import(sqlite_url, url, "--hmac-secret-file", secret_file(tmp_path))
    assert code == 0 and rep["imported"] == ROWS // 2 and rep["quarantined"] == []
    assert rep["source"].startswith("postgresql")


def test_a_source_url_is_recorded_without_its_password() -> None:
    from ledger.store.qwed_source import redacted

    assert "pw" not in redacted("postgresql://qwed:pw@db.internal/qwed")


def test_a_row_id_beyond_2_53_is_refused_before_anything_is_appended(
        db_url: str, qwed_sqlite: str, tmp_path: Path) -> None:
    """QWED's ids are unbounded integers; the import entry (canonical JSON) holds
    integers up to 2^53-1 only.  Such a row used to be appended and the import entry then
    failed, on every re-run: now the run is refused up front, nothing written."""
    new_ledger(db_url)
    src = copy(qwed_sqlite, tmp_path)
    with sqlite3.connect(src) as conn:  # the id is not hashed: QWED's chain still verifies
        conn.execute("UPDATE verificationlog SET id = ? WHERE id = "
                     "(SELECT max(id) FROM verificationlog)", (2**53,))
    before = entries(db_url)
    for _ in range(2):
        code, out, err = ledger_cli(db_url, "import", "qwed", "--source", f"sqlite:///{src}")
        assert entries(db_url) == before  # no result entry, no import entry
        assert code == 2, (out, err)
        assert f"row id {2**53}" in err and "2^53-1" in err and "nothing was imported" in err


def test_a_dump_row_id_beyond_2_53_or_not_an_integer_is_refused(
        sqlite_url: str, qwed_sqlite: str, tmp_path: Path) -> None:
    new_ledger(sqlite_url)
    with sqlite3.connect(qwed_sqlite) as conn:
        conn.row_factory = sqlite3.Row
        rows = [dict(r) for r in conn.execute("SELECT * FROM verificationlog ORDER BY id")]
    before = entries(sqlite_url)
    for bad in (-(2**53), 32.0, "32"):
        dump = tmp_path / "log.jsonl"
        dump.write_text("".join(json.dumps({**r, "id": bad} if r is rows[-1] else r) + "\n"
                                for r in rows))
        code, out, err = ledger_cli(sqlite_url, "import", "qwed", "--source", str(dump))
        assert entries(sqlite_url) == before
        assert code == 2 and f"row id {bad!r}" in err and "nothing was imported" in err


def test_rows_given_to_the_facade_are_checked_before_their_chunk_is_committed(
        db_url: str, qwed_sqlite: str) -> None:
    from ledger.errors import UsageError
    from ledger.facade import Ledger

    new_ledger(db_url)
    rows = list(read_rows(f"sqlite:///{qwed_sqlite}"))
    rows[-1]["id"] = 2**53
    before = entries(db_url)
    with Ledger.open(db_url) as ledger, pytest.raises(UsageError) as err:
        ledger.import_qwed(iter(rows), source="test")
    assert err.value.field == "id" and "the run stopped at this row" in str(err.value)
    assert entries(db_url) == before


@pytest.mark.slow  # writes a QWED log on PostgreSQL (about 5 s)
@pytest.mark.postgres
def test_a_postgresql_source_row_id_beyond_2_53_is_refused(sqlite_url: str, pg_database: str,
                                                           tmp_path: Path) -> None:
    url = qwed_pg_url(pg_database)
    write_qwed_log(url, 1)
    eng = create_engine(url)
    with eng.begin() as conn:  # a deployment that outgrew int4
        conn.execute(text("ALTER TABLE verificationlog ALTER COLUMN id TYPE bigint"))
        conn.execute(text("UPDATE verificationlog SET id = :big WHERE id = "
                          "(SELECT max(id) FROM verificationlog)"), {"big": 2**53 + 1})
    eng.dispose()
    new_ledger(sqlite_url)
    before = entries(sqlite_url)
    code, out, err = ledger_cli(sqlite_url, "import", "qwed", "--source", url)
    assert entries(sqlite_url) == before
    assert code == 2 and f"row id {2**53 + 1}" in err and "nothing was imported" in err


def test_organisations_map_to_tenants(db_url: str, qwed_sqlite: str, tmp_path: Path) -> None:
    """--tenant-map ORG=TENANT puts an organisation's rows in a tenant's chain, --tenant the
    other organisations'; the import entry stays in the default tenant; the chains audit clean."""
    new_ledger(db_url)
    source = f"sqlite:///{qwed_sqlite}"
    code, rep, err = do_import(db_url, source, "--hmac-secret-file", secret_file(tmp_path),
                               "--tenant-map", "1=org-one", "--tenant", "others")
    assert code == 0, err
    eng = create_engine(db_url.replace("postgresql://", "postgresql+psycopg://", 1))
    with eng.connect() as conn:
        got = {(str(k), str(t)) for k, t in conn.execute(text(
            "SELECT kind, tenant FROM entries")).all()}
        orgs = dict(conn.execute(text(
            "SELECT DISTINCT substr(idempotency_key, 1, 15), tenant FROM entries "
            "WHERE kind = 'result'")).all())
    eng.dispose()
    assert got == {("result", "org-one"), ("result", "others"), ("import", "default"),
                   ("key_event", "default")}
    assert orgs == {"qwed:default:1:": "org-one", "qwed:default:2:": "others"}
    code, report = audit(db_url, tmp_path)
    assert code == 3 and report["findings"] == []
    # a bad tenant id or map is a usage error before anything is read
    for bad in (["--tenant", "Org"], ["--tenant-map", "1=Org"], ["--tenant-map", "one=x"],
                ["--tenant-map", "1"]):
        code, out, err = ledger_cli(db_url, "import", "qwed", "--source", source, *bad)
        assert code == 2, (bad, out, err)
        assert "tenant" in err or "organization" in err


def test_the_import_keeps_tenant_quotas(db_url: str, qwed_sqlite: str, tmp_path: Path,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """Imported results are a producer's results: beyond a tenant's quota they are
    quarantined with tenant_quota_exceeded, not appended."""
    new_ledger(db_url)
    monkeypatch.setenv("LEDGER_TENANT_QUOTAS", "org-one=1")
    code, rep, err = do_import(db_url, f"sqlite:///{qwed_sqlite}", "--hmac-secret-file",
                               secret_file(tmp_path), "--tenant-map", "1=org-one",
                               "--tenant", "others")
    eng = create_engine(db_url.replace("postgresql://", "postgresql+psycopg://", 1))
    with eng.connect() as conn:
        per = dict(conn.execute(text("SELECT tenant, count(*) FROM entries WHERE kind = "
                                     "'result' GROUP BY tenant")).all())
        reasons = [str(r[0]) for r in conn.execute(text("SELECT code FROM quarantine")).all()]
    eng.dispose()
    assert per["org-one"] == 1 and per["others"] > 1, per
    assert reasons and set(reasons) == {"tenant_quota_exceeded"}, reasons
