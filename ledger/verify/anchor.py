"""The anchoring policy of a verifier: witness quorum and RFC 3161 timestamps (no database).

``check_anchors`` judges one checkpoint note and the timestamp tokens that came with it
against an :class:`AnchorPolicy` and returns findings (dicts like every other report's:
``{code, class, seq, message, expected, actual}``); it never raises for bad data.

    code                      class             when
    cosignature_invalid       signature_invalid a configured witness's line does not verify
    witness_quorum_not_met    unwitnessed       fewer than ``quorum`` valid cosignatures
    timestamp_missing         untimestamped     TSA certificates given, no token
    timestamp_invalid         timestamp_invalid a token fails (``reason``: which check)
    timestamp_before_entry    backdated         the token's time is earlier than the
                                                recorded_at of an entry it covers

A valid token lets the report say that every entry of the checkpoint was recorded no
later than the token's time (``recorded_no_later_than``).
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from ledger.core.cosignature import VerifierKey
from ledger.core.finding import CHECKPOINT_FINDING_KEYS, Finding, FindingClass
from ledger.core.note import parse_note
from ledger.crypto.cosign import check_cosignatures
from ledger.crypto.timestamp import TokenInfo, TsaTrust, verify_token
from ledger.errors import NoteError, TimestampError

# genTime is given to the second by most TSAs (RFC 3161 allows coarser): an entry recorded
# within this much after genTime is not a finding.
TIME_SLACK_US = 1_000_000


@dataclass(frozen=True)
class AnchorPolicy:
    """What a checkpoint must carry to count: ``quorum`` valid cosignatures among
    ``witness_keys``; with ``tsa`` a valid timestamp token."""

    witness_keys: tuple[VerifierKey, ...] = ()
    quorum: int = 0
    tsa: TsaTrust | None = None

    @property
    def active(self) -> bool:
        return bool(self.witness_keys or self.quorum or self.tsa)


@dataclass
class AnchorCheck:
    """The verdict on one checkpoint: ``findings``, valid ``cosigners`` ``{name: time}``
    and the earliest valid ``timestamp``."""

    size: int
    quorum: int
    findings: list[dict[str, Any]] = field(default_factory=list)
    cosigners: dict[str, int] = field(default_factory=dict)
    timestamp: TokenInfo | None = None

    def to_dict(self) -> dict[str, Any]:
        ts = self.timestamp
        return {"size": self.size, "quorum": self.quorum,
                "quorum_met": len(self.cosigners) >= self.quorum,
                "cosigned_by": sorted(self.cosigners),
                "recorded_no_later_than": None if ts is None else ts.gen_time.isoformat(),
                "covers": f"seq 0..{self.size - 1}" if self.size else "nothing"}


def _finding(code: str, cls: FindingClass, seq: int, message: str, expected: Any = None,
             actual: Any = None, **extra: Any) -> dict[str, Any]:
    return Finding(code, seq, cls, message, expected, actual, tuple(extra.items())).to_dict(
        CHECKPOINT_FINDING_KEYS)


def _us(t: datetime) -> int:
    return int((t - datetime(1970, 1, 1, tzinfo=UTC)).total_seconds()) * 1_000_000 + \
        t.microsecond


def check_anchors(note_text: str | bytes, size: int, tokens: Sequence[dict[str, Any]],
                  policy: AnchorPolicy, last_recorded_at_us: int | None = None
                  ) -> AnchorCheck:
    """Judge the note's cosignatures and ``tokens`` (``{token_b64, nonce?}`` each) for the
    checkpoint of ``size`` entries; ``last_recorded_at_us``: the latest recorded_at of an
    entry it covers (None: not known, that check is skipped)."""
    seq = max(size - 1, 0)
    out = AnchorCheck(size, policy.quorum)
    cos = check_cosignatures(note_text, policy.witness_keys)
    out.cosigners = cos.valid
    for name, why in sorted(cos.invalid.items()):
        out.findings.append(_finding("cosignature_invalid", FindingClass.SIGNATURE_INVALID, seq,
                                     f"cosignature of witness {name}: {why}", witness=name))
    if len(cos.valid) < policy.quorum:
        out.findings.append(_finding(
            "witness_quorum_not_met", FindingClass.UNWITNESSED, seq,
            f"{len(cos.valid)} valid cosignature(s) from the given witnesses, need"
            f" {policy.quorum}", expected={"quorum": policy.quorum},
            actual={"cosigned_by": sorted(cos.valid)}))
    if policy.tsa is not None:
        _check_tokens(out, note_text, tokens, policy.tsa, seq, last_recorded_at_us)
    return out


def _check_tokens(out: AnchorCheck, note_text: str | bytes, tokens: Sequence[dict[str, Any]],
                  trust: TsaTrust, seq: int, last_recorded_at_us: int | None) -> None:
    try:
        message = parse_note(note_text).text.encode("utf-8")
    except NoteError:
        return  # a malformed note is already a finding of the signature check
    if not tokens:
        out.findings.append(_finding("timestamp_missing", FindingClass.UNTIMESTAMPED, seq,
                                     "no RFC 3161 timestamp token came with the checkpoint"))
    for n, tok in enumerate(tokens):
        try:
            raw = base64.b64decode(tok.get("token_b64") or "", validate=True)
            nonce = tok.get("nonce")
            info = verify_token(raw, message, trust,
                                None if nonce in (None, "") else int(nonce))
        except (binascii.Error, ValueError) as exc:
            out.findings.append(_finding("timestamp_invalid", FindingClass.TIMESTAMP_INVALID, seq,
                                         f"token {n} is not readable: {exc}",
                                         reason="timestamp_malformed"))
            continue
        except TimestampError as exc:
            out.findings.append(_finding("timestamp_invalid", FindingClass.TIMESTAMP_INVALID, seq,
                                         f"token {n}: {exc.message}", reason=exc.code))
            continue
        if last_recorded_at_us is not None and \
                last_recorded_at_us > _us(info.gen_time) + TIME_SLACK_US:
            out.findings.append(_finding(
                "timestamp_before_entry", FindingClass.BACKDATED, seq,
                f"token {n} says the checkpoint existed at {info.gen_time.isoformat()},"
                " before the recorded_at of an entry it covers",
                expected={"recorded_at_us_at_most": _us(info.gen_time) + TIME_SLACK_US},
                actual={"recorded_at_us": last_recorded_at_us}))
            continue
        if out.timestamp is None or info.gen_time < out.timestamp.gen_time:
            out.timestamp = info
