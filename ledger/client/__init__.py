"""The producer client: append results to a ledger service over HTTP, never losing one;
and the reader client: read entries back, each one verified.

``LedgerClient`` (threads) and ``AsyncLedgerClient`` (asyncio) verify every receipt
against the ledger's JWKS and keep what the ledger cannot take now in a durable
:class:`Spool`, replayed in order by ``drain()``.  This package talks HTTP (httpx) and
checks receipts (PyJWT, in ``receipt.py`` only); it never imports the server side
(the database layer, the HTTP service).  Guide: docs/producers.md.

``LedgerReader`` (threads) and ``AsyncLedgerReader`` (asyncio) keep a trusted checkpoint in a
local state file and verify every entry they read with the ledger's own checks (the reader
modules may import ``ledger.core``, ``ledger.crypto`` and ``ledger.verify``; the producer
modules may not).  Guide: docs/reader.md.
"""

from __future__ import annotations

from ledger.client.aio import AsyncLedgerClient
from ledger.client.errors import (
    AccessDenied,
    CheckpointRejected,
    EntryUnverified,
    Forked,
    LedgerUnavailable,
    ProofRejected,
    ReadUnverified,
    ReceiptInvalid,
    Rejected,
    RolledBack,
    SpoolCorrupt,
    SpoolError,
    SpoolFull,
    SpoolLocked,
    TileRejected,
    TrustStateInvalid,
)
from ledger.client.protocol import AppendOutcome, DrainReport
from ledger.client.reader import LedgerReader
from ledger.client.reader_aio import AsyncLedgerReader
from ledger.client.reader_core import VerifiedEntry
from ledger.client.spool import Spool, SpoolItem, SpoolStatus, inspect
from ledger.client.sync import LedgerClient
from ledger.client.trust_state import TrustedState

__all__ = [
    "AccessDenied",
    "AppendOutcome",
    "AsyncLedgerClient",
    "AsyncLedgerReader",
    "CheckpointRejected",
    "DrainReport",
    "EntryUnverified",
    "Forked",
    "LedgerClient",
    "LedgerReader",
    "LedgerUnavailable",
    "ProofRejected",
    "ReadUnverified",
    "ReceiptInvalid",
    "Rejected",
    "RolledBack",
    "Spool",
    "SpoolCorrupt",
    "SpoolError",
    "SpoolFull",
    "SpoolItem",
    "SpoolLocked",
    "SpoolStatus",
    "TileRejected",
    "TrustStateInvalid",
    "TrustedState",
    "VerifiedEntry",
    "inspect",
]
