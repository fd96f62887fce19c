"""Whether a database is a read-only PostgreSQL hot standby, and how far behind it is.

A streaming replica answers every read the primary would, as of the last WAL record it has
replayed: a consistent, older state of the same ledger (entries, tree nodes and checkpoints
arrive in the primary's commit order).  SQLite is never a standby.  See docs/operations.md,
"Readers on a replica".
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import Connection, text

from ledger.store.db import is_pg

# replay lag: 0 when everything received is replayed (an idle primary writes nothing, and the
# time since the last replayed commit would grow without the standby being behind)
_LAG = text(
    "SELECT CASE WHEN pg_last_wal_receive_lsn() IS NOT NULL"
    " AND pg_last_wal_receive_lsn() = pg_last_wal_replay_lsn() THEN 0"
    " ELSE coalesce(extract(epoch FROM now() - pg_last_xact_replay_timestamp()), 0) END,"
    " coalesce(pg_wal_lsn_diff(pg_last_wal_receive_lsn(), pg_last_wal_replay_lsn()), 0),"
    " pg_is_wal_replay_paused(),"
    " (SELECT status FROM pg_stat_wal_receiver LIMIT 1)")


@dataclass(frozen=True)
class StandbyLag:
    """What a standby says of itself: seconds since the newest commit it has replayed when
    it has WAL still to replay (else 0), WAL bytes received but not replayed, whether
    replay is paused, and its WAL receiver's status (``streaming``; None: not connected to
    a primary)."""

    replay_lag_s: float
    replay_behind_bytes: int
    replay_paused: bool
    receiver: str | None


def is_standby(conn: Connection) -> bool:
    """True on a PostgreSQL server in recovery (a hot standby): it takes no writes."""
    return bool(is_pg(conn) and conn.execute(text("SELECT pg_is_in_recovery()")).scalar())


def standby_lag(conn: Connection) -> StandbyLag:
    """The lag of the standby ``conn`` is connected to (call only where is_standby)."""
    lag_s, behind, paused, receiver = conn.execute(_LAG).one()
    return StandbyLag(round(float(lag_s), 3), int(behind), bool(paused), receiver)
