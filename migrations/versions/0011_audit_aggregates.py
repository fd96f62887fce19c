"""Audit aggregates: counts by hour, kind, status, engine, producer and attestation verdict
of the rows an audit run walked, with the disposition the run gave them.

``audit_aggregates`` is operational state like ``audit_runs`` and ``audit_findings``
(docs/audit.md, "Aggregates"): the audit fills it as it checks every row, so that charts
over the whole ledger need not re-read it (``GET /v1/aggregates``, docs/http.md).  A
``flagged`` row (the run found something on it) is counted by hour only, never under the
values it shows.

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-04
"""

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "audit_aggregates",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
                  autoincrement=True, nullable=False),
        sa.Column("run_id", sa.BigInteger(), nullable=False),
        sa.Column("bucket_us", sa.BigInteger(), nullable=False),
        sa.Column("disposition", sa.String(16), nullable=False),
        sa.Column("kind", sa.String(16)),
        sa.Column("status", sa.String(16)),
        sa.Column("engine", sa.String(64)),
        sa.Column("producer", sa.String(256)),
        sa.Column("att_verdict", sa.String(16)),
        sa.Column("n", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_audit_aggregates")),
    )
    op.create_index("ix_audit_aggregates_run_id_bucket_us", "audit_aggregates",
                    ["run_id", "bucket_us"])


def downgrade() -> None:
    op.drop_index("ix_audit_aggregates_run_id_bucket_us", table_name="audit_aggregates")
    op.drop_table("audit_aggregates")
