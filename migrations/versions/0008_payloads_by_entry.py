"""Format version 2 storage: payload bytes by entry, no digest columns, the erasure guard.

* ``payloads`` is re-keyed from the content digest (``sha256:<hex>`` text) to
  ``pid = seq * 8 + slot`` (slots: result 0, preimage 1, attestation 2, query 3, meta 4,
  subject 5; the single document of other kinds uses 0), with a ``salt`` column (NULL for
  v1 payloads).  A v1 payload shared by several entries is copied to each of them.
* The five digest columns of ``entries`` are dropped: the envelope holds the digests (the
  audit hashes the stored bytes against the envelope; nothing is re-canonicalized).
* ``redacted_payloads`` (insert-only) names the payload rows a redaction erased; a
  DELETE of a payload row without such a guard row is refused by a trigger, UPDATE and
  TRUNCATE stay refused.

Entry hashes, envelopes, the Merkle nodes and the checkpoints do not change.

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-01
"""

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None

DIGEST_SLOTS = [("doc_digest", 0), ("preimage_digest", 1), ("attestation_digest", 2),
                ("query_digest", 3), ("meta_digest", 4)]

PG_GUARD_FUNCTION = """
CREATE OR REPLACE FUNCTION ledger_guard_payload_delete() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM redacted_payloads
                   WHERE seq = OLD.pid / 8 AND slot = OLD.pid % 8) THEN
        RAISE EXCEPTION 'ledger: DELETE on table payloads is not allowed (no redaction)'
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    RETURN OLD;
END
$$
"""
SQLITE_GUARD = """
CREATE TRIGGER payloads_no_delete BEFORE DELETE ON payloads
WHEN NOT EXISTS (SELECT 1 FROM redacted_payloads
                 WHERE seq = OLD.pid / 8 AND slot = OLD.pid % 8)
BEGIN SELECT RAISE(ABORT, 'ledger: DELETE on table payloads is not allowed (no redaction)');
END
"""


