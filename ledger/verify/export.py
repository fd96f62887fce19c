"""``ledger verify-export``: verify an export bundle (format ``ledger-export/1``,
docs/export.md) offline.

No database: this module never imports ``ledger.store``, SQLAlchemy or ``ledger.ops``
(a test keeps it so).  It reads the key and policy files and hands
them to the offline verifier :func:`ledger.verify.bundle.verify_bundle_dir`; the report,
outcome and exit codes are those of ``ledger audit`` (0 / 1 / 3).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ledger.core.finding import EXIT_CODES, EXPORT_SUMMARY, outcome
from ledger.core.finding import summary_line as _summary_line
from ledger.core.policy import Policy, load_policy
from ledger.crypto.keys import load_public_keys
from ledger.verify.bundle import REPORT_FORMAT, verify_bundle_dir

__all__ = ["EXIT_CODES", "REPORT_FORMAT", "default_policy", "outcome", "summary_line",
           "verify_export"]


def default_policy() -> Policy:
    """The packaged default policy."""
    return load_policy()


def summary_line(report: dict[str, Any]) -> str:
    """``verify-export complete: R rows, V verified, F failed, U unverified`` (and more)."""
    return _summary_line(report, EXPORT_SUMMARY)


def verify_export(directory: str | Path, jwks: str | Path | None = None,
                  policy_path: str | Path | None = None,
                  check_attestations: bool = True) -> dict[str, Any]:
    """Verify the bundle in ``directory`` with no database and return the report.

    ``jwks``: the trusted ledger keys (a JWKS or PEM file); without it the signature
    checks abstain (outcome ``unverified`` at best).  Raises UsageError for an unreadable
    key or policy file, or a missing directory; never raises for bad bundle content.
    """
    # a malformed key is a KeyringError (a UsageError, code bad_jwks) from the crypto layer
    trusted = load_public_keys(jwks) if jwks is not None else None
    policy = load_policy(policy_path)
    return verify_bundle_dir(directory, trusted, policy, check_attestations)
