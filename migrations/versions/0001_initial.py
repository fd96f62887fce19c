"""Initial schema: ledger_meta, head, entries, payloads, quarantine; append-only triggers.

Revision ID: 0001
Revises:
Create Date: 2026-11-29
"""

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

DIGEST = sa.String(71)

PG_REJECT_FUNCTION = """
CREATE OR REPLACE FUNCTION ledger_reject_change() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'ledger: % on table % is not allowed (append-only)', TG_OP, TG_TABLE_NAME
        USING ERRCODE = 'insufficient_privilege';
END
$$
"""


def upgrade() -> None:
    op.create_table(
        "ledger_meta",
        sa.Column("id", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("ledger_id", sa.String(64), nullable=False),
        sa.Column("origin", sa.String(255), nullable=False),
        sa.Column("format_version", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_ledger_meta")),
    )
    op.create_table(
        "head",
        sa.Column("id", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("size", sa.BigInteger(), nullable=False),
        sa.Column("head_hash", sa.LargeBinary(), nullable=False),
        sa.Column("last_recorded_at", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_head")),
    )
    op.create_table(
        "entries",
        sa.Column("seq", sa.BigInteger(), autoincrement=False, nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("recorded_at", sa.BigInteger(), nullable=False),
        sa.Column("engine", sa.String(64)),
        sa.Column("status", sa.String(16)),
        sa.Column("constraint_id", sa.String(256)),
        sa.Column("proof_ref", DIGEST),
        sa.Column("subject", sa.String(256)),
        sa.Column("producer", sa.String(256)),
        sa.Column("idempotency_key", sa.String(256)),
        sa.Column("admission", sa.String(8)),
        sa.Column("att_verdict", sa.String(16)),
        sa.Column("att_kid", sa.String(512)),
        sa.Column("att_iss", sa.String(512)),
        sa.Column("doc_digest", DIGEST),
        sa.Column("preimage_digest", DIGEST),
        sa.Column("attestation_digest", DIGEST),
        sa.Column("query_digest", DIGEST),
        sa.Column("meta_digest", DIGEST),
        sa.Column("envelope", sa.LargeBinary(), nullable=False),
        sa.Column("body_hash", sa.LargeBinary(), nullable=False),
        sa.Column("prev_hash", sa.LargeBinary(), nullable=False),
        sa.Column("entry_hash", sa.LargeBinary(), nullable=False),
        sa.PrimaryKeyConstraint("seq", name=op.f("pk_entries")),
    )
    op.create_index("ix_entries_idempotency_key", "entries", ["idempotency_key"], unique=True)
    op.create_index("ix_entries_recorded_at", "entries", ["recorded_at"])
    op.create_table(
        "payloads",
        sa.Column("digest", DIGEST, nullable=False),
        sa.Column("data", sa.LargeBinary(), nullable=False),
        sa.PrimaryKeyConstraint("digest", name=op.f("pk_payloads")),
    )
    op.create_table(
        "quarantine",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
                  autoincrement=True, nullable=False),
        sa.Column("received_at", sa.BigInteger(), nullable=False),
        sa.Column("code", sa.String(64), nullable=False),
        sa.Column("field", sa.String(256)),
        sa.Column("message", sa.Text(), nullable=False),
        sa.Column("producer", sa.String(256)),
        sa.Column("raw", sa.LargeBinary(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_quarantine")),
    )
    _create_triggers()


def _create_triggers() -> None:
    bind = op.get_bind()
    if bind.dialect.name == "postgresql":
        op.execute(PG_REJECT_FUNCTION)
        for table in ("entries", "payloads", "quarantine", "ledger_meta"):
            ops = "UPDATE OR DELETE" if table != "payloads" else "UPDATE"
            op.execute(f"CREATE TRIGGER {table}_append_only BEFORE {ops} ON {table} "
                       "FOR EACH ROW EXECUTE FUNCTION ledger_reject_change()")
            op.execute(f"CREATE TRIGGER {table}_no_truncate BEFORE TRUNCATE ON {table} "
                       "FOR EACH STATEMENT EXECUTE FUNCTION ledger_reject_change()")
    else:
        for table in ("entries", "payloads", "quarantine", "ledger_meta"):
            ops = ("UPDATE", "DELETE") if table != "payloads" else ("UPDATE",)
            for what in ops:
                op.execute(
                    f"CREATE TRIGGER {table}_no_{what.lower()} BEFORE {what} ON {table} "
                    f"BEGIN SELECT RAISE(ABORT, 'ledger: {what} on table {table} is not "
                    "allowed (append-only)'); END"
                )


def downgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name == "postgresql":
        for table in ("entries", "payloads", "quarantine", "ledger_meta"):
            op.execute(f"DROP TRIGGER IF EXISTS {table}_append_only ON {table}")
            op.execute(f"DROP TRIGGER IF EXISTS {table}_no_truncate ON {table}")
        op.execute("DROP FUNCTION IF EXISTS ledger_reject_change()")
    for table in ("quarantine", "payloads", "entries", "head", "ledger_meta"):
        op.drop_table(table)
