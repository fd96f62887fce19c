"""Merkle tree nodes, tree state and signed checkpoints; insert-only triggers.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-29
"""

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

# Tables that only ever get INSERTs (ledger_reject_change() comes from 0001 on PostgreSQL).
INSERT_ONLY = ("merkle_nodes", "checkpoints")


def upgrade() -> None:
    op.create_table(
        "merkle_nodes",
        sa.Column("level", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("idx", sa.BigInteger(), autoincrement=False, nullable=False),
        sa.Column("hash", sa.LargeBinary(), nullable=False),
        sa.PrimaryKeyConstraint("level", "idx", name=op.f("pk_merkle_nodes")),
        sqlite_with_rowid=False,
    )
    tree_state = op.create_table(
        "tree_state",
        sa.Column("id", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("size", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_tree_state")),
    )
    op.bulk_insert(tree_state, [{"id": 1, "size": 0}])
    op.create_table(
        "checkpoints",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
                  autoincrement=True, nullable=False),
        sa.Column("size", sa.BigInteger(), nullable=False),
        sa.Column("root_hash", sa.LargeBinary(), nullable=False),
        sa.Column("note", sa.Text(), nullable=False),
        sa.Column("created_at", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_checkpoints")),
    )
    op.create_index("ix_checkpoints_size", "checkpoints", ["size"], unique=True)
    _create_triggers()


def _create_triggers() -> None:
    bind = op.get_bind()
    if bind.dialect.name == "postgresql":
        for table in INSERT_ONLY:
            op.execute(f"CREATE TRIGGER {table}_append_only BEFORE UPDATE OR DELETE ON {table} "
                       "FOR EACH ROW EXECUTE FUNCTION ledger_reject_change()")
            op.execute(f"CREATE TRIGGER {table}_no_truncate BEFORE TRUNCATE ON {table} "
                       "FOR EACH STATEMENT EXECUTE FUNCTION ledger_reject_change()")
        op.execute("CREATE TRIGGER tree_state_no_delete BEFORE DELETE ON tree_state "
                   "FOR EACH ROW EXECUTE FUNCTION ledger_reject_change()")
    else:
        for table in INSERT_ONLY:
            for what in ("UPDATE", "DELETE"):
                op.execute(
                    f"CREATE TRIGGER {table}_no_{what.lower()} BEFORE {what} ON {table} "
                    f"BEGIN SELECT RAISE(ABORT, 'ledger: {what} on table {table} is not "
                    "allowed (append-only)'); END"
                )
        op.execute("CREATE TRIGGER tree_state_no_delete BEFORE DELETE ON tree_state "
                   "BEGIN SELECT RAISE(ABORT, 'ledger: DELETE on table tree_state is not "
                   "allowed'); END")


def downgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name == "postgresql":
        for table in INSERT_ONLY:
            op.execute(f"DROP TRIGGER IF EXISTS {table}_append_only ON {table}")
            op.execute(f"DROP TRIGGER IF EXISTS {table}_no_truncate ON {table}")
        op.execute("DROP TRIGGER IF EXISTS tree_state_no_delete ON tree_state")
    op.drop_index("ix_checkpoints_size", table_name="checkpoints")
    for table in ("checkpoints", "tree_state", "merkle_nodes"):
        op.drop_table(table)
