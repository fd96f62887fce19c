"""Recorded, resumable re-verification runs (docs/reverify.md#recorded-resumable-runs).

* ``audit_runs.job`` (text, default ``'audit'``): which job a run row belongs to,
  ``'audit'`` or ``'reverify'``.  Every existing row is an audit run; every reader of
  audit runs (``ledger audit --resume``, the findings attached to entries, the runs
  listing, the last-audit monitor and metrics) selects ``job = 'audit'``.
* ``reverify_outcomes(run_id, seq, outcome)``: the outcomes a re-verification run has
  decided so far, committed page by page with the run row's checkpoint (``next_seq``).

Operational state, not part of the ledger: no entry, hash or checkpoint changes.

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-04
"""

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("audit_runs", sa.Column("job", sa.String(16), nullable=False,
                                          server_default="audit"))
    op.create_table(
        "reverify_outcomes",
        sa.Column("run_id", sa.BigInteger(), nullable=False),
        sa.Column("seq", sa.BigInteger(), nullable=False),
        sa.Column("outcome", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("run_id", "seq", name=op.f("pk_reverify_outcomes")),
    )
    op.create_index("ix_audit_runs_job_id", "audit_runs", ["job", "id"])


def downgrade() -> None:
    op.drop_index("ix_audit_runs_job_id", table_name="audit_runs")
    op.drop_table("reverify_outcomes")
    if op.get_bind().dialect.name == "postgresql":
        op.drop_column("audit_runs", "job")
    else:  # SQLite >= 3.35 drops a column in place (the index naming it is gone)
        op.execute("ALTER TABLE audit_runs DROP COLUMN job")
