"""The PostgreSQL one-statement append: the one place the store computes a hash.

One statement locks the head and the entry's tenant's head, links and inserts one entry
(and its payloads), and moves both heads.  The database computes the link exactly as
``ledger.core.tenant.tenant_entry_hash`` does, from the parts the core gives
(``ledger.core.tenant.link_parts``)::

    entry_hash = sha256(tag || prev_hash || int8send(seq) || [int8send(tseq) ||]
                        int8send(recorded_at) || tail)

(``int8send`` is the 8-byte big-endian two's complement of a bigint, the ``>q``
packing of the core; ``tseq`` only in a link that binds it: every tenant but the
default one), with ``seq`` = head size, ``prev_hash`` = the tenant's head hash (or its
genesis when the tenant has no entry yet), ``tseq`` = the tenant's size, and
``recorded_at`` = ``max(now, head.last_recorded_at)``.  The caller passes the
Python computation as ``link``; the returned hash is compared with it *before*
COMMIT, and on a mismatch the transaction is rolled back: a wrong link is never
stored.  This saves round trips per single append against the locked path
(``append_transaction``): BEGIN, the queue lock and the statement go in one pipelined
round trip, COMMIT in a second.

Writers queue on one transaction-level advisory lock (:data:`APPEND_LOCK_SQL`) before
they touch the head row, here and in ``ledger.store.append.AppendTxn.lock_head``, in a
statement of its own.  That is what makes the one statement correct for a tenant's first
entry: a statement reads with the snapshot taken when it starts, and a ``FOR UPDATE``
that waits re-reads only the rows that snapshot saw -- so a statement that started before
the previous writer committed would not see the ``tenant_heads`` row that writer created,
and would link a second first entry to the tenant's genesis (a fork;
``tests/ops/test_tenant_concurrency.py`` races four writers for new tenants' first entries
and fails without the queue lock).  Taken first, in its own statement, it makes every
append statement start after the previous append committed.  It also lets the lock manager
grant waiting writers in turn instead of all re-reading the updated head row when its lock
is released (measured: docs/performance.md, "Tenants").
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from sqlalchemy import Engine

from ledger.errors import LedgerError
from ledger.store.db import driver_cursor
from ledger.store.entries import ENTRY_COLUMNS
from ledger.store.layout import pid_sql

MAX_BIGINT = 2**63 - 1
# Columns the caller provides; the statement fills seq, recorded_at, prev_hash, entry_hash.
LINKED_COLUMNS = [c for c in ENTRY_COLUMNS
                  if c not in ("seq", "recorded_at", "prev_hash", "entry_hash", "tenant", "tseq")]
# (prev_hash, seq, tseq, recorded_at) -> the entry_hash the core computes for this entry.
LinkFn = Callable[[bytes, int, int, int], bytes]


class LinkParts(Protocol):
    """What the statement hashes around the head, as ``ledger.core.tenant.link_parts``
    gives it: ``tag || prev || int8send(seq) || [int8send(tseq)] || int8send(t) || tail``."""

    @property
    def tag(self) -> bytes: ...
    @property
    def binds_tseq(self) -> bool: ...
    @property
    def tail(self) -> bytes: ...


# The appenders' queue: a transaction-level advisory lock, taken before the head row's
# lock by every append transaction (and the checkpoint signer, which locks the head too).
# Key: the first 8 bytes of SHA-256("ledger.append") as a big-endian signed bigint (a test
# derives it again); advisory locks are per database.
APPEND_LOCK_KEY = -2629951614224804103
APPEND_LOCK_SQL = f"SELECT pg_advisory_xact_lock({APPEND_LOCK_KEY})"

_APPEND_ONE = """
WITH h AS (SELECT size, head_hash, GREATEST(%s::bigint, last_recorded_at) AS ts
           FROM head WHERE id = 1 FOR UPDATE),
t AS (SELECT size AS tsize, head_hash AS thash FROM tenant_heads
      WHERE tenant = %s FOR UPDATE),
g AS (SELECT h.size, h.ts, {tsize} AS tsize, {thash} AS thash FROM h {join} t ON true
      WHERE h.ts < %s::bigint AND {tsize} < %s::bigint
      AND NOT EXISTS (SELECT 1 FROM entries WHERE kind = 'key_event' AND seq > %s::bigint)),
{payloads}
e AS (INSERT INTO entries (seq, recorded_at, prev_hash, entry_hash, tenant, tseq, {cols})
      SELECT g.size, g.ts, g.thash,
             sha256(%s::bytea || g.thash || int8send(g.size) || {bind_tseq}int8send(g.ts)
                    || %s::bytea),
             %s, g.tsize, {values}
      FROM g RETURNING seq, recorded_at, prev_hash, entry_hash, tseq),
