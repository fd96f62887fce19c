"""Errors of the producer client (branches of the one tree in ``ledger.errors``)."""

from __future__ import annotations

from typing import Any

from ledger.errors import IntegrityError, LedgerError, SubmissionError, UsageError


class SpoolError(LedgerError):
    """The spool cannot take or give back an item."""

    category = "unavailable"
    default_code = "spool_error"


class SpoolFull(SpoolError):
    """The spool holds its configured maximum; nothing was written."""

    default_code = "spool_full"


class SpoolLocked(SpoolError):
    """Another process has this spool directory open."""

    default_code = "spool_locked"


class SpoolCorrupt(IntegrityError):
    """A record other than the torn tail of the newest segment does not decode."""

    default_code = "spool_corrupt"


class ReceiptInvalid(IntegrityError):
    """The ledger answered, but its receipt does not prove what it said."""

    default_code = "receipt_invalid"


class LedgerUnavailable(LedgerError):
    """The ledger could not be reached (and no spool was configured)."""

    category = "unavailable"
    default_code = "ledger_unavailable"


class Rejected(SubmissionError):
    """The ledger refused the submission (HTTP 4xx); it is in the ledger's quarantine."""

    def __init__(self, status: int, error: dict[str, Any]) -> None:
        super().__init__(str(error.get("message", "rejected")),
                         code=str(error.get("code", "rejected")), field=error.get("field"),
                         detail={"http_status": status, **(error.get("detail") or {})})
        self.status = status


class ClientUsage(UsageError):
    """A bad argument to the client."""


class AccessDenied(LedgerError):
    """The token was refused (401/403): a configuration error, never spooled."""

    category = "unauthenticated"
    default_code = "access_denied"
