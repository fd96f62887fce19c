"""One exception tree for the whole package.

Every error has a stable machine ``code`` (never reworded once released), a
``category`` that decides the CLI exit code and the HTTP status (the one table,
:data:`CATEGORY_STATUS`), and, for bad input, the ``field`` it is about.  Foreign
exceptions (SQLAlchemy, PyJWT, ``json``) are translated into this tree once, at the
boundary where they are caught, with ``raise ... from exc``.

The tree (category in brackets; a class without one inherits its parent's)::

    LedgerError [internal]
    ├── UsageError [usage]
    │   ├── TenantError
    │   ├── KeyringError
    │   ├── PolicyError (also a ValueError)
    │   ├── ClientUsage
    │   └── TrustStateInvalid
    ├── BadRequest [usage]
    ├── Unauthenticated [unauthenticated]
    ├── Forbidden [forbidden]
    ├── QuotaExceeded [forbidden]
    ├── SubmissionError [invalid]
    │   ├── SubmissionTooLarge [too_large]
    │   └── Rejected
    ├── CanonicalizationError [invalid] (also a ValueError)
    ├── StrictError [invalid] (also a ValueError)
    ├── StoreDataError [invalid]
    ├── NoteError [invalid]
    ├── IdempotencyConflict [conflict]
    ├── RedactionRefused [conflict]
    ├── NotFound [not_found]
    ├── IntegrityError [integrity]
    │   ├── ProofError
    │   ├── TreeIntegrityError
    │   ├── CheckpointError
    │   ├── NoteSignatureError
    │   ├── CosignatureError
    │   ├── TimestampError
    │   ├── SpoolCorrupt
    │   ├── ReceiptInvalid
    │   └── ReadUnverified
    │       ├── CheckpointRejected
    │       ├── RolledBack
    │       ├── Forked
    │       ├── ProofRejected
    │       ├── TileRejected
    │       └── EntryUnverified
    ├── StorePermissionDenied [internal]
    ├── StoreUnavailable [unavailable]
    │   └── ReplicaBehind [unavailable]
    ├── NotInitialized [unavailable]
    ├── Overloaded [unavailable]
    ├── SpoolError [unavailable]
    │   ├── SpoolFull
    │   └── SpoolLocked
    ├── LedgerUnavailable [unavailable]
    │   └── LedgerNotNow
    └── AccessDenied [unauthenticated]

The classes from ``SpoolError`` on, and ``ClientUsage``, ``Rejected``, ``SpoolCorrupt`` and
``ReceiptInvalid``, are the producer client's (``ledger.client`` re-exports them);
``ReadUnverified`` and its subclasses and ``TrustStateInvalid`` are the reader client's
(``ledger.client.reader``, docs/reader.md): each failed check has its own stable ``code``.

"Also a ValueError" marks the checks of pure values (canonical JSON, policy documents): a
``_ValueCheck`` is a ValueError too, and its text is the bare message, since callers fold it
into errors of their own.

A rejection reported as data rather than raised (a rejected item of a batch,
``AppendResult.error``) is ``LedgerError.to_dict()``: an :class:`ErrorInfo`, whose
JSON members are what clients see and whose ``category`` attribute still leads to
the table.
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


class ErrorInfo(dict[str, Any]):
    """An error as JSON members (``code``, ``message``, ``field``?, ``detail``?) that keeps
    its ``category`` as an attribute, not a member: the JSON shape is unchanged, and
    whoever answers for it (exit code, HTTP status) reads the one table."""

    def __init__(self, members: dict[str, Any], category: str) -> None:
        super().__init__(members)
        self.category = category

    @property
    def exit_code(self) -> int:
        return CATEGORY_STATUS[self.category][0]

    @property
    def http_status(self) -> int:
        return CATEGORY_STATUS[self.category][1]


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

    def to_dict(self) -> ErrorInfo:
        """``{"code", "message", "field"?, "detail"?}``, carrying this error's category."""
        out: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.field is not None:
            out["field"] = self.field
        if self.detail:
            out["detail"] = self.detail
        return ErrorInfo(out, self.category)

    def __str__(self) -> str:
        where = f" [{self.field}]" if self.field else ""
        return f"{self.code}{where}: {self.message}"


class _ValueCheck(LedgerError, ValueError):
    """A pure check of a value, also a ValueError (the standard library's convention for a
    bad argument).  Its text is the bare message: callers fold it into their own error."""

    def __str__(self) -> str:
        return self.message


# -- usage: the caller asked for something that cannot be done (exit 2, HTTP 400) --------

class UsageError(LedgerError):
    category = "usage"
    default_code = "usage"


