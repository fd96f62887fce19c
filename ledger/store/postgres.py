"""The PostgreSQL one-statement append: the one place the store computes a hash.

One statement locks the head and the default tenant's head, links and inserts one
entry of the default tenant (and its payloads), and moves both heads.  The database
computes the link exactly as ``ledger.core.entry.entry_hash`` does::

    entry_hash = sha256(ENTRY_TAG || prev_hash || int8send(seq) || int8send(recorded_at)
                        || body_hash)

(``int8send`` is the 8-byte big-endian two's complement of a bigint, the
``>q`` packing of the core), with ``seq`` = head size, ``prev_hash`` = the default
tenant's head hash (ledger.core.tenant), ``tseq`` = its size, and ``recorded_at`` =
``max(now, head.last_recorded_at)``.  The caller passes the
Python computation as ``link``; the returned hash is compared with it *before*
COMMIT, and on a mismatch the transaction is rolled back: a wrong link is never
stored.  This saves one round trip per single append against the locked path
(``append_transaction``): BEGIN and the statement go in one pipelined round
trip, COMMIT in a second.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Engine

from ledger.errors import LedgerError
from ledger.store.db import driver_cursor
from ledger.store.entries import ENTRY_COLUMNS
from ledger.store.layout import pid_sql

MAX_BIGINT = 2**63 - 1
# Columns the caller provides; the statement fills seq, recorded_at, prev_hash, entry_hash.
LINKED_COLUMNS = [c for c in ENTRY_COLUMNS
                  if c not in ("seq", "recorded_at", "prev_hash", "entry_hash", "tenant", "tseq")]
# (prev_hash, seq, recorded_at) -> the entry_hash the core computes for this entry.
LinkFn = Callable[[bytes, int, int], bytes]

_APPEND_ONE = """
WITH h AS (SELECT size, head_hash, GREATEST(%s::bigint, last_recorded_at) AS ts
           FROM head WHERE id = 1 FOR UPDATE),
t AS (SELECT size AS tsize, head_hash AS thash FROM tenant_heads
      WHERE tenant = 'default' FOR UPDATE),
g AS (SELECT * FROM h, t WHERE h.ts < %s::bigint
      AND NOT EXISTS (SELECT 1 FROM entries WHERE kind = 'key_event' AND seq > %s::bigint)),
{payloads}
e AS (INSERT INTO entries (seq, recorded_at, prev_hash, entry_hash, tenant, tseq, {cols})
      SELECT g.size, g.ts, g.thash,
             sha256(%s::bytea || g.thash || int8send(g.size) || int8send(g.ts) || %s::bytea),
             'default', g.tsize, {values}
      FROM g RETURNING seq, recorded_at, prev_hash, entry_hash, tseq),
u AS (UPDATE head SET size = e.seq + 1, head_hash = e.entry_hash,
      last_recorded_at = e.recorded_at FROM e WHERE head.id = 1),
v AS (UPDATE tenant_heads SET size = e.tseq + 1, head_hash = e.entry_hash
      FROM e WHERE tenant_heads.tenant = 'default')
SELECT seq, recorded_at, prev_hash, entry_hash, tseq FROM e
"""
_PAYLOADS = ("p AS (INSERT INTO payloads (pid, salt, codec, data) SELECT "
             f"{pid_sql('g.size', 'v.s')}, "
             "v.salt, v.c, v.b FROM g, (VALUES {rows}) AS v(s, salt, c, b)),")


@dataclass(frozen=True)
class Linked:
    """Where the entry went: its seq, recorded time, predecessor and own hash."""

    seq: int
    recorded_at: int
    prev_hash: bytes
    entry_hash: bytes
    tseq: int = 0


def append_one(engine: Engine, row: dict[str, Any],
               items: list[tuple[int, bytes | None, int, bytes]], now_us: int,
               entry_tag: bytes, link: LinkFn, guard: tuple[int, int] | None = None,
               ) -> Linked | None:
    """Append one entry in one statement and commit it if ``link`` agrees.

    ``row`` holds every entries column but seq/recorded_at/prev_hash/entry_hash;
    ``items`` the payloads ``(slot, salt, codec, stored bytes)`` (their pid:
    ``ledger.store.layout``).
    ``guard`` = (recorded_at must stay
    below this µs, no key_event after this seq): when it does not hold nothing is
    written and None is returned.  Raises LedgerError ``link_mismatch`` (rolled back),
    StoreUnavailable, StoreDataError.
    """
    sql, params = _statement(row, items, now_us, entry_tag, guard)
    with driver_cursor(engine, "append") as (raw, cur):
        conn = raw.driver_connection
        with conn.pipeline():  # BEGIN + the statement in one round trip
            cur.execute(sql, params)
        got = cur.fetchone()
        if got is None:
            conn.rollback()
            return None
        linked = Linked(got[0], got[1], bytes(got[2]), bytes(got[3]), int(got[4]))
        want = link(linked.prev_hash, linked.seq, linked.recorded_at)
        if linked.entry_hash != want:
            conn.rollback()
            raise LedgerError(f"the database computed a different link for seq {linked.seq};"
                              " nothing was stored", code="link_mismatch",
                              detail={"seq": linked.seq})
        conn.commit()
    return linked


def _statement(row: dict[str, Any], items: list[tuple[int, bytes | None, int, bytes]],
               now_us: int,
               entry_tag: bytes,
               guard: tuple[int, int] | None) -> tuple[str, tuple[Any, ...]]:
    before, key_seq = guard if guard is not None else (MAX_BIGINT, MAX_BIGINT)
    params: list[Any] = [now_us, before, key_seq]
    payload_sql = ""
    if items:
        payload_sql = _PAYLOADS.format(
            rows=", ".join(["(%s::bigint, %s::bytea, %s::smallint, %s::bytea)"] * len(items)))
        for slot, salt, how, kept in items:
            params += [slot, salt, how, kept]
    sql = _APPEND_ONE.format(payloads=payload_sql, cols=", ".join(LINKED_COLUMNS),
                             values=", ".join(["%s"] * len(LINKED_COLUMNS)))
    params += [entry_tag, row["body_hash"]]
    params += [row.get(c) for c in LINKED_COLUMNS]
    return sql, tuple(params)
