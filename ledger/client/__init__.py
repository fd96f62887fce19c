"""The producer client: append results to a ledger service over HTTP, never losing one.

``LedgerClient`` (threads) and ``AsyncLedgerClient`` (asyncio) verify every receipt
against the ledger's JWKS and keep what the ledger cannot take now in a durable
:class:`Spool`, replayed in order by ``drain()``.  This package talks HTTP (httpx) and
checks receipts (PyJWT, in ``receipt.py`` only); it never imports the server side
(the database layer, the HTTP service).  Guide: docs/producers.md.
"""

from __future__ import annotations

from ledger.client.aio import AsyncLedgerClient
from ledger.client.errors import (
    AccessDenied,
    LedgerUnavailable,
    ReceiptInvalid,
    Rejected,
    SpoolCorrupt,
    SpoolError,
    SpoolFull,
    SpoolLocked,
)
from ledger.client.protocol import AppendOutcome, DrainReport
from ledger.client.spool import Spool, SpoolItem, SpoolStatus, inspect
from ledger.client.sync import LedgerClient

__all__ = [
    "AccessDenied",
    "AppendOutcome",
    "AsyncLedgerClient",
    "DrainReport",
    "LedgerClient",
    "LedgerUnavailable",
    "ReceiptInvalid",
    "Rejected",
    "Spool",
    "SpoolCorrupt",
    "SpoolError",
    "SpoolFull",
    "SpoolItem",
    "SpoolLocked",
    "SpoolStatus",
    "inspect",
]
