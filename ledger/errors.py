"""One exception tree for the whole package.

Every error has a stable machine ``code`` (never reworded once released), a
``category`` that decides the CLI exit code and the HTTP status, and, for bad
input, the ``field`` it is about.  Foreign exceptions (SQLAlchemy, PyJWT,
``json``) are translated into this tree once, at the boundary where they are
caught, with ``raise ... from exc``.
"""

from __future__ import annotations

from typing import Any

# category -> (CLI exit code, HTTP status)
CATEGORY_STATUS: dict[str, tuple[int, int]] = {
    "usage": (2, 400),
    "unauthenticated": (2, 401),
    "forbidden": (2, 403),
    "invalid": (2, 422),
    "too_large": (2, 413),
    "conflict": (2, 409),
    "not_found": (2, 404),
    "integrity": (1, 409),
    "unavailable": (4, 503),
    "internal": (4, 500),
}


class LedgerError(Exception):
    """Base of every error this package raises on purpose."""

    category = "internal"
    default_code = "internal_error"

    def __init__(self, message: str, *, code: str | None = None, field: str | None = None,
                 detail: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.code = code or self.default_code
        self.field = field
        self.detail = detail or {}

    @property
    def exit_code(self) -> int:
        return CATEGORY_STATUS[self.category][0]

    @property
    def http_status(self) -> int:
        return CATEGORY_STATUS[self.category][1]

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.field is not None:
            out["field"] = self.field
        if self.detail:
            out["detail"] = self.detail
        return out

    def __str__(self) -> str:
        where = f" [{self.field}]" if self.field else ""
        return f"{self.code}{where}: {self.message}"


class UsageError(LedgerError):
    category = "usage"
    default_code = "usage"


class SubmissionError(LedgerError):
    """A submission breaks a rule; nothing of it is stored in the ledger."""

    category = "invalid"
    default_code = "invalid_submission"


class SubmissionTooLarge(SubmissionError):
    category = "too_large"
    default_code = "too_large"


class IdempotencyConflict(LedgerError):
    category = "conflict"
    default_code = "idempotency_conflict"


class NotFound(LedgerError):
    category = "not_found"
    default_code = "not_found"


class IntegrityError(LedgerError):
    """Stored data does not verify (used by verify_* functions)."""

    category = "integrity"
    default_code = "integrity"


class ProofError(IntegrityError):
    default_code = "proof_invalid"


class StoreUnavailable(LedgerError):
    category = "unavailable"
    default_code = "store_unavailable"


class NotInitialized(LedgerError):
    category = "unavailable"
    default_code = "not_initialized"


class StoreDataError(LedgerError):
    """The database refused a value of one item (SQLSTATE class 22/23, or the driver):
    that item's fault, not the store's; a retry of the same item fails the same way."""

    category = "invalid"
    default_code = "unstorable_value"
