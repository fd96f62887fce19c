"""A ledger signing keyring for tests that redact (redactions are signed by the ledger key,
docs/redaction.md): one Ed25519 key named after the ledger's origin, generated on first use."""

from __future__ import annotations

from pathlib import Path

from ledger.clock import SystemClock
from ledger.crypto.keys import Keyring
from ledger.facade import Ledger


def ledger_keyring(lg: Ledger, directory: Path) -> Keyring:
    """The keyring in ``directory``, with an active key for ``lg``'s origin."""
    ring = Keyring.load(directory)
    if not ring.active(lg.meta.origin):
        ring.generate(lg.meta.origin, SystemClock().now_us())
    return ring
