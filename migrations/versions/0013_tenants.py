"""Tenants: every entry belongs to one tenant and has a place in that tenant's chain
(docs/tenants.md).

``entries.tenant`` (NOT NULL, default ``'default'``) and ``entries.tseq`` (the position in
the tenant's chain).  Existing entries become tenant ``default`` and keep ``tseq`` NULL,
which every reader takes as ``tseq = seq``: they were the one chain, and it is the default
tenant's chain now.  No stored byte and no hash changes, and no row is rewritten (adding a
column with a constant default rewrites nothing on either engine).  The index
``(tenant, seq)`` serves a tenant's chain in order, its head below a tree size, and the
tenant filter of reads.

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-07
"""

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("entries", sa.Column("tenant", sa.String(64), nullable=False,
                                       server_default="default"))
    op.add_column("entries", sa.Column("tseq", sa.BigInteger(), nullable=True))
    op.create_index("ix_entries_tenant_seq", "entries", ["tenant", "seq"])
    op.create_table(
        "tenant_heads",
        sa.Column("tenant", sa.String(64), nullable=False),
        sa.Column("size", sa.BigInteger(), nullable=False),
        sa.Column("head_hash", sa.LargeBinary(), nullable=False),
        sa.PrimaryKeyConstraint("tenant", name=op.f("pk_tenant_heads")),
    )
    # every entry so far is the default tenant's: its head is the ledger's head
    op.execute("INSERT INTO tenant_heads (tenant, size, head_hash) "
               "SELECT 'default', size, head_hash FROM head WHERE id = 1")


def downgrade() -> None:
    bind = op.get_bind()
    n = bind.execute(sa.text("SELECT count(*) FROM entries WHERE tenant <> 'default'")).scalar()
    if n:
        raise RuntimeError(f"{n} entries belong to tenants other than 'default': "
                           "a ledger with tenants cannot go below revision 0013")
    op.drop_table("tenant_heads")
    op.drop_index("ix_entries_tenant_seq", table_name="entries")
    with op.batch_alter_table("entries") as batch:
        batch.drop_column("tseq")
        batch.drop_column("tenant")
