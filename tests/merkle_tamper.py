"""What an attacker with write access to the database can do (tests only).

Each helper switches off the append-only triggers of the tables it touches
(SQLite: drop and re-create them; PostgreSQL: ``DISABLE TRIGGER USER``), edits
rows with raw SQL, and leaves a chain that recomputes cleanly.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy import Connection, text

from ledger.core.canonical import canonical_json
from ledger.core.entry import link
from tests.tamper import connect

connection = connect  # one transaction on a fresh engine, committed on exit


@contextmanager
def unguarded(conn: Connection, *tables: str) -> Iterator[None]:
    """Disable the append-only triggers of ``tables`` for the duration."""
    if conn.dialect.name == "postgresql":
        for t in tables:
            conn.execute(text(f"ALTER TABLE {t} DISABLE TRIGGER USER"))
        yield
        for t in tables:
            conn.execute(text(f"ALTER TABLE {t} ENABLE TRIGGER USER"))
        return
    saved: list[Any] = []
    for t in tables:
        rows = conn.execute(text("SELECT name, sql FROM sqlite_master WHERE type = 'trigger' "
                                 "AND tbl_name = :t"), {"t": t}).all()
        for name, sql in rows:
            conn.execute(text(f"DROP TRIGGER {name}"))
            saved.append(sql)
    yield
    for sql in saved:
        conn.execute(text(sql))


def rewrite_tail(url: str, start: int, marker: str = "rewritten") -> None:
    """Rewrite entries ``start..`` (their subject) with a fully recomputed valid chain."""
    with connection(url) as conn, unguarded(conn, "entries"):
        rows = conn.execute(text("SELECT seq, recorded_at, envelope, prev_hash FROM entries "
                                 "WHERE seq >= :s ORDER BY seq"), {"s": start}).all()
        prev = bytes(rows[0].prev_hash)
        for r in rows:
            doc = json.loads(bytes(r.envelope))
            doc["subject"] = f"{marker}-{r.seq}"
            e = link(prev, r.seq, r.recorded_at, canonical_json(doc))
            conn.execute(text("UPDATE entries SET subject = :subj, envelope = :env, "
                              "body_hash = :b, prev_hash = :p, entry_hash = :e WHERE seq = :s"),
                         {"subj": doc["subject"], "env": e.envelope, "b": e.body_hash,
                          "p": prev, "e": e.entry_hash, "s": r.seq})
            prev = e.entry_hash
        conn.execute(text("UPDATE head SET head_hash = :h WHERE id = 1"), {"h": prev})
        conn.execute(text("UPDATE tenant_heads SET head_hash = :h WHERE tenant = 'default'"),
                     {"h": prev})


def truncate(url: str, size: int) -> None:
    """Delete every entry with seq >= size (and its payload rows) and move the head back
    (size > 0)."""
    with connection(url) as conn, unguarded(conn, "entries", "payloads"):
        conn.execute(text("DELETE FROM entries WHERE seq >= :s"), {"s": size})
        conn.execute(text("DELETE FROM payloads WHERE pid >= :p"), {"p": size * 8})
        eh, t = conn.execute(text("SELECT entry_hash, recorded_at FROM entries WHERE seq = :s"),
                             {"s": size - 1}).one()
        conn.execute(text("UPDATE head SET size = :n, head_hash = :h, last_recorded_at = :t "
                          "WHERE id = 1"), {"n": size, "h": bytes(eh), "t": t})
        conn.execute(text("UPDATE tenant_heads SET size = :n, head_hash = :h "
                          "WHERE tenant = 'default'"), {"n": size, "h": bytes(eh)})


def wipe_tree(url: str) -> None:
    """Delete the stored Merkle tree so that the next sync rebuilds it from the entries."""
    with connection(url) as conn, unguarded(conn, "merkle_nodes"):
        conn.execute(text("DELETE FROM merkle_nodes"))
        conn.execute(text("UPDATE tree_state SET size = 0 WHERE id = 1"))


def count(url: str, table: str) -> int:
    with connection(url) as conn:
        return int(conn.execute(text(f"SELECT count(*) FROM {table}")).scalar_one())

