"""A bounded, prunable quarantine.

- ``quarantine_stats``: per producer ('' = none), the rejects not kept because a bound was
  reached (``dropped``) and the rows removed by ``ledger quarantine prune`` (``pruned``).
- ``quarantine_prune``: a gate row that exists only inside a prune transaction; the DELETE
  trigger of ``quarantine`` lets rows go only while it exists (UPDATE and TRUNCATE stay
  refused, and so does a DELETE by any other path).
- indexes on ``quarantine.producer`` (the per-producer bound) and ``received_at`` (prune).

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-01
"""

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

REFUSED = "ledger: DELETE on table quarantine is not allowed (append-only; see ledger quarantine prune)"

PG_DELETE_FUNCTION = f"""
CREATE OR REPLACE FUNCTION ledger_quarantine_delete() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM quarantine_prune) THEN
        RETURN OLD;
    END IF;
    RAISE EXCEPTION '{REFUSED}' USING ERRCODE = 'insufficient_privilege';
END
$$
"""


def upgrade() -> None:
    op.create_table(
        "quarantine_stats",
        sa.Column("producer", sa.String(256), nullable=False),
        sa.Column("dropped", sa.BigInteger(), nullable=False),
        sa.Column("pruned", sa.BigInteger(), nullable=False),
        sa.Column("last_dropped_at", sa.BigInteger()),
        sa.PrimaryKeyConstraint("producer", name=op.f("pk_quarantine_stats")),
    )
    op.create_table(
        "quarantine_prune",
        sa.Column("id", sa.Integer(), autoincrement=False, nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_quarantine_prune")),
    )
    op.create_index("ix_quarantine_producer", "quarantine", ["producer"])
    op.create_index("ix_quarantine_received_at", "quarantine", ["received_at"])
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP TRIGGER quarantine_append_only ON quarantine")
        op.execute("CREATE TRIGGER quarantine_append_only BEFORE UPDATE ON quarantine "
                   "FOR EACH ROW EXECUTE FUNCTION ledger_reject_change()")
        op.execute(PG_DELETE_FUNCTION)
        op.execute("CREATE TRIGGER quarantine_prune_only BEFORE DELETE ON quarantine "
                   "FOR EACH ROW EXECUTE FUNCTION ledger_quarantine_delete()")
    else:
        op.execute("DROP TRIGGER quarantine_no_delete")
        op.execute("CREATE TRIGGER quarantine_no_delete BEFORE DELETE ON quarantine "
                   "WHEN NOT EXISTS (SELECT 1 FROM quarantine_prune) "
                   f"BEGIN SELECT RAISE(ABORT, '{REFUSED}'); END")


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP TRIGGER quarantine_prune_only ON quarantine")
        op.execute("DROP FUNCTION ledger_quarantine_delete()")
        op.execute("DROP TRIGGER quarantine_append_only ON quarantine")
        op.execute("CREATE TRIGGER quarantine_append_only BEFORE UPDATE OR DELETE ON quarantine "
                   "FOR EACH ROW EXECUTE FUNCTION ledger_reject_change()")
    else:
        op.execute("DROP TRIGGER quarantine_no_delete")
        op.execute("CREATE TRIGGER quarantine_no_delete BEFORE DELETE ON quarantine BEGIN "
                   "SELECT RAISE(ABORT, 'ledger: DELETE on table quarantine is not allowed "
                   "(append-only)'); END")
    op.drop_index("ix_quarantine_received_at", table_name="quarantine")
    op.drop_index("ix_quarantine_producer", table_name="quarantine")
    op.drop_table("quarantine_prune")
    op.drop_table("quarantine_stats")
