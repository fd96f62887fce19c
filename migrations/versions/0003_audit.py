"""Audit runs (resumable progress), and indexes for key events and auditors' queries.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-29
"""

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "audit_runs",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
                  autoincrement=True, nullable=False),
        sa.Column("started_at", sa.BigInteger(), nullable=False),
        sa.Column("updated_at", sa.BigInteger(), nullable=False),
        sa.Column("range_start", sa.BigInteger(), nullable=False),
        sa.Column("range_end", sa.BigInteger(), nullable=False),
        sa.Column("next_seq", sa.BigInteger(), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("options", sa.Text(), nullable=False),
        sa.Column("counts", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_audit_runs")),
    )
    op.create_table(
        "audit_findings",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
                  autoincrement=True, nullable=False),
        sa.Column("run_id", sa.BigInteger(), nullable=False),
        sa.Column("seq", sa.BigInteger(), nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("body", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_audit_findings")),
    )
    op.create_index("ix_audit_findings_run_id_seq", "audit_findings", ["run_id", "seq"])
    op.create_index("ix_entries_kind_seq", "entries", ["kind", "seq"])


def downgrade() -> None:
    op.drop_index("ix_entries_kind_seq", table_name="entries")
    op.drop_index("ix_audit_findings_run_id_seq", table_name="audit_findings")
    op.drop_table("audit_findings")
    op.drop_table("audit_runs")
