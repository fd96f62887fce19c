"""Idempotency keys scoped per producer.

The unique index on ``idempotency_key`` is replaced by a unique index on
``(producer, idempotency_key)`` and a partial unique index on ``idempotency_key`` over the
entries without a producer: together they make ``(COALESCE(producer, ''),
idempotency_key)`` unique on both engines (NULLs are distinct in a unique index, so the
first index alone would not cover entries without a producer).  The same key sent by two
producers names two entries.  Existing ledgers satisfy the new indexes (every key was
unique on its own); a downgrade fails once two producers have used one key.

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-01
"""

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

NO_PRODUCER = sa.text("producer IS NULL")


def upgrade() -> None:
    op.create_index("ix_entries_producer_idempotency_key", "entries",
                    ["producer", "idempotency_key"], unique=True)
    op.create_index("ix_entries_idempotency_key_no_producer", "entries", ["idempotency_key"],
                    unique=True, sqlite_where=NO_PRODUCER, postgresql_where=NO_PRODUCER)
    op.drop_index("ix_entries_idempotency_key", table_name="entries")


def downgrade() -> None:
    op.create_index("ix_entries_idempotency_key", "entries", ["idempotency_key"], unique=True)
    op.drop_index("ix_entries_idempotency_key_no_producer", table_name="entries")
    op.drop_index("ix_entries_producer_idempotency_key", table_name="entries")
