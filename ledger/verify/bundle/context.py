"""What every step of a bundle verification reads, fixed before the rows are walked."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ledger.core.audit_report import RowCounts as RowCounts  # the counts of a walk
from ledger.core.finding import Disposition
from ledger.core.note import Checkpoint
from ledger.core.policy import Policy
from ledger.crypto.keys import PublicKeyRef
from ledger.verify.bundle.files import BundleFiles


@dataclass(frozen=True)
class BundleContext:
    """One verification's settings, its files, and (after the header step) the manifest,
    the checkpoint and the two signature dispositions."""

    files: BundleFiles
    trusted: list[PublicKeyRef] | None  # the verifier's keys; None: only the bundle's own
    policy: Policy
    check_attestations: bool
    manifest: Mapping[str, Any] = field(default_factory=dict)  # {} if unreadable
    checkpoint: Checkpoint | None = None
    signatures: Mapping[str, Disposition] = field(default_factory=dict)
    bundle_keys: list[PublicKeyRef] = field(default_factory=list)  # the bundle's jwks.json

    @property
    def dir(self) -> Path:
        """The bundle directory."""
        return self.files.dir

    @property
    def v2(self) -> bool:
        """A ``ledger-export/2`` bundle: its lines carry tenant and tseq."""
        return self.manifest.get("format") == "ledger-export/2"

    def proven(self) -> Disposition | None:
        """What the checkpoint's signature lends the rows its proofs lead to: verified
        (trusted key), abstained (only the bundle's key), else None (nothing)."""
        disp = self.signatures.get("checkpoint")
        if self.checkpoint is None or disp not in (Disposition.VERIFIED, Disposition.ABSTAINED):
            return None
        return Disposition(disp)