class TenantError(UsageError):
    """A tenant id or a tenant structure (head, heads line) that breaks its rule."""

    default_code = "invalid_tenant"


class KeyringError(UsageError):
    """A keyring directory or key that cannot be used (unreadable, no active key, ...)."""

    default_code = "keyring_error"


class PolicyError(UsageError, _ValueCheck):
    """A policy document breaks ``ledger-policy/1``; the message names the field."""

    default_code = "bad_policy"


class BadRequest(LedgerError):
    """A malformed request outside the submission rules (400)."""

    category = "usage"
    default_code = "bad_request"


# -- HTTP authentication and authorization ------------------------------------------------

class Unauthenticated(LedgerError):
    """No token, or a token that does not verify (401)."""

    category = "unauthenticated"
    default_code = "invalid_token"


class Forbidden(LedgerError):
    """A valid token whose role may not use this endpoint (403)."""

    category = "forbidden"
    default_code = "forbidden"


# -- invalid input (exit 2, HTTP 422) -------------------------------------------------------

class SubmissionError(LedgerError):
    """A submission breaks a rule; nothing of it is stored in the ledger."""

    category = "invalid"
    default_code = "invalid_submission"


class SubmissionTooLarge(SubmissionError):
    category = "too_large"
    default_code = "too_large"


class CanonicalizationError(_ValueCheck):
    """A value outside the canonical JSON subset the ledger hashes (ledger.core.canonical)."""

    category = "invalid"
    default_code = "invalid_value"


class StrictError(_ValueCheck):
    """An artifact breaks a strict-reading rule (ledger.core.strict).  ``field`` names
    where (or None); ``rule`` which: ``encoding``, ``syntax``, ``duplicate_key``,
    ``unknown_key``, ``base64``."""

    category = "invalid"
    default_code = "not_strict"

    def __init__(self, message: str, field: str | None = None, rule: str = "syntax") -> None:
        super().__init__(message, field=field)
        self.rule = rule


class NoteError(LedgerError):
    """A note or checkpoint is malformed (syntax, not signature validity)."""

    category = "invalid"
    default_code = "malformed_note"


class IdempotencyConflict(LedgerError):
    category = "conflict"
    default_code = "idempotency_conflict"


class QuotaExceeded(LedgerError):
    """A result entry beyond its tenant's entry quota (``ledger.ops.limits.TenantQuotas``):
    not appended, and no retry cures it (403)."""

    category = "forbidden"
    default_code = "tenant_quota_exceeded"


class RedactionRefused(LedgerError):
    """A redaction that must not happen: an entry under a legal hold, a payload under its
    minimum retention (docs/redaction.md); nothing is erased."""

    category = "conflict"
    default_code = "redaction_refused"


class NotFound(LedgerError):
    category = "not_found"
    default_code = "not_found"


# -- integrity: stored or presented data does not verify (exit 1) --------------------------

class IntegrityError(LedgerError):
    """Stored data does not verify (used by verify_* functions)."""

    category = "integrity"
    default_code = "integrity"


class ProofError(IntegrityError):
    default_code = "proof_invalid"


class TreeIntegrityError(IntegrityError):
    """The stored tree and the entries table disagree (truncation, rewrite, gap)."""

    default_code = "tree_inconsistent"


class CheckpointError(IntegrityError):
    """Signing would contradict an earlier checkpoint, or a stored checkpoint is corrupt."""

    default_code = "checkpoint_inconsistent"


class CosignatureError(IntegrityError):
    """A witness answered with no cosignature that verifies under its key."""

    default_code = "cosignature_invalid"


class TimestampError(IntegrityError):
    """An RFC 3161 time-stamp token does not verify, or does not cover what it should."""

    default_code = "timestamp_invalid"


class NoteSignatureError(IntegrityError):
    """A note's signatures do not verify against the configured keys."""

    default_code = "note_signature_invalid"


# -- unavailable: try again later (exit 4, HTTP 503) ---------------------------------------

class StorePermissionDenied(LedgerError):
    """The database refused a statement for lack of privilege (PostgreSQL SQLSTATE
    42501): the service's role misses a GRANT (docs/operations.md), or an append-only
    trigger refused a rewrite.  Permanent: retrying does not help (exit 4, HTTP 500)."""

    category = "internal"
    default_code = "store_permission_denied"


class StoreUnavailable(LedgerError):
    category = "unavailable"
    default_code = "store_unavailable"


class ReplicaBehind(StoreUnavailable):
    """The read replica has not yet replayed what the request names (an entry, a checkpoint)
    and the primary has it: 503 with ``Retry-After``, never a 404 that would be wrong."""

    default_code = "replica_behind"


