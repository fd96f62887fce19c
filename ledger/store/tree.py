"""Driver-level reads and writes of Merkle nodes, the tree state and checkpoints.

Persists hashes already computed by ``ledger.core.merkle``; never hashes or
signs.  Works on a DBAPI cursor (``sqlite3`` or psycopg 3) so that a proof
costs one round trip: placeholders are ``?`` on SQLite and ``%s`` on
PostgreSQL.  Write methods must run inside a transaction that holds the
append lock (``ledger.store.append.append_transaction``).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Engine

from ledger.store.db import driver_cursor, is_pg, placeholder

NodeId = tuple[int, int]


@dataclass(frozen=True)
class CheckpointRow:
    id: int
    size: int
    root_hash: bytes
    note: str
    created_at: int


class TreeStore:
    """Statements on one DBAPI cursor; ``pg`` selects the placeholder style."""

    def __init__(self, cursor: Any, pg: bool) -> None:
        self.cur = cursor
        self.pg = pg
        self.ph = placeholder(pg)
        self._node_sql: dict[int, str] = {}

    # -- sizes ------------------------------------------------------------------
    def sizes(self) -> tuple[int, int]:
        """(ledger size from the head row, stored tree size) in one statement."""
        self.cur.execute("SELECT (SELECT size FROM head WHERE id = 1), "
                         "(SELECT size FROM tree_state WHERE id = 1)")
        head_size, tree_size = self.cur.fetchone()
        return int(head_size), int(tree_size)

    def tree_size(self) -> int:
        self.cur.execute("SELECT size FROM tree_state WHERE id = 1")
        return int(self.cur.fetchone()[0])

    def set_tree_size(self, size: int) -> None:
        self.cur.execute(f"UPDATE tree_state SET size = {self.ph} WHERE id = 1", (size,))

    # -- nodes ------------------------------------------------------------------
    def get_nodes(self, ids: Sequence[NodeId]) -> dict[NodeId, bytes]:
        """Stored hashes of ``ids`` (absent ids are simply missing from the result)."""
        if not ids:
            return {}
        sql = self._node_sql.get(len(ids))
        if sql is None:
            term = f"(level = {self.ph} AND idx = {self.ph})"
            sql = "SELECT level, idx, hash FROM merkle_nodes WHERE " + " OR ".join(
                [term] * len(ids))
            self._node_sql[len(ids)] = sql
        self.cur.execute(sql, [v for node in ids for v in node])
        return {(level, idx): bytes(h) for level, idx, h in self.cur.fetchall()}

    def node_run(self, level: int, start: int, end: int) -> list[tuple[int, bytes]]:
        """``(idx, hash)`` of the stored nodes at ``level`` with ``start <= idx < end``, in
        index order (one range scan of the primary key; a tile is one such run)."""
        ph = self.ph
        self.cur.execute(f"SELECT idx, hash FROM merkle_nodes WHERE level = {ph} AND "
                         f"idx >= {ph} AND idx < {ph} ORDER BY idx", (level, start, end))
        return [(int(i), bytes(h)) for i, h in self.cur.fetchall()]

    def insert_nodes(self, nodes: Sequence[tuple[NodeId, bytes]]) -> None:
        if nodes:
            self.cur.executemany(
                f"INSERT INTO merkle_nodes (level, idx, hash) VALUES "
                f"({self.ph}, {self.ph}, {self.ph})",
                [(level, idx, h) for (level, idx), h in nodes])

    def iter_entry_links(self, start: int, end: int, page: int
                         ) -> Iterator[list[tuple[int, bytes, bytes, str]]]:
        """Pages of ``(seq, prev_hash, entry_hash, tenant)`` for ``start <= seq < end``, in
        seq order."""
        pos = start
        sql = (f"SELECT seq, prev_hash, entry_hash, tenant FROM entries WHERE seq >= {self.ph} "
               f"AND seq < {self.ph} ORDER BY seq LIMIT {self.ph}")
        while pos < end:
            self.cur.execute(sql, (pos, end, page))
            rows = [(int(s), bytes(p), bytes(e), str(t)) for s, p, e, t in self.cur.fetchall()]
            if not rows:
                return
            yield rows
            pos = rows[-1][0] + 1

    def tenant_last_seq(self, tenant: str, before: int) -> int | None:
        """The seq of ``tenant``'s last entry below ``before``; None when it has none."""
        self.cur.execute(f"SELECT max(seq) FROM entries WHERE tenant = {self.ph} "
                         f"AND seq < {self.ph}", (tenant, before))
        got = self.cur.fetchone()
        return None if got is None or got[0] is None else int(got[0])

    def iter_entry_hashes(self, start: int, end: int | None, page: int
                          ) -> Iterator[list[tuple[int, bytes]]]:
        """Pages of ``(seq, entry_hash)`` for ``start <= seq < end`` (``None``: to the end)."""
        pos = start
        bound = "" if end is None else f" AND seq < {self.ph}"
        sql = (f"SELECT seq, entry_hash FROM entries WHERE seq >= {self.ph}{bound} "
               f"ORDER BY seq LIMIT {self.ph}")
        while end is None or pos < end:
            params = (pos, page) if end is None else (pos, end, page)
            self.cur.execute(sql, params)
            rows = [(int(s), bytes(e)) for s, e in self.cur.fetchall()]
            if not rows:
                return
            yield rows
            pos = rows[-1][0] + 1

    # -- checkpoints --------------------------------------------------------------
    _CP_COLUMNS = "id, size, root_hash, note, created_at"

    def latest_checkpoint(self) -> CheckpointRow | None:
        self.cur.execute(f"SELECT {self._CP_COLUMNS} FROM checkpoints "
                         "ORDER BY size DESC LIMIT 1")
        return _checkpoint(self.cur.fetchone())

    def checkpoint_at(self, size: int) -> CheckpointRow | None:
        self.cur.execute(f"SELECT {self._CP_COLUMNS} FROM checkpoints WHERE size = {self.ph}",
                         (size,))
        return _checkpoint(self.cur.fetchone())

    def insert_checkpoint(self, size: int, root_hash: bytes, note: str, created_at: int) -> None:
        ph = self.ph
        self.cur.execute("INSERT INTO checkpoints (size, root_hash, note, created_at) "
                         f"VALUES ({ph}, {ph}, {ph}, {ph})", (size, root_hash, note, created_at))


def _checkpoint(row: Any) -> CheckpointRow | None:
    if row is None:
        return None
    return CheckpointRow(int(row[0]), int(row[1]), bytes(row[2]), row[3], int(row[4]))


@contextmanager
def read_store(engine: Engine) -> Iterator[TreeStore]:
    """A TreeStore on a pooled driver connection for reads (rolled back on exit).

    Rows below the stored tree size never change, so statements need no common
    snapshot: every read is bounded by a size read earlier.
    """
    with driver_cursor(engine, "tree read") as (_raw, cur):
        yield TreeStore(cur, is_pg(engine))
