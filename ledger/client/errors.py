"""Errors of the producer and the reader client: branches of the one tree in ``ledger.errors``,
re-exported here for the client's users."""

from __future__ import annotations

from ledger.errors import (
    AccessDenied,
    CheckpointRejected,
    ClientUsage,
    EntryUnverified,
    Forked,
    LedgerNotNow,
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

__all__ = ["AccessDenied", "CheckpointRejected", "ClientUsage", "EntryUnverified", "Forked",
           "LedgerNotNow", "LedgerUnavailable", "ProofRejected", "ReadUnverified",
           "ReceiptInvalid", "Rejected", "RolledBack", "SpoolCorrupt", "SpoolError",
           "SpoolFull", "SpoolLocked", "TileRejected", "TrustStateInvalid"]