u AS (UPDATE head SET size = e.seq + 1, head_hash = e.entry_hash,
      last_recorded_at = e.recorded_at FROM e WHERE head.id = 1),
v AS (INSERT INTO tenant_heads (tenant, size, head_hash) SELECT %s, e.tseq + 1, e.entry_hash
      FROM e ON CONFLICT (tenant) DO UPDATE SET size = excluded.size,
      head_hash = excluded.head_hash)
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
               parts: LinkParts, link: LinkFn, *, tenant: str = "default",
               genesis: bytes | None = None, guard: tuple[int, int] | None = None,
               below: int | None = None) -> Linked | None:
    """Append one entry of ``tenant`` in one statement and commit it if ``link`` agrees.

    ``row`` holds every entries column but seq/recorded_at/prev_hash/entry_hash/tenant/tseq;
    ``items`` the payloads ``(slot, salt, codec, stored bytes)`` (their pid:
    ``ledger.store.layout``); ``parts`` the link's parts for this entry
    (``ledger.core.tenant.link_parts``).  ``genesis``: the tenant's genesis hash, the
    ``prev_hash`` of its first entry when it has no ``tenant_heads`` row yet; None: the
    row must exist (else nothing is written and None is returned).  ``guard`` =
    (recorded_at must stay below this µs, no key_event after this seq): when it does not
    hold nothing is written and None is returned; so too when the tenant already has
    ``below`` entries or more (its quota).  Raises LedgerError ``link_mismatch`` (rolled
    back), StoreUnavailable, StoreDataError.
    """
    sql, params = _statement(row, items, now_us, parts, tenant, genesis, guard, below)
    with driver_cursor(engine, "append") as (raw, cur):
        conn = raw.driver_connection
        with conn.pipeline():  # BEGIN + the queue lock + the statement in one round trip
            cur.execute(APPEND_LOCK_SQL)
            cur.execute(sql, params)
        got = cur.fetchone()
        if got is None:
            conn.rollback()
            return None
        linked = Linked(got[0], got[1], bytes(got[2]), bytes(got[3]), int(got[4]))
        want = link(linked.prev_hash, linked.seq, linked.tseq, linked.recorded_at)
        if linked.entry_hash != want:
            conn.rollback()
            raise LedgerError(f"the database computed a different link for seq {linked.seq};"
                              " nothing was stored", code="link_mismatch",
                              detail={"seq": linked.seq})
        conn.commit()
    return linked


def _statement(row: dict[str, Any], items: list[tuple[int, bytes | None, int, bytes]],
               now_us: int, parts: LinkParts, tenant: str, genesis: bytes | None,
               guard: tuple[int, int] | None, below: int | None,
               ) -> tuple[str, tuple[Any, ...]]:
    before, key_seq = guard if guard is not None else (MAX_BIGINT, MAX_BIGINT)
    params: list[Any] = [now_us, tenant]
    if genesis is not None:
        params.append(genesis)
    params += [before, MAX_BIGINT if below is None else below, key_seq]
    payload_sql = ""
    if items:
        payload_sql = _PAYLOADS.format(
            rows=", ".join(["(%s::bigint, %s::bytea, %s::smallint, %s::bytea)"] * len(items)))
        for slot, salt, how, kept in items:
            params += [slot, salt, how, kept]
    fresh = genesis is not None  # a tenant without a head row starts at its genesis
    sql = _APPEND_ONE.format(
        payloads=payload_sql, cols=", ".join(LINKED_COLUMNS),
        values=", ".join(["%s"] * len(LINKED_COLUMNS)),
        join="LEFT JOIN" if fresh else "JOIN",
        tsize="COALESCE(t.tsize, 0)" if fresh else "t.tsize",
        thash="COALESCE(t.thash, %s::bytea)" if fresh else "t.thash",
        bind_tseq="int8send(g.tsize) || " if parts.binds_tseq else "")
    params += [parts.tag, parts.tail, tenant]
    params += [row.get(c) for c in LINKED_COLUMNS]
    params.append(tenant)
    return sql, tuple(params)
