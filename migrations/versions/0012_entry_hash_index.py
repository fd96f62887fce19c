"""An index on ``entries.entry_hash``: the jump to an entry hash
(``GET /v1/entries/by-hash/{entry_hash}``, the console's "jump to") was a scan of the
table; with the index it reads one index leaf (docs/performance.md, "Entry-hash lookup").

Not unique: the stored hash is what the audit checks, and a tampered table may hold a
duplicate that the audit must be able to read and report.

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-07
"""

from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_entries_entry_hash", "entries", ["entry_hash"])


def downgrade() -> None:
    op.drop_index("ix_entries_entry_hash", table_name="entries")
