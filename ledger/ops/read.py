"""Reading entries: the head, one entry with its payloads, a range of entries."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ledger.clock import format_us
from ledger.core.entry import hash_hex
from ledger.errors import IntegrityError, NotFound
from ledger.ops.context import LedgerContext
from ledger.ops.verified import check_page
from ledger.ops.view import entry_detail
from ledger.store import entries as repo
from ledger.store.db import connect


def head(ctx: LedgerContext) -> dict[str, Any]:
    """Identity and size of the ledger, its head hash and the last recorded time."""
    with connect(ctx.engine) as conn:
        h = repo.read_head(conn)
    if h is None:
        raise IntegrityError("the head row is missing (run `ledger audit`)", code="head_missing")
    return {"ledger_id": ctx.meta.ledger_id, "origin": ctx.meta.origin,
            "size": h.size, "head_hash": hash_hex(h.head_hash),
            "last_recorded_at": format_us(h.last_recorded_at) if h.size else None}


def hash_before(ctx: LedgerContext, end: int) -> str | None:
    """The stored hash (hex) of entry ``end - 1``, the last a run over ``[start, end)``
    covered; None for an empty range or a missing row."""
    if not end:
        return None
    with connect(ctx.engine) as conn:
        h = repo.entry_hash_at(conn, end - 1)
    return hash_hex(h) if h is not None else None


def get_entry(ctx: LedgerContext, seq: int) -> dict[str, Any]:
    """One entry with its payloads (auditor view), checked against what was hashed, with
    the audit findings about it.  Raises NotFound."""
    with connect(ctx.engine) as conn:
        row = repo.get_entry(conn, seq)
        if row is None:
            raise NotFound(f"no entry with seq {seq}", field="seq")
        blobs = repo.get_payloads(conn, seq)
        [(_, checked, findings)] = check_page(conn, ctx.ledger_id, ctx.reads, [(row, blobs)])
    return entry_detail(row, checked, findings)


def iter_entries(ctx: LedgerContext, start: int = 0, end: int | None = None) -> Iterator[Any]:
    """Stored entry rows with ``start <= seq < end``, in seq order."""
    with connect(ctx.engine) as conn:
        yield from repo.iter_entries(conn, start, end)
