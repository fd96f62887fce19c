"""The custody family: redactions, legal holds, retention and erasure reports
(docs/redaction.md).

This module is the family's face: what the facade and other callers import.  Its private
modules: ``redaction`` (redaction entries, holds) <- ``retention`` (erasing what a policy
says has expired) and ``erasure`` (the signed erasure report).  The redaction map every
reader folds (``ledger.ops.redaction_map``) is not part of the family: the context and
the trust store read it, below the append path the family writes through.
"""

from __future__ import annotations

from ledger.core.retention import RetentionPolicy
from ledger.ops.custody.erasure import erasure_report, verify_report, write_report
from ledger.ops.custody.redaction import (
    Ask,
    RedactionOutcome,
    hold_add,
    hold_release,
    holds_in_force,
    prepare_redaction,
    redact,
)
from ledger.ops.custody.retention import RetentionRun, apply_retention, load_retention

__all__ = ["Ask", "RedactionOutcome", "RetentionPolicy", "RetentionRun", "apply_retention",
           "erasure_report", "hold_add", "hold_release", "holds_in_force", "load_retention",
           "prepare_redaction", "redact", "verify_report", "write_report"]
