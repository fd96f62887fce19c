"""The quarantine: rejected submissions kept for auditors, bounded and prunable.

It is not part of the chain: nothing in it is hashed, signed or proven, and pruning it
changes no entry, checkpoint or proof.  A write never raises (a failure is logged), so
that no error after a batch committed hides what the batch stored.

Bounds: ``ctx.quarantine_limits`` (``ledger.ops.limits.QuarantineLimits``); the rejects
beyond a bound are counted as *dropped* per producer and not kept.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

from ledger.clock import Clock
from ledger.errors import LedgerError
from ledger.ops.context import LedgerContext
from ledger.ops.limits import QuarantineLimits
from ledger.store import db
from ledger.store import quarantine as store

__all__ = ["QUARANTINE_MAX_RAW", "QuarantineLimits", "prune", "quarantine", "quarantine_rows",
           "status", "storable_text"]

log = logging.getLogger("ledger.ops.quarantine")  # its name before it joined ops/append

QUARANTINE_MAX_RAW = 64 * 1024  # a rejected submission is kept up to this many bytes


def storable_text(value: Any, limit: int) -> str:
    """``value`` as text any engine stores: NUL and lone surrogates escaped, at most
    ``limit`` characters (an ellipsis marks a cut)."""
    text = str(value).encode("utf-8", "backslashreplace").decode("utf-8")
    text = text.replace("\x00", "\\u0000")
    return text if len(text) <= limit else text[:limit - 1] + "\u2026"


def quarantine_rows(clock: Clock, producer: str | None,
                    items: Sequence[tuple[bytes, LedgerError | dict[str, Any]]],
                    ) -> list[dict[str, Any]]:
    """Quarantine rows that either engine can always store.

    The raw submission is kept as bytes (truncated past QUARANTINE_MAX_RAW, its full
    size in the message, so rejects cannot fill the disk); the text columns are
    escaped (NUL, lone surrogates) and cut to their column widths.
    """
    now = clock.now_us()
    rows = []
    for raw, err in items:
        d = err.to_dict() if isinstance(err, LedgerError) else err
        message = str(d.get("message", ""))
        if len(raw) > QUARANTINE_MAX_RAW:
            message += f" [raw submission of {len(raw)} bytes kept truncated to " \
                       f"{QUARANTINE_MAX_RAW}]"
            raw = raw[:QUARANTINE_MAX_RAW]
        field = d.get("field")
        rows.append({"received_at": now, "code": storable_text(d.get("code"), 64),
                     "field": None if field is None else storable_text(field, 256),
                     "message": storable_text(message, 4096),
                     "producer": None if producer is None else storable_text(producer, 256),
                     "raw": bytes(raw)})
    return rows


def quarantine(ctx: LedgerContext, bad: Sequence[tuple[bytes, LedgerError | dict[str, Any]]],
               producer: str | None) -> bool:
    """Write rejected items to the quarantine table within its bounds; True when written
    (rows beyond a bound are counted as dropped, which is also "written").

    Never raises: the quarantine is not part of the chain, and a failure here must not
    hide what the batch committed.  A failure is logged.
    """
    try:
        rows = quarantine_rows(ctx.clock, producer, bad)
        limits = ctx.quarantine_limits
        with db.transaction(ctx.engine) as conn:
            dropped = store.write_bounded(conn, rows, rows[0]["producer"] if rows else None,
                                          limits.max_rows, limits.max_per_producer,
                                          ctx.clock.now_us())
    except Exception:
        log.exception("could not write %d quarantine row(s)", len(bad))
        return False
    if dropped:
        log.warning("quarantine full: %d reject(s) of producer %r not kept", dropped, producer)
    return True


def status(ctx: LedgerContext) -> dict[str, Any]:
    """The quarantine's rows, bounds and counters, in all and per producer ('' = none)."""
    with db.connect(ctx.engine) as conn:
        c = store.counts(conn)
    limits = ctx.quarantine_limits
    return {"rows": c.rows, "dropped": c.dropped, "pruned": c.pruned,
            "max_rows": limits.max_rows, "max_per_producer": limits.max_per_producer,
            "producers": {p: asdict(v) for p, v in c.producers.items()}}


def prune(ctx: LedgerContext, before_us: int, producer: str | None = None) -> int:
    """Delete the quarantine rows received before ``before_us`` (µs since the epoch), of
    ``producer`` only when given ('' = rows without a producer); returns how many."""
    with db.transaction(ctx.engine) as conn:
        return store.prune(conn, before_us, producer)
