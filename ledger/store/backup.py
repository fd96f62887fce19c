"""Backups of the database: SQLite's online backup API, and restoring a PostgreSQL
custom-format dump (``pg_dump -Fc``) into a scratch database with ``pg_restore``.

The SQLite copy is taken in one ``backup`` step (``pages=-1``): it reads a single
snapshot under a read transaction, so appends committed while it runs (WAL mode: readers
never block the writer) are either wholly in the copy or not in it.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
from pathlib import Path

from sqlalchemy import Engine
from sqlalchemy.engine import make_url

from ledger.errors import StoreUnavailable, UsageError
from ledger.store.db import is_pg

PG_DUMP_MAGIC = b"PGDMP"
SQLITE_MAGIC = b"SQLite format 3\x00"


def sqlite_file(engine: Engine) -> str:
    """The path of the SQLite database of ``engine``.  Raises UsageError for PostgreSQL."""
    if is_pg(engine):
        raise UsageError("ledger backup copies SQLite databases; back up PostgreSQL with "
                         "pg_dump (docs/operations.md#backup-and-restore)",
                         code="use_pg_dump", field="db")
    path = engine.url.database
    if not path or path == ":memory:":
        raise UsageError("an in-memory database cannot be backed up", field="db")
    return path


def sqlite_backup(engine: Engine, out: str | os.PathLike[str]) -> int:
    """Copy the database of ``engine`` to ``out`` (written to a temporary name, then
    renamed; never over an existing file).  Returns the copy's size in bytes."""
    src_path = sqlite_file(engine)
    out = Path(out)
    if out.exists():
        raise UsageError(f"{out} exists; give a new file", code="file_exists", field="out")
    tmp = out.with_name(out.name + ".partial")
    try:
        src = sqlite3.connect(f"file:{src_path}?mode=ro", uri=True, timeout=60)
    except sqlite3.Error as exc:
        raise StoreUnavailable(f"cannot open {src_path}: {exc}") from exc
    try:
        dst = sqlite3.connect(tmp)
        try:
            src.backup(dst, pages=-1)
            dst.execute("PRAGMA journal_mode=DELETE")  # one self-contained file
        finally:
            dst.close()
    except sqlite3.Error as exc:
        tmp.unlink(missing_ok=True)
        raise StoreUnavailable(f"backup of {src_path} failed: {exc}") from exc
    finally:
        src.close()
    with open(tmp, "rb") as fh:
        os.fsync(fh.fileno())
    os.replace(tmp, out)
    return out.stat().st_size


def backup_kind(path: str | os.PathLike[str]) -> str:
    """``sqlite`` or ``pg_dump`` by the file's magic bytes.  Raises UsageError."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(16)
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror}", field="file") from exc
    if head.startswith(SQLITE_MAGIC):
        return "sqlite"
    if head.startswith(PG_DUMP_MAGIC):
        return "pg_dump"
    raise UsageError(f"{path} is neither a SQLite database nor a pg_dump -Fc archive",
                     code="bad_backup", field="file")


def copy_sqlite(path: str | os.PathLike[str], scratch_dir: str | os.PathLike[str]) -> str:
    """Copy a SQLite backup into ``scratch_dir``; the scratch database's URL."""
    dest = Path(scratch_dir) / "restored.db"
    shutil.copyfile(path, dest)
    return f"sqlite:///{dest}"


def pg_restore(path: str | os.PathLike[str], scratch_url: str) -> None:
    """``pg_restore --no-owner --no-privileges`` the dump into the (empty) database of
    ``scratch_url``.  Raises UsageError (no pg_restore, not a PostgreSQL URL) or
    StoreUnavailable (pg_restore failed)."""
    url = make_url(scratch_url)
    if not url.drivername.startswith("postgres"):
        raise UsageError("--scratch-db must be a postgresql:// URL of an empty database",
                         field="scratch_db")
    exe = shutil.which("pg_restore")
    if exe is None:
        raise UsageError("pg_restore is not installed (PostgreSQL client tools)",
                         code="no_pg_restore", field="file")
    libpq = url.set(drivername="postgresql").render_as_string(hide_password=False)
    proc = subprocess.run([exe, "--no-owner", "--no-privileges", "--exit-on-error",
                           "-d", libpq, str(path)], capture_output=True, text=True,
                          check=False)
    if proc.returncode != 0:
        raise StoreUnavailable(f"pg_restore failed: {proc.stderr.strip()[-500:]}")


def downgrade(engine: Engine, revision: str) -> None:
    """Migrate the schema down to ``revision`` (a rollback).  Raises UsageError when a
    migration refuses to go back (data it cannot represent) or the revision is unknown."""
    from alembic import command
    from alembic.util import CommandError

    from ledger.store.db import alembic_config, translate_errors, write_connection

    try:
        with translate_errors("migration"), write_connection(engine) as conn:
            command.downgrade(alembic_config(conn), revision)
            conn.commit()
    except RuntimeError as exc:  # a migration's own refusal (its downgrade raises)
        raise UsageError(f"cannot go back to revision {revision}: {exc}",
                         code="irreversible_migration", field="revision") from None
    except CommandError as exc:
        raise UsageError(f"cannot go back to revision {revision}: {exc}",
                         code="bad_revision", field="revision") from None