def _pk() -> sa.BigInteger:
    return sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    pg = op.get_bind().dialect.name == "postgresql"
    op.rename_table("payloads", "payloads_v1")
    if pg:
        op.execute("ALTER TABLE payloads_v1 RENAME CONSTRAINT pk_payloads TO pk_payloads_v1")
    op.create_table(
        "payloads",
        sa.Column("pid", _pk(), autoincrement=False, nullable=False),
        sa.Column("salt", sa.LargeBinary()),
        sa.Column("data", sa.LargeBinary(), nullable=False),
        sa.PrimaryKeyConstraint("pid", name=op.f("pk_payloads")),
    )
    for column, slot in DIGEST_SLOTS:
        op.execute(f"INSERT INTO payloads (pid, salt, data) SELECT e.seq * 8 + {slot}, NULL, "
                   f"p.data FROM entries e JOIN payloads_v1 p ON p.digest = e.{column} "
                   "ORDER BY e.seq")
    op.drop_table("payloads_v1")
    op.create_index("ix_payloads_subject", "payloads", ["data"],
                    sqlite_where=sa.text("pid % 8 = 5"), postgresql_where=sa.text("pid % 8 = 5"))
    for column, _ in DIGEST_SLOTS:
        if pg:
            op.drop_column("entries", column)
        else:  # SQLite >= 3.35 drops a column in place (no index or trigger names it)
            op.execute(f"ALTER TABLE entries DROP COLUMN {column}")
    op.create_table(
        "redacted_payloads",
        sa.Column("seq", sa.BigInteger(), autoincrement=False, nullable=False),
        sa.Column("slot", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("redaction_seq", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("seq", "slot", name=op.f("pk_redacted_payloads")),
        sqlite_with_rowid=False,
    )
    _create_triggers(pg)


def _create_triggers(pg: bool) -> None:
    if pg:
        op.execute(PG_GUARD_FUNCTION)
        op.execute("CREATE TRIGGER payloads_append_only BEFORE UPDATE ON payloads "
                   "FOR EACH ROW EXECUTE FUNCTION ledger_reject_change()")
        op.execute("CREATE TRIGGER payloads_delete_guard BEFORE DELETE ON payloads "
                   "FOR EACH ROW EXECUTE FUNCTION ledger_guard_payload_delete()")
        for table in ("payloads", "redacted_payloads"):
            op.execute(f"CREATE TRIGGER {table}_no_truncate BEFORE TRUNCATE ON {table} "
                       "FOR EACH STATEMENT EXECUTE FUNCTION ledger_reject_change()")
        op.execute("CREATE TRIGGER redacted_payloads_append_only BEFORE UPDATE OR DELETE ON "
                   "redacted_payloads FOR EACH ROW EXECUTE FUNCTION ledger_reject_change()")
        return
    op.execute("CREATE TRIGGER payloads_no_update BEFORE UPDATE ON payloads BEGIN SELECT "
               "RAISE(ABORT, 'ledger: UPDATE on table payloads is not allowed "
               "(append-only)'); END")
    op.execute(SQLITE_GUARD)
    for what in ("UPDATE", "DELETE"):
        op.execute(f"CREATE TRIGGER redacted_payloads_no_{what.lower()} BEFORE {what} ON "
                   f"redacted_payloads BEGIN SELECT RAISE(ABORT, 'ledger: {what} on table "
                   "redacted_payloads is not allowed (append-only)'); END")


def downgrade() -> None:
    """Back to content-addressed v1 payloads; refused once v2 payloads (salted) exist."""
    bind = op.get_bind()
    pg = bind.dialect.name == "postgresql"
    if bind.execute(sa.text("SELECT 1 FROM payloads WHERE salt IS NOT NULL LIMIT 1")).first() \
            or bind.execute(sa.text("SELECT 1 FROM redacted_payloads LIMIT 1")).first():
        raise RuntimeError("the ledger holds format v2 entries or redactions: it cannot go "
                           "back below revision 0005")
    if pg:
        op.execute("DROP FUNCTION IF EXISTS ledger_guard_payload_delete() CASCADE")
        for t in ("payloads_append_only", "payloads_no_truncate"):
            op.execute(f"DROP TRIGGER IF EXISTS {t} ON payloads")
    else:
        for t in ("payloads_no_update", "payloads_no_delete", "redacted_payloads_no_update",
                  "redacted_payloads_no_delete"):
            op.execute(f"DROP TRIGGER IF EXISTS {t}")
    op.drop_table("redacted_payloads")
    op.drop_index("ix_payloads_subject", table_name="payloads")
    op.rename_table("payloads", "payloads_v2")
    if pg:
        op.execute("ALTER TABLE payloads_v2 RENAME CONSTRAINT pk_payloads TO pk_payloads_v2")
    for column, _ in DIGEST_SLOTS:
        op.add_column("entries", sa.Column(column, sa.String(71)))
    op.create_table(
        "payloads",
        sa.Column("digest", sa.String(71), nullable=False),
        sa.Column("data", sa.LargeBinary(), nullable=False),
        sa.PrimaryKeyConstraint("digest", name=op.f("pk_payloads")),
    )
    # the digest columns are the envelope's payload digests (an UPDATE is refused by the
    # entries triggers, so they are refilled with the triggers dropped for the statement)
    _refill_digests(pg)
    op.execute("DROP TABLE payloads_v2")
    if pg:
        op.execute("CREATE TRIGGER payloads_append_only BEFORE UPDATE ON payloads "
                   "FOR EACH ROW EXECUTE FUNCTION ledger_reject_change()")
        op.execute("CREATE TRIGGER payloads_no_truncate BEFORE TRUNCATE ON payloads "
                   "FOR EACH STATEMENT EXECUTE FUNCTION ledger_reject_change()")
    else:
        op.execute("CREATE TRIGGER payloads_no_update BEFORE UPDATE ON payloads BEGIN SELECT "
                   "RAISE(ABORT, 'ledger: UPDATE on table payloads is not allowed "
                   "(append-only)'); END")


_NAMES = {"result": ["result", "preimage", "attestation", "query", "meta"],
          "key_event": ["event"], "audit_run": ["report"], "redaction": ["request"]}


def _refill_digests(pg: bool) -> None:
    if pg:
        op.execute("ALTER TABLE entries DISABLE TRIGGER entries_append_only")
    else:
        op.execute("DROP TRIGGER IF EXISTS entries_no_update")
    for kind, names in _NAMES.items():
        for (column, slot), name in zip(DIGEST_SLOTS, names):
            get = (f"(convert_from(envelope, 'UTF8')::jsonb -> 'payloads' ->> '{name}')" if pg
                   else f"json_extract(CAST(envelope AS TEXT), '$.payloads.{name}')")
            op.execute(f"UPDATE entries SET {column} = {get} WHERE kind = '{kind}'")
            op.execute(f"INSERT INTO payloads (digest, data) SELECT e.{column}, p.data FROM "
                       f"entries e JOIN payloads_v2 p ON p.pid = e.seq * 8 + {slot} "
                       f"WHERE e.kind = '{kind}' AND e.{column} IS NOT NULL "
                       "ON CONFLICT (digest) DO NOTHING")
    if pg:
        op.execute("ALTER TABLE entries ENABLE TRIGGER entries_append_only")
    else:
        op.execute("CREATE TRIGGER entries_no_update BEFORE UPDATE ON entries BEGIN SELECT "
                   "RAISE(ABORT, 'ledger: UPDATE on table entries is not allowed "
                   "(append-only)'); END")
