"""``ledger backup`` (SQLite online backup while appends run) and ``ledger restore-check``
(the restored ledger is audited against kept checkpoints); PostgreSQL: the documented
``pg_dump`` / ``createdb`` / ``ledger restore-check`` commands, run as written."""

from __future__ import annotations

import json
import re
import shutil
import sqlite3
import subprocess
import sys
import threading
import uuid
from pathlib import Path

import pytest
from click.testing import CliRunner
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from ledger import Ledger
from ledger.cli.main import cli
from ledger.crypto.keys import Keyring
from ledger.demo.samples import realistic
from tests.api.server import ROOT, prepare_ledger
from tests.conftest import PG_ADMIN_URL, _psycopg
from tests.store.pgadmin import own_database

DOCS = ROOT / "docs" / "operations.md"


def run(*args: str) -> tuple[int, str, str]:
    res = CliRunner().invoke(cli, list(args))
    return res.exit_code, res.stdout, res.stderr


def _ledger(tmp: Path, n: int = 20) -> tuple[str, Path]:
    url = f"sqlite:///{tmp / 'ledger.db'}"
    keys = tmp / "keys"
    prepare_ledger(url, keys, "test.example/backup")
    with Ledger.open(url) as led:
        led.append_many(realistic(n))
    return url, keys


def _checkpoint(url: str, keys: Path, out: Path) -> Path:
    code, _, err = run("--db", url, "checkpoint", "--keys", str(keys), "--out", str(out))
    assert code == 0, err
    return out


def test_a_backup_taken_while_appends_run_restores_and_extends_the_checkpoint(
        tmp_path: Path) -> None:
    url, keys = _ledger(tmp_path)
    cp = _checkpoint(url, keys, tmp_path / "cp.txt")
    stop = threading.Event()
    appended = []

    def writer() -> None:
        with Ledger.open(url) as led:
            subs = realistic(400)[20:]
            i = 0
            while not stop.is_set() and i < len(subs):
                appended.extend(led.append_many(subs[i:i + 5]))
                i += 5

    t = threading.Thread(target=writer)
    t.start()
    try:
        outs = []
        for k in range(3):
            out = tmp_path / f"backup-{k}.db"
            code, stdout, err = run("--db", url, "backup", "--out", str(out), "--format",
                                    "json")
            assert code == 0, err
            outs.append((out, json.loads(stdout)))
    finally:
        stop.set()
        t.join()
    assert appended, "the writer appended while the backups ran"
    jwks = str(keys / "jwks.json")
    for out, info in outs:
        assert info["size"] >= 20 and out.stat().st_size == info["bytes"]
        code, stdout, err = run("restore-check", str(out), "--checkpoint", str(cp), "--key",
                                jwks, "--json-report", "-")
        assert code == 0, err
        doc = json.loads(stdout)
        assert doc["outcome"] == "passed" and doc["size"] == info["size"]
        assert doc["summary"]["verified"] == info["size"]
        assert "restore-check passed" in err
    assert not list(tmp_path.glob("*.partial"))


def test_a_tampered_backup_fails_the_check(tmp_path: Path) -> None:
    url, keys = _ledger(tmp_path)
    cp = _checkpoint(url, keys, tmp_path / "cp.txt")
    out = tmp_path / "b.db"
    assert run("--db", url, "backup", "--out", str(out))[0] == 0
    con = sqlite3.connect(out)
    for trig in [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE "
                                           "type='trigger' AND tbl_name='entries'")]:
        con.execute(f"DROP TRIGGER {trig}")
    con.execute("UPDATE entries SET recorded_at = recorded_at + 1 WHERE seq = 3")
    con.commit()
    con.close()
    code, _, err = run("restore-check", str(out), "--checkpoint", str(cp), "--key",
                       str(keys / "jwks.json"))
    assert code == 1 and "NOT GOOD" in err and "seq 3" in err


def test_a_backup_older_than_the_checkpoint_is_reported_truncated(tmp_path: Path) -> None:
    url, keys = _ledger(tmp_path, 10)
    out = tmp_path / "old.db"
    assert run("--db", url, "backup", "--out", str(out))[0] == 0
    with Ledger.open(url) as led:
        led.append_many(realistic(15)[10:])
    cp = _checkpoint(url, keys, tmp_path / "cp.txt")
    code, stdout, err = run("restore-check", str(out), "--checkpoint", str(cp), "--key",
                            str(keys / "jwks.json"), "--json-report", "-")
    assert code == 1, err
    assert any(f["class"] == "truncated" for f in json.loads(stdout)["findings"])


