"""Append-only, hash-chained, Merkle-committed audit ledger for verification results."""

from ledger.core.diagnostics import (
    AdvisoryCheck,
    DiagnosticResult,
    DiagnosticStatus,
    compute_proof_ref,
)
from ledger.errors import LedgerError
from ledger.facade import Ledger

__version__ = "0.1.0"

__all__ = [
    "AdvisoryCheck",
    "DiagnosticResult",
    "DiagnosticStatus",
    "Ledger",
    "LedgerError",
    "__version__",
    "compute_proof_ref",
]
