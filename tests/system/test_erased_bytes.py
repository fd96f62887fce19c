"""Erased bytes are gone from the database files: append real text, redact it, read the raw
files and search them for the text.

SQLite: the database file and its ``-wal`` file (secure_delete + the WAL checkpoint after a
redaction).  PostgreSQL: after ``VACUUM FULL`` and ``CHECKPOINT`` the files of the payloads
table and its TOAST table (``pg_relation_filepath``) when this process can read the data
directory; otherwise skipped with the reason (docs/redaction.md says what remains where).
"""

from __future__ import annotations

import os
import time
import uuid
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text

from ledger.demo.samples import math_verified
from ledger.facade import Ledger
from ledger.ops.custody import Ask
from tests.keyrings import ledger_keyring


def _marked(marker: str) -> dict:
    import random

    sub = math_verified(1, random.Random(1))
    sub["query"] = f"My name is {marker} and my account number is 1234-{marker}"
    sub["subject"] = f"subject-{marker}"
    sub["meta"] = {"note": f"contact {marker}"}
    return sub


def _needles(engine, marker: str, seqs: list[int]) -> list[bytes]:
    """What to search the files for: the text, and the stored form of each erased payload
    row (result, evidence, query, meta): the result and the evidence are stored
    DEFLATE-compressed (docs/storage.md#payload-codecs), so not as their text."""
    with engine.connect() as c:
        stored = c.execute(text(
            "SELECT codec, data FROM payloads WHERE pid IN ({})".format(
                ", ".join(str(s * 8 + k) for s in seqs for k in (0, 1, 3, 4))))).all()
    assert len(stored) == 4 * len(seqs) and all(len(b) >= 12 for _c, b in stored)
    assert {c for c, _b in stored} == {0, 1}  # both forms are searched for
    return [marker.encode(), *(bytes(b) for _c, b in stored)]


def _files(path: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in path.parent.glob(path.name + "*") if p.is_file()}


def test_sqlite_file_and_wal_hold_no_erased_bytes(tmp_path):
    db = tmp_path / "ledger.db"
    marker = "ZQXERASEME" + uuid.uuid4().hex[:8].upper()
    with Ledger.init(f"sqlite:///{db}", origin="test.example/erase") as lg:
        seqs = [lg.append(_marked(marker)).seq for _ in range(3)]
        lg.append(math_verified(2, __import__("random").Random(2)))  # an unrelated entry
        needles = _needles(lg.engine, marker, seqs)
        before = _files(db)
        for needle in needles:  # the search finds each before the erasure
            assert any(needle in data for data in before.values()), needle
        lg.redact(Ask("erasure test"), subject=f"subject-{marker}",
                  keyring=ledger_keyring(lg, tmp_path / "keys"))
        assert lg.get(seqs[0])["payloads"]["query"]["text"] is None
        after = _files(db)  # the ledger is still open: the WAL file exists
        assert f"{db.name}-wal" in after
        for name, data in after.items():
            for needle in needles:
                assert needle not in data, f"erased bytes {needle!r} found in {name}"


def _pg_files(conn, table: str, datadir: Path) -> list[Path]:
    """The files of ``table`` and of its TOAST table (every segment and fork)."""
    out = []
    toast = ("SELECT pg_relation_filepath(reltoastrelid) FROM pg_class "
             f"WHERE oid = '{table}'::regclass AND reltoastrelid <> 0")
    for sql in (f"SELECT pg_relation_filepath('{table}'::regclass)", toast):
        path = conn.execute(text(sql)).scalar()
        if path:
            base = datadir / path
            out += [p for p in base.parent.glob(base.name + "*") if p.is_file()]
    return out


@pytest.fixture
def own_pg_database(pg_database):
    """A database of its own: VACUUM removes a dead row version only when no transaction
    of the same database can still see it, and the session database has other clients."""
    from sqlalchemy.engine import make_url

    admin = create_engine(pg_database, isolation_level="AUTOCOMMIT")
    name = f"ledger_erase_{uuid.uuid4().hex[:10]}"
    with admin.connect() as c:
        c.execute(text(f'CREATE DATABASE "{name}"'))
    yield make_url(pg_database).set(database=name).render_as_string(hide_password=False)
    with admin.connect() as c:
        c.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    admin.dispose()


def test_postgresql_files_hold_no_erased_bytes_after_vacuum_full(own_pg_database, tmp_path):
    pg_url = own_pg_database
    marker = "ZQXERASEME" + uuid.uuid4().hex[:8].upper()
    eng = create_engine(pg_url, isolation_level="AUTOCOMMIT")
    try:
        with eng.connect() as c:
            datadir = Path(c.execute(text("SHOW data_directory")).scalar())
        if not os.access(datadir, os.R_OK | os.X_OK):
            pytest.skip(f"the PostgreSQL data directory {datadir} is not readable by this "
                        "process; docs/redaction.md documents what VACUUM, WAL and backups "
                        "keep")
        def holding() -> list[Path]:
            """CHECKPOINT (the pages reach the files), then the payload files holding
            the marker."""
            with eng.connect() as c:
                c.execute(text("CHECKPOINT"))
                files = _pg_files(c, "payloads", datadir)
            assert files, "no relation files found for the payloads table"
            return [f for f in files for n in needles if n in f.read_bytes()]

        with Ledger.init(pg_url, origin="test.example/erase") as lg:
            seqs = [lg.append(_marked(marker)).seq for _ in range(3)]
            needles = _needles(lg.engine, marker, seqs)
            with eng.connect() as c:
                c.execute(text("CHECKPOINT"))
                files = _pg_files(c, "payloads", datadir)
            for needle in needles:  # the search finds each before the erasure
                assert any(needle in f.read_bytes() for f in files), needle
            lg.redact(Ask("erasure test"), subject=f"subject-{marker}",
                      keyring=ledger_keyring(lg, tmp_path / "keys"))
        # VACUUM FULL copies a deleted row version that a snapshot still open anywhere it
        # counts may see (docs/redaction.md); under a loaded server such a snapshot ends
        # within seconds, so the rewrite is repeated until none is left, bounded in time.
        deadline, found = time.monotonic() + 60, []
        while True:
            with eng.connect() as c:
                c.execute(text("VACUUM FULL payloads"))
            found = holding()
            if not found or time.monotonic() > deadline:
                break
            time.sleep(1)
        assert not found, f"erased text found in {found}"
    finally:
        eng.dispose()