def test_a_checkpoint_of_another_key_does_not_pass(tmp_path: Path) -> None:
    url, keys = _ledger(tmp_path, 5)
    cp = _checkpoint(url, keys, tmp_path / "cp.txt")
    out = tmp_path / "b.db"
    assert run("--db", url, "backup", "--out", str(out))[0] == 0
    other = tmp_path / "other"
    Keyring.load(other).generate("test.example/backup", 0)
    code, _, err = run("restore-check", str(out), "--checkpoint", str(cp), "--key",
                       str(other / "jwks.json"))
    assert code == 1, err


def test_usage_errors(tmp_path: Path, pg_url: str) -> None:
    url, keys = _ledger(tmp_path, 2)
    out = tmp_path / "b.db"
    assert run("--db", url, "backup", "--out", str(out))[0] == 0
    code, _, err = run("--db", url, "backup", "--out", str(out))
    assert code == 2 and "exists" in err
    Ledger.init(pg_url).close()
    code, _, err = run("--db", pg_url, "backup", "--out", str(tmp_path / "pg.db"))
    assert code == 2 and "pg_dump" in err
    junk = tmp_path / "junk.bin"
    junk.write_bytes(b"not a backup")
    cp = _checkpoint(url, keys, tmp_path / "cp.txt")
    code, _, err = run("restore-check", str(junk), "--checkpoint", str(cp), "--key",
                       str(keys / "jwks.json"))
    assert code == 2 and "neither a SQLite database nor a pg_dump" in err
    code, _, err = run("restore-check", str(out), "--checkpoint", str(cp), "--key",
                       str(keys / "jwks.json"), "--scratch-db", pg_url)
    assert code == 2 and "--scratch-db is for pg_dump" in err
    for e in (err,):
        assert "Traceback" not in e


def _documented_pg_commands() -> list[str]:
    """The shell lines of the PostgreSQL backup block of docs/operations.md."""
    text_ = DOCS.read_text("utf-8")
    block = re.search(r"<!-- pg-backup -->\n```sh\n(.*?)```", text_, re.S)
    assert block, "docs/operations.md lost its PostgreSQL backup block"
    return [x for x in block.group(1).splitlines() if x.strip() and not x.startswith("#")]


@pytest.mark.postgres
@pytest.mark.slow
@pytest.mark.skipif(shutil.which("pg_dump") is None, reason="pg_dump is not installed")
def test_the_documented_postgresql_procedure(tmp_path: Path, pg_database: str) -> None:
    with own_database() as url:
        keys = tmp_path / "keys"
        prepare_ledger(url, keys, "test.example/pg-backup")
        with Ledger.open(url) as led:
            led.append_many(realistic(12))
        _checkpoint(url, keys, tmp_path / "checkpoint.txt")
        u = make_url(url)
        scratch = f"ledger_restore_check_{uuid.uuid4().hex[:8]}"
        env = {"LEDGER_DB_URL": u.set(drivername="postgresql").render_as_string(
            hide_password=False), "PGHOST": u.host or "127.0.0.1", "PGPORT": str(u.port or 5432),
            "PGUSER": u.username or "postgres", "SCRATCH_DB": scratch,
            "LEDGER_KEYS_DIR": str(keys), "PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin"}
        errs = []
        try:
            for line in _documented_pg_commands():
                res = subprocess.run(["bash", "-c", line], cwd=tmp_path, env=env,
                                     capture_output=True, text=True, timeout=300)
                assert res.returncode == 0, f"{line}\n{res.stdout}\n{res.stderr}"
                errs.append(res.stderr)
            assert any("restore-check passed: backup good — 12 entries" in e for e in errs), errs
        finally:
            admin = create_engine(_psycopg(PG_ADMIN_URL), isolation_level="AUTOCOMMIT")
            with admin.connect() as conn:
                conn.execute(text(f'DROP DATABASE IF EXISTS "{scratch}" WITH (FORCE)'))
            admin.dispose()


def test_the_rollback_command_goes_back_and_refuses_what_it_cannot(db_url: str) -> None:
    """`ledger db downgrade` (the rollback of docs/operations.md), on both engines."""
    Ledger.init(db_url).close()
    assert run("--db", db_url, "db", "downgrade", "--revision", "0007")[1].strip() == \
        "at revision 0007"
    assert run("--db", db_url, "db", "current")[1].strip() == "0007"
    assert run("--db", db_url, "db", "upgrade")[0] == 0
    with Ledger.open(db_url) as led:
        led.append_many(realistic(3))
    code, _, err = run("--db", db_url, "db", "downgrade", "--revision", "0004")
    assert code == 2 and "irreversible_migration" in err and "Traceback" not in err
    assert run("--db", db_url, "db", "current")[1].strip() == "0013"  # nothing half-done
    code, _, err = run("--db", db_url, "audit")
    assert code == 0, err
    code, _, err = run("--db", db_url, "db", "downgrade", "--revision", "nope")
    assert code == 2 and "bad_revision" in err
