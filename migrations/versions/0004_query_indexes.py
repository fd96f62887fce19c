"""Indexes for queries: composite with seq so that keyset pages (ORDER BY seq) need no sort.

    (engine, status, seq)   engine, engine+status, +time window (turned into a seq window)
    (subject, seq)          a producer's correlation id
    (proof_ref, seq)        who recorded this proof
    (constraint_id, seq)    rule ids
    (att_kid, seq)          rows attested by one key

Measured cost and plans: docs/performance.md ("Queries and exports").

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-30
"""

from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

INDEXES = [
    ("ix_entries_engine_status_seq", ["engine", "status", "seq"]),
    ("ix_entries_subject_seq", ["subject", "seq"]),
    ("ix_entries_proof_ref_seq", ["proof_ref", "seq"]),
    ("ix_entries_constraint_id_seq", ["constraint_id", "seq"]),
    ("ix_entries_att_kid_seq", ["att_kid", "seq"]),
]


def upgrade() -> None:
    for name, columns in INDEXES:
        op.create_index(name, "entries", columns)


def downgrade() -> None:
    for name, _ in reversed(INDEXES):
        op.drop_index(name, table_name="entries")
