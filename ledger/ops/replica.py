"""Reads from a PostgreSQL hot standby: how far behind the primary it is.

``ledger serve --read-db URL`` answers reads from a streaming replica (docs/operations.md,
"Readers on a replica").  A replica is a consistent, older state of the primary, so what it
answers is true of the ledger at that state; what it does not have yet it must not deny:
``is_behind`` tells a 404 of the replica ("no such entry", "no such checkpoint") from one
that is only not replayed yet, by the primary's head and latest checkpoint.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from ledger.errors import UsageError
from ledger.ops.checkpoint import latest_checkpoint
from ledger.ops.context import LedgerContext
from ledger.store import entries as repo
from ledger.store import standby
from ledger.store.db import connect


@dataclass(frozen=True)
class Position:
    """How much of the ledger a database holds: the head's size and the size of the latest
    stored checkpoint (0: none)."""

    size: int
    checkpoint_size: int


def position(ctx: LedgerContext) -> Position:
    """The ledger position of ``ctx``'s database.  Raises StoreUnavailable."""
    with connect(ctx.engine) as conn:
        head = repo.read_head(conn)
    latest = latest_checkpoint(ctx)
    return Position(head.size if head is not None else 0,
                    latest.size if latest is not None else 0)


def check_same_ledger(primary: LedgerContext, replica: LedgerContext) -> None:
    """UsageError (``read_db``) when the read database holds another ledger."""
    if replica.meta.ledger_id != primary.meta.ledger_id:
        raise UsageError(f"the read database holds ledger {replica.meta.ledger_id}, not "
                         f"{primary.meta.ledger_id}: it is not a replica of this ledger",
                         code="not_a_replica", field="read_db")


def is_behind(primary: LedgerContext, replica: LedgerContext) -> bool:
    """Whether the primary holds entries or a checkpoint the replica has not replayed."""
    have, want = position(replica), position(primary)
    return want.size > have.size or want.checkpoint_size > have.checkpoint_size


def status(primary: LedgerContext, replica: LedgerContext) -> dict[str, Any]:
    """The replica's health: its position, how many entries and checkpoint sizes it is
    behind, and what the standby says of itself (replay lag in seconds, WAL bytes to
    replay, replay paused, WAL receiver status).  Raises StoreUnavailable when the replica
    does not answer; the primary not answering leaves the ``*_behind`` fields null."""
    with connect(replica.engine) as conn:
        is_standby = standby.is_standby(conn)
        lag = standby.standby_lag(conn) if is_standby else None
    have = position(replica)
    try:
        want: Position | None = position(primary)
    except Exception:  # noqa: BLE001 - the primary's own faults are reported elsewhere
        want = None
    out: dict[str, Any] = {
        "standby": is_standby, "size": have.size, "checkpoint_size": have.checkpoint_size,
        "entries_behind": None if want is None else max(0, want.size - have.size),
        "checkpoint_behind": None if want is None
        else max(0, want.checkpoint_size - have.checkpoint_size)}
    out.update(asdict(lag) if lag is not None else
               {"replay_lag_s": 0.0, "replay_behind_bytes": 0, "replay_paused": False,
                "receiver": None})
    return out
