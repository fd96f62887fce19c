"""``ledger backup`` and ``ledger restore-check`` (docs/operations.md#backup-and-restore).

``restore_check`` restores a backup into a scratch database (a copy of a SQLite backup in a
temporary directory, or ``pg_restore`` of a ``pg_dump -Fc`` archive into an empty
PostgreSQL database the operator names), brings its schema to the packaged head, and runs
the full audit with the kept checkpoints: the report passes only if every row verifies
and the restored ledger is a consistent extension of every checkpoint given
(``ledger.ops.audit``: signature, size, root, consistency proof).
"""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ledger.errors import UsageError
from ledger.ops import audit as audit_ops
from ledger.ops.context import LedgerContext
from ledger.ops.lifecycle import open_ledger, schema_revision, upgrade_schema
from ledger.ops.read import head
from ledger.store import backup as store_backup

RESTORE_CHECK_FORMAT = "ledger-restore-check/1"


def backup(ctx: LedgerContext, out: str | Path) -> dict[str, Any]:
    """Write a consistent copy of the (SQLite) ledger to ``out``; what it holds."""
    nbytes = store_backup.sqlite_backup(ctx.engine, out)
    ctx_copy = open_ledger(f"sqlite:///{Path(out).resolve()}")
    try:
        h = head(ctx_copy)
    finally:
        ctx_copy.close()
    return {"file": str(out), "bytes": nbytes, "size": h["size"], "head_hash": h["head_hash"],
            "ledger_id": h["ledger_id"], "origin": h["origin"]}


def restore_check(path: str | Path, checkpoints: Sequence[str], keys: Sequence[str], *,
                  scratch_url: str | None = None) -> dict[str, Any]:
    """Restore ``path`` into a scratch database and audit it against ``checkpoints``."""
    if not checkpoints:
        raise UsageError("give at least one --checkpoint kept outside the database",
                         field="checkpoint")
    if not keys:
        raise UsageError("give the ledger's public key (--key) to verify the checkpoints",
                         field="key")
    kind = store_backup.backup_kind(path)
    with tempfile.TemporaryDirectory(prefix="ledger-restore-") as tmp:
        if kind == "sqlite":
            if scratch_url is not None:
                raise UsageError("--scratch-db is for pg_dump archives; a SQLite backup is "
                                 "restored into a temporary file", field="scratch_db")
            url = store_backup.copy_sqlite(path, tmp)
        else:
            if scratch_url is None:
                raise UsageError("a pg_dump archive needs --scratch-db URL (an empty "
                                 "PostgreSQL database to restore into)", field="scratch_db")
            store_backup.pg_restore(path, scratch_url)
            url = scratch_url
        before = schema_revision(url)
        after = upgrade_schema(url)
        ctx = open_ledger(url)
        try:
            report = audit_ops.run_audit(ctx, audit_ops.AuditOptions(
                checkpoints=tuple(checkpoints), keys=tuple(keys)))
            size = head(ctx)["size"]
        finally:
            ctx.close()
    return {"format": RESTORE_CHECK_FORMAT, "backup": str(path), "kind": kind,
            "size": size, "schema": {"restored": before, "now": after},
            "outcome": report.outcome, "summary": report.summary.to_json(),
            "findings": [f.to_json() for f in report.findings],
            "abstentions": [a.to_json() for a in report.abstentions],
            "checkpoints": list(checkpoints)}



def downgrade_schema(url: str, revision: str) -> str | None:
    """Roll the schema back to ``revision`` (docs/operations.md#upgrades-and-rollback);
    the revision now current."""
    from ledger.store.db import make_engine

    engine = make_engine(url)
    try:
        store_backup.downgrade(engine, revision)
    finally:
        engine.dispose()
    return schema_revision(url)
