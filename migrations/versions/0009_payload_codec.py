"""Payload codecs: v2 result payloads stored DEFLATE-compressed with a preset dictionary.

* ``payloads.codec`` (small integer, default 0): 0 = the bytes as they are, 1 = a raw
  DEFLATE stream with the preset dictionary ``ledger/store/payload_dict_1.bin``
  (``ledger.store.codec``; docs/storage.md#payload-codecs).
* The stored v2 result payloads (a salt, not the subject slot 5) are rewritten as codec 1
  where that is shorter, in pid order, in chunks; with the UPDATE trigger of ``payloads``
  lifted for this migration only.  Every reader decodes before hashing: entry hashes,
  envelopes, commitments, Merkle nodes and checkpoints do not change.  The freed space is
  reused by later appends (SQLite: ``VACUUM`` returns it to the file system; PostgreSQL:
  ``VACUUM FULL``).

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-01
"""

import sqlalchemy as sa
from alembic import op

from ledger.store import codec

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None

CHUNK = 5000
SQLITE_NO_UPDATE = ("CREATE TRIGGER payloads_no_update BEFORE UPDATE ON payloads BEGIN SELECT "
                    "RAISE(ABORT, 'ledger: UPDATE on table payloads is not allowed "
                    "(append-only)'); END")


def upgrade() -> None:
    op.add_column("payloads", sa.Column("codec", sa.SmallInteger(), nullable=False,
                                        server_default="0"))
    _rewrite(compress=True)


def downgrade() -> None:
    _rewrite(compress=False)
    pg = op.get_bind().dialect.name == "postgresql"
    if pg:
        op.drop_column("payloads", "codec")
    else:  # SQLite >= 3.35 drops a column in place (no index or trigger names it)
        op.execute("ALTER TABLE payloads DROP COLUMN codec")


def _rewrite(compress: bool) -> None:
    """Compress (upgrade) or restore (downgrade) the payload rows, chunk by chunk."""
    bind = op.get_bind()
    pg = bind.dialect.name == "postgresql"
    if pg:
        op.execute("ALTER TABLE payloads DISABLE TRIGGER payloads_append_only")
    else:
        op.execute("DROP TRIGGER IF EXISTS payloads_no_update")
    where = ("salt IS NOT NULL AND codec = 0 AND pid % 8 <> 5" if compress
             else f"codec = {codec.DEFLATE_D1}")
    select = sa.text(f"SELECT pid, salt, data FROM payloads WHERE {where} AND pid > :after "
                     "ORDER BY pid LIMIT :n")
    update = sa.text("UPDATE payloads SET codec = :c, data = :d WHERE pid = :p")
    after = -1
    while True:
        rows = bind.execute(select, {"after": after, "n": CHUNK}).all()
        if not rows:
            break
        changes = []
        for pid, salt, data in rows:
            if compress:
                c, stored = codec.encode(pid, bytes(salt), bytes(data))
            else:
                c, stored = codec.RAW, codec.decode(codec.DEFLATE_D1, bytes(data))
            if c != codec.RAW or not compress:
                changes.append({"c": c, "d": stored, "p": pid})
        if changes:
            bind.execute(update, changes)
        after = rows[-1][0]
    if pg:
        op.execute("ALTER TABLE payloads ENABLE TRIGGER payloads_append_only")
    else:
        op.execute(SQLITE_NO_UPDATE)