class NotInitialized(LedgerError):
    category = "unavailable"
    default_code = "not_initialized"


class Overloaded(LedgerError):
    """The append queue is full (503, ``Retry-After: 1``)."""

    category = "unavailable"
    default_code = "overloaded"


class StoreDataError(LedgerError):
    """The database refused a value of one item (SQLSTATE class 22/23, or the driver):
    that item's fault, not the store's; a retry of the same item fails the same way."""

    category = "invalid"
    default_code = "unstorable_value"


# -- the producer client (ledger.client) ---------------------------------------------------

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
    """A record other than the torn tail of the newest segment does not decode (or breaks
    the record rules), or a spool file is not one the spool created."""

    default_code = "spool_corrupt"


class ReceiptInvalid(IntegrityError):
    """The ledger answered, but its receipt does not prove what it said."""

    default_code = "receipt_invalid"


class LedgerUnavailable(LedgerError):
    """The ledger could not be reached (and no spool was configured)."""

    category = "unavailable"
    default_code = "ledger_unavailable"


class LedgerNotNow(LedgerUnavailable):
    """The ledger cannot take a request now (unreachable, timeout, 5xx): the client spools
    the submission or retries later."""

    default_code = "ledger_not_now"


class Rejected(SubmissionError):
    """The ledger refused the submission (HTTP 4xx); it is in the ledger's quarantine.
    Build it from the answer with :meth:`from_answer`; ``status`` is the HTTP status."""

    default_code = "rejected"
    status = 422

    @classmethod
    def from_answer(cls, status: int, error: dict[str, Any]) -> Rejected:
        exc = cls(str(error.get("message", "rejected")), code=str(error.get("code", "rejected")),
                  field=error.get("field"),
                  detail={"http_status": status, **(error.get("detail") or {})})
        exc.status = status
        return exc


class ClientUsage(UsageError):
    """A bad argument to the client."""


class AccessDenied(LedgerError):
    """The token was refused (401/403): a configuration error, never spooled."""

    category = "unauthenticated"
    default_code = "access_denied"


# -- the reader client (ledger.client.reader, docs/reader.md) ----------------------------

class TrustStateInvalid(UsageError):
    """The reader's trusted-state file cannot be used (unreadable, malformed, another
    format version, a checkpoint in it that its own keys do not verify), or a first read
    has no trust anchor."""

    default_code = "state_invalid"


class ReadUnverified(IntegrityError):
    """A verified read failed: what the ledger served does not prove what it says.
    ``code`` names the check (docs/reader.md#errors)."""

    default_code = "read_unverified"


class CheckpointRejected(ReadUnverified):
    """A served checkpoint is not signed by a trusted ledger key
    (``checkpoint_signature_invalid``), is malformed (``checkpoint_malformed``), is for
    another log (``origin_mismatch``) or lacks the witness quorum
    (``witness_quorum_not_met``)."""

    default_code = "checkpoint_signature_invalid"


class RolledBack(ReadUnverified):
    """The ledger serves a smaller tree than the reader already verified."""

    default_code = "rolled_back"


class Forked(ReadUnverified):
    """The ledger serves a history that does not extend the one the reader verified: a
    signed checkpoint of the trusted size with another root (``forked``), or a newer one
    without a valid consistency proof from the trusted one (``consistency_invalid``)."""

    default_code = "forked"


class ProofRejected(ReadUnverified):
    """An inclusion proof does not lead to the trusted checkpoint: the path does not hash
    to its root (``inclusion_invalid``), it is to another size (``wrong_tree_size``) or
    another entry (``wrong_entry``), or it is malformed (``proof_malformed``)."""

    default_code = "inclusion_invalid"


class TileRejected(ReadUnverified):
    """A tile read from a C2SP tlog-tiles prefix does not check against the signed root
    (``tile_hash_mismatch``: its hashes do not reproduce the root or its entry in the tile
    above), has the wrong length for its width (``tile_size_mismatch``), is absent
    (``tile_missing``), or an entry bundle is not one record per line for its leaves
    (``bundle_malformed``).  ``detail`` names the tile (docs/reader.md#reading-from-tiles)."""

    default_code = "tile_hash_mismatch"


class EntryUnverified(ReadUnverified):
    """The entry served does not check against what was hashed; ``code`` is the first
    read-check code (``column_mismatch``, ``payload_digest_mismatch``,
    ``envelope_hash_mismatch``, ``entry_hash_mismatch``, ...), ``detail`` holds ``codes``,
    ``problems`` and ``reported_by`` (``reader``: the reader's own check found it;
    ``server``: the ledger's verdict, which the reader cannot check from what it got)."""

    default_code = "entry_unverified"
