"""Errors of the producer client: branches of the one tree in ``ledger.errors``,
re-exported here for the client's users."""

from __future__ import annotations

from ledger.errors import (
    AccessDenied,
    ClientUsage,
    LedgerNotNow,
    LedgerUnavailable,
    ReceiptInvalid,
    Rejected,
    SpoolCorrupt,
    SpoolError,
    SpoolFull,
    SpoolLocked,
)

__all__ = ["AccessDenied", "ClientUsage", "LedgerNotNow", "LedgerUnavailable",
           "ReceiptInvalid", "Rejected", "SpoolCorrupt", "SpoolError", "SpoolFull",
           "SpoolLocked"]
