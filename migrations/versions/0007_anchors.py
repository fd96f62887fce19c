"""Witness cosignatures and RFC 3161 timestamp tokens of checkpoints (insert-only).

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-01
"""

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None

TABLE = "checkpoint_anchors"


def upgrade() -> None:
    op.create_table(
        TABLE,
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
                  autoincrement=True, nullable=False),
        sa.Column("checkpoint_size", sa.BigInteger(), nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("name", sa.String(512), nullable=False),
        sa.Column("data", sa.Text(), nullable=False),
        sa.Column("nonce", sa.String(64), nullable=True),
        sa.Column("created_at", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_checkpoint_anchors")),
    )
    op.create_index("ix_checkpoint_anchors_checkpoint_size_kind", TABLE,
                    ["checkpoint_size", "kind"])
    op.create_index("ix_checkpoint_anchors_name_checkpoint_size", TABLE,
                    ["name", "checkpoint_size"])
    if op.get_bind().dialect.name == "postgresql":
        op.execute(f"CREATE TRIGGER {TABLE}_append_only BEFORE UPDATE OR DELETE ON {TABLE} "
                   "FOR EACH ROW EXECUTE FUNCTION ledger_reject_change()")
        op.execute(f"CREATE TRIGGER {TABLE}_no_truncate BEFORE TRUNCATE ON {TABLE} "
                   "FOR EACH STATEMENT EXECUTE FUNCTION ledger_reject_change()")
    else:
        for what in ("UPDATE", "DELETE"):
            op.execute(f"CREATE TRIGGER {TABLE}_no_{what.lower()} BEFORE {what} ON {TABLE} "
                       f"BEGIN SELECT RAISE(ABORT, 'ledger: {what} on table {TABLE} is not "
                       "allowed (append-only)'); END")


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(f"DROP TRIGGER IF EXISTS {TABLE}_append_only ON {TABLE}")
        op.execute(f"DROP TRIGGER IF EXISTS {TABLE}_no_truncate ON {TABLE}")
    op.drop_index("ix_checkpoint_anchors_name_checkpoint_size", table_name=TABLE)
    op.drop_index("ix_checkpoint_anchors_checkpoint_size_kind", table_name=TABLE)
    op.drop_table(TABLE)
