"""``ledger audit --checkpoint FILE --witness-key ... --quorum N --tsa-certs ...``: the
anchoring policy applied to the checkpoints an auditor kept.

Each checkpoint file is judged by :func:`ledger.verify.anchor.check_anchors` with the
timestamp tokens found for it: a sidecar ``FILE.tsr`` (DER, as ``ledger checkpoint --out
FILE`` writes it) and those stored in the ledger for that size (a token binds the
checkpoint text, so the database cannot forge one).  Findings join the report as
ledger-level findings; the report's ``anchors`` say, per checkpoint, who cosigned and the
time every entry it covers was recorded no later than.
"""

from __future__ import annotations

import base64
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ledger.core.cosignature import COSIGNATURE_TYPE
from ledger.core.finding import Finding
from ledger.core.note import parse_checkpoint_body, parse_note
from ledger.crypto.cosign import load_vkeys
from ledger.crypto.timestamp import load_tsa_trust
from ledger.errors import NoteError, UsageError
from ledger.ops.checkpoint.anchor import timestamps_of
from ledger.ops.context import LedgerContext
from ledger.store.anchors import last_recorded_at
from ledger.verify.anchor import AnchorPolicy, check_anchors

SIDECAR_SUFFIX = ".tsr"


def sidecar_tokens(path: str | Path) -> list[dict[str, Any]]:
    """The token of ``<path>.tsr`` if that file exists (its nonce is not known)."""
    side = Path(str(path) + SIDECAR_SUFFIX)
    if not side.is_file():
        return []
    return [{"tsa": side.name, "token_b64": base64.b64encode(side.read_bytes()).decode(),
             "nonce": None}]


def apply_anchor_policy(ctx: LedgerContext, paths: Sequence[str], policy: AnchorPolicy,
                        ) -> tuple[list[Finding], list[dict[str, Any]]]:
    """Judge each checkpoint file: the findings (as reported, each with its
    ``checkpoint``) and the report's ``anchors``."""
    findings: list[Finding] = []
    anchors = []
    for path in paths:
        text = Path(path).read_bytes()
        try:
            size = parse_checkpoint_body(parse_note(text).text).size
        except NoteError:
            continue  # already a checkpoint_unverified finding
        tokens = sidecar_tokens(path) + timestamps_of(ctx, size)
        check = check_anchors(text, size, tokens, policy, last_recorded_at(ctx.engine, size))
        findings += [Finding.from_json({**f, "checkpoint": path}) for f in check.findings]
        anchors.append({"checkpoint": path, **check.to_dict()})
    return findings, anchors


def anchor_policy_from(witness_key_files: list[str], quorum: int | None,
                       tsa_certs: str | None, tsa_policy: str | None) -> AnchorPolicy | None:
    """The policy of the ``--witness-key --quorum --tsa-certs --tsa-policy`` options (None
    when none is given); the quorum defaults to every key.  Raises UsageError."""
    keys = tuple(dict.fromkeys(k for path in witness_key_files for k in load_vkeys(path)))
    if not keys and quorum is None and tsa_certs is None:
        return None
    # the quorum counts witnesses (distinct names of cosignature keys), not key lines
    witnesses = len({k.name for k in keys if k.type == COSIGNATURE_TYPE})
    quorum = witnesses if quorum is None else quorum
    if quorum > witnesses:
        raise UsageError(f"--quorum {quorum} needs at least {quorum} distinct witnesses in "
                         f"--witness-key, there are {witnesses}", code="bad_quorum",
                         field="quorum")
    tsa = load_tsa_trust(tsa_certs, tsa_policy) if tsa_certs else None
    return AnchorPolicy(keys, quorum, tsa)


def checkpoint_anchors(path: str, data: bytes, size: int, policy: AnchorPolicy
                       ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """``ledger verify-checkpoint`` with the anchoring options, offline: (what the output
    adds: quorum, cosigners, recorded_no_later_than; the findings).  Tokens come from the
    sidecar ``<path>.tsr`` (none for stdin)."""
    tokens = sidecar_tokens(path) if path != "-" else []
    check = check_anchors(data, size, tokens, policy)
    return {k: v for k, v in check.to_dict().items() if k != "size"}, check.findings
