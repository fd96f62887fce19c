"""The attestation judge of appends (the append family's lowest step: it imports nothing
of ``ledger.ops.append``).

A submission's attestation is judged before the lock (``trust_judge``) and, under the
lock, again only when key events arrived since (``ledger.ops.append``'s writer).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ledger.core.submission import Submission
from ledger.crypto.attestation import (
    VERDICT_NONE,
    VERDICT_UNCHECKED,
    VERDICT_VALID,
    inspect_attestation,
)
from ledger.crypto.trust import TrustStore, check_attestation
from ledger.errors import SubmissionError
from ledger.ops.context import LedgerContext


@dataclass(frozen=True)
class Judgement:
    """The attestation verdict of a submission as judged before the lock.

    ``fields`` are the envelope's attestation fields (att_verdict, att_kid, att_iss);
    ``bounds`` the verified token's (iat, exp, nbf) in seconds, or None; ``trust_seq`` the
    last key_event seq the token was judged with, or None when no trust store was used.
    """

    fields: dict[str, Any]
    bounds: tuple[int | None, int | None, int | None] | None = None
    trust_seq: int | None = None


# Decides the attestation verdict of a submission (the trust store plugs in here).
AttestationJudge = Callable[[Submission], Judgement]


def default_judge(sub: Submission) -> Judgement:
    """No trust store: a token is inspected (must decode) and marked unchecked."""
    return judge_attestation(sub)


MAX_HINT = 512  # att_kid / att_iss column width


def check_hints(fields: dict[str, Any]) -> dict[str, Any]:
    """kid/iss come from the token unverified: bound them before they reach a column."""
    for name in ("att_kid", "att_iss"):
        v = fields.get(name)
        if v is None:
            continue
        if not isinstance(v, str) or len(v) > MAX_HINT or not _encodable(v):
            raise SubmissionError(f"token {name[4:]} must be valid text of at most {MAX_HINT} "
                                  "characters", code="attestation_malformed", field="attestation")
        if "\x00" in v:
            raise SubmissionError(f"token {name[4:]} must not contain U+0000 (NUL): it is "
                                  "stored in a text column, which cannot hold it on every "
                                  "database", code="invalid_text", field="attestation")
    return fields


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
        return True
    except UnicodeEncodeError:
        return False


def judge_attestation(sub: Submission, store: TrustStore | None = None, seq: int = 0,
                      recorded_at: int = 0) -> Judgement:
    """The one attestation judge of appends: ``sub``'s verdict as an entry at
    ``(seq, recorded_at)``.  No token: verdict none.  No trust store: the token is
    inspected (it must decode) and marked unchecked.  With a store: judged; a failure
    raises SubmissionError, an abstention is unchecked, a verified token is valid with
    its (iat, exp, nbf) bounds.  Raises SubmissionError."""
    if sub.attestation is None:
        return Judgement({"att_verdict": VERDICT_NONE, "att_kid": None, "att_iss": None})
    if store is None:
        info = inspect_attestation(sub.attestation)
        return Judgement({"att_verdict": VERDICT_UNCHECKED, "att_kid": info.kid,
                          "att_iss": info.iss})
    r = check_attestation(sub.attestation, store=store, seq=seq, recorded_at_us=recorded_at,
                          proof_ref=sub.proof_ref, query=sub.query, admission=sub.admission,
                          engine=sub.engine)
    if r.disposition == "failed":
        raise SubmissionError(r.message, code=r.code, field="attestation")
    verified = r.disposition == "verified"
    fields = {"att_verdict": VERDICT_VALID if verified else VERDICT_UNCHECKED,
              "att_kid": r.kid, "att_iss": r.iss}
    return Judgement(fields, (r.iat, r.exp, r.nbf) if verified else None, store.last_event_seq)


def trust_judge(ctx: LedgerContext) -> AttestationJudge:
    """The judge of one batch: the trust store is refreshed at most once per batch."""
    cache: list[TrustStore] = []

    def judge(sub: Submission) -> Judgement:
        if sub.attestation is None:
            return default_judge(sub)
        if not cache:
            cache.append(ctx.trust_store())
        store = cache[0]
        return judge_attestation(sub, store, store.last_event_seq + 1, ctx.clock.now_us())

    return judge
