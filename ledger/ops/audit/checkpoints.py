"""``ledger audit --checkpoint FILE``: the ledger must extend checkpoints kept outside it.

This is what catches a rewritten tail (recomputed, self-consistent chain) or a
truncated ledger, which the chain walk alone cannot see.  Each checkpoint's
findings are added to the audit report as ledger-level findings; without
``--key`` the checkpoint's signature cannot be checked, which is an abstention
(the consistency check still runs on the auditor's copy).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from ledger.core.finding import CHECKPOINT_FINDING_KEYS, Abstention, Finding
from ledger.crypto.keys import known_keys, load_public_keys
from ledger.errors import UsageError
from ledger.ops.checkpoint import checkpoint_findings
from ledger.ops.context import LedgerContext


def check_checkpoints(ctx: LedgerContext, paths: Sequence[str], key_paths: Sequence[str],
                      ) -> tuple[list[Finding], list[Abstention]]:
    """Check each checkpoint file: its findings (as reported, each with its
    ``checkpoint``) and the abstentions of the signatures not checked (no ``--key``)."""
    refs = [ref for p in key_paths for ref in load_public_keys(p)]
    known = known_keys(refs, ctx.meta.origin) if refs else None
    findings: list[Finding] = []
    abstentions: list[Abstention] = []
    for path in paths:
        try:
            text = Path(path).read_bytes()
        except OSError as exc:
            raise UsageError(f"cannot read checkpoint {path}: {exc.strerror}",
                             field="checkpoint") from None
        findings += [f.with_extra(checkpoint=path).reported(CHECKPOINT_FINDING_KEYS)
                     for f in checkpoint_findings(ctx, text, known)]
        if known is None:
            abstentions.append(Abstention(
                None, "checkpoint_signature", "no_ledger_key",
                f"{path}: no --key given, so its signature was not verified"))
    return findings, abstentions
