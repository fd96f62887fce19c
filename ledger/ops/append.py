"""Appending: validate outside the lock, link and insert inside one transaction.

``commit_batch`` takes the head lock once per call and commits once: either
every accepted item of the batch is in the ledger, or none is.  Rejected items
are reported per item and written to the quarantine table by the caller, in
their own transaction after the batch; they never enter the chain.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Engine
from sqlalchemy.exc import DBAPIError

from ledger.clock import Clock, format_us
from ledger.core.canonical import CanonicalizationError, canonical_json
from ledger.core.entry import (
    COLUMN_MAP,
    ENTRY_TAG,
    PAYLOAD_MAP,
    body_hash,
    build_envelope,
    digest_text,
    entry_hash,
    hash_hex,
    link,
)
from ledger.core.submission import Submission, loads, parse_submission
from ledger.crypto.attestation import VERDICT_NONE, VERDICT_UNCHECKED, inspect_attestation
from ledger.errors import IdempotencyConflict, LedgerError, StoreUnavailable, SubmissionError
from ledger.store import repository as repo


@dataclass
class AppendResult:
    """The outcome for one submission: appended, replayed, or rejected."""

    ok: bool
    seq: int | None = None
    entry_hash: str | None = None
    recorded_at: str | None = None
    replayed: bool = False
    error: dict[str, Any] | None = None
    index: int = 0

    def to_dict(self) -> dict[str, Any]:
        if self.ok:
            out: dict[str, Any] = {"ok": True, "seq": self.seq, "entry_hash": self.entry_hash,
                                   "recorded_at": self.recorded_at}
            if self.replayed:
                out["replayed"] = True
            return out
        return {"ok": False, "error": self.error}


@dataclass
class Prepared:
    """A validated item ready to link: envelope fields, payload bytes, the envelope."""

    kind: str
    fields: dict[str, Any]
    payloads: dict[str, bytes | None]
    idempotency_key: str | None = None
    raw: bytes = b""
    index: int = 0
    digests: dict[str, str | None] = field(default_factory=dict)
    envelope: bytes = b""
    sub: Submission | None = None  # for re-judging the attestation under the lock
    att_bounds: tuple[int, int, int | None] | None = None  # verified (iat, exp, nbf), seconds
    trust_seq: int | None = None  # last key_event seq the attestation was judged with

    def seal(self, ledger_id: str) -> Prepared:
        """Compute payload digests and the canonical envelope (before any lock is taken).

        Raises SubmissionError when a field cannot be canonicalized.
        """
        self.digests = {k: (digest_text(v) if v is not None else None)
                        for k, v in self.payloads.items()}
        try:
            self.envelope = build_envelope(ledger_id, self.kind, self.fields, self.digests)
        except CanonicalizationError as exc:
            raise SubmissionError(str(exc), code="invalid_value", field=None) from None
        return self


# Decides the attestation verdict fields for a submission; issue-3 trust store plugs in here.
AttestationJudge = Callable[[Submission], dict[str, Any]]


def default_judge(sub: Submission) -> dict[str, Any]:
    """No trust store: a token is inspected (must decode) and marked unchecked."""
    if sub.attestation is None:
        return {"att_verdict": VERDICT_NONE, "att_kid": None, "att_iss": None}
    info = inspect_attestation(sub.attestation)
    return {"att_verdict": VERDICT_UNCHECKED, "att_kid": info.kid, "att_iss": info.iss}


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
    return fields


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
        return True
    except UnicodeEncodeError:
        return False


def prepare_result(sub: Submission, producer: str | None, judge: AttestationJudge) -> Prepared:
    verdict = dict(judge(sub))
    bounds, trust_seq = verdict.pop("_bounds", None), verdict.pop("_trust_seq", None)
    fields = {
        "engine": sub.engine, "status": sub.status, "constraint_id": sub.constraint_id,
        "proof_ref": sub.proof_ref, "subject": sub.subject, "producer": producer,
        "idempotency_key": sub.idempotency_key, "admission": sub.admission,
        **check_hints(verdict),
    }
    return Prepared("result", fields, dict(sub.payloads), sub.idempotency_key, sub=sub,
                    att_bounds=bounds, trust_seq=trust_seq)


# Re-checks an item's attestation at its final (seq, recorded_at) under the lock:
# None = unchanged; a dict = new attestation fields (re-seal); an error = reject.
Recheck = Callable[[Prepared, int, int], "dict[str, Any] | SubmissionError | None"]


def _same_content(stored: bytes, new: bytes) -> bool:
    """Idempotent replay: the same envelope, ignoring the attestation verdict (which
    may change between the first try and a retry, e.g. when its issuer is trusted)."""
    if stored == new:
        return True
    a, b = json.loads(stored), json.loads(new)
    a.pop("att_verdict", None)
    b.pop("att_verdict", None)
    return a == b


def prepare_event(kind: str, fields: dict[str, Any], payload_name: str, doc: dict[str, Any],
                  ) -> Prepared:
    """A non-result entry (key_event, audit_run, ...) whose document is canonical JSON."""
    missing = set(COLUMN_MAP[kind]) - fields.keys()
    if missing:
        raise ValueError(f"{kind} fields missing: {sorted(missing)}")
    return Prepared(kind, fields, {payload_name: canonical_json(doc)})


def raw_bytes(item: Any) -> bytes:
    if isinstance(item, bytes):
        return item
    if isinstance(item, str):
        return item.encode("utf-8", "surrogatepass")
    
    try:
        return json.dumps(item, ensure_ascii=False, allow_nan=True).encode("utf-8", "surrogatepass")
    except (TypeError, ValueError):
        return repr(item).encode("utf-8", "surrogatepass")


def validate_items(items: Sequence[Any], producer: str | None, ledger_id: str,
                   judge: AttestationJudge = default_judge, start: int = 0,
                   ) -> tuple[list[Prepared], list[AppendResult]]:
    """Validate and seal each item (bytes, str or an already-parsed object); results
    are indexed from ``start``."""
    prepared: list[Prepared] = []
    rejected: list[AppendResult] = []
    for i, item in enumerate(items, start):
        raw = raw_bytes(item)
        try:
            text = isinstance(item, (bytes, str))
            obj = loads(item) if text else item
            p = prepare_result(parse_submission(obj, parsed_by_loads=text), producer,
                               judge).seal(ledger_id)
        except SubmissionError as exc:
            rejected.append(AppendResult(ok=False, error=exc.to_dict(), index=i))
            continue
        p.raw, p.index = raw, i
        prepared.append(p)
    return prepared, rejected


def _columns(p: Prepared, digests: dict[str, str | None]) -> dict[str, Any]:
    cols = {column: p.fields.get(name) for name, column in COLUMN_MAP[p.kind].items()}
    for name, column in PAYLOAD_MAP[p.kind].items():
        cols[column] = digests.get(name)
    return cols


def commit_one_pg(engine: Engine, clock: Clock, p: Prepared) -> AppendResult | None:
    """One entry, one statement, one round trip (PostgreSQL, no idempotency key).

    Returns None — nothing written — when the entry cannot be decided in one
    statement: its attestation would be expired at the recorded time, or key
    events arrived since it was judged.  The caller then uses commit_batch.
    """
    row = _columns(p, p.digests)
    body = body_hash(p.envelope)
    row.update(kind=p.kind, envelope=p.envelope, body_hash=body)
    blobs = {p.digests[k]: v for k, v in p.payloads.items() if v is not None}
    guard = None
    if p.sub is not None and p.sub.attestation is not None:
        exp = min(p.att_bounds[1] * 1_000_000, repo.MAX_BIGINT) if p.att_bounds \
            else repo.MAX_BIGINT
        guard = (exp, -1 if p.trust_seq is None else p.trust_seq)
    try:
        with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            got = repo.pg_append_one(conn, row, blobs, clock.now_us(),  # type: ignore[arg-type]
                                     ENTRY_TAG, guard)
    except DBAPIError as exc:
        raise StoreUnavailable(f"append failed: {exc.orig}") from exc
    if got is None:
        return None
    seq, t, prev, eh = got
    if eh != entry_hash(prev, seq, t, body):
        raise LedgerError(f"database computed a different link for seq {seq}",
                          code="link_mismatch")
    return AppendResult(True, seq, hash_hex(eh), format_us(t), index=p.index)


class BatchWriter:
    """Links and inserts prepared items inside one append transaction (lock held).

    ``add`` may be called several times (chunks of one batch); ``finish`` moves the
    head.  Nothing is visible to others until the transaction commits.

    Idempotency: an item whose key is already in the ledger (or earlier in the
    batch) with the same envelope is replayed (the existing entry is returned);
    with a different envelope it is rejected with ``idempotency_conflict``.
    """

    def __init__(self, txn: repo.AppendTxn, ledger_id: str, clock: Clock,
                 recheck: Recheck | None = None) -> None:
        self.txn, self.ledger_id, self.recheck = txn, ledger_id, recheck
        h = txn.lock_head()
        self.now = max(clock.now_us(), h.last_recorded_at)
        self.size, self.prev = h.size, h.head_hash
        self.known: dict[str, tuple[bytes, AppendResult]] = {}
        self.wrote = False

    def add(self, prepared: Sequence[Prepared]) -> list[AppendResult]:
        for p in prepared:
            if not p.envelope:
                p.seal(self.ledger_id)
        keys = [p.idempotency_key for p in prepared
                if p.idempotency_key and p.idempotency_key not in self.known]
        for k, (seq, env, eh, t) in self.txn.find_idempotent(keys).items():
            self.known[k] = (bytes(env), AppendResult(True, seq, hash_hex(bytes(eh)),
                                                      format_us(t), replayed=True))
        results: list[AppendResult] = []
        rows: list[dict[str, Any]] = []
        blobs: dict[str, bytes] = {}
        for p in prepared:
            res = self._one(p, rows, blobs)
            results.append(res)
        if rows:
            self.txn.insert_payloads(blobs)
            self.txn.insert_entries(rows)
            self.wrote = True
        return results

    def _one(self, p: Prepared, rows: list[dict[str, Any]], blobs: dict[str, bytes],
             ) -> AppendResult:
        key = p.idempotency_key
        if key is not None and key in self.known:
            env, prior = self.known[key]
            if _same_content(env, p.envelope):
                return AppendResult(True, prior.seq, prior.entry_hash, prior.recorded_at,
                                    replayed=True, index=p.index)
            err = IdempotencyConflict(
                f"idempotency_key was used for entry {prior.seq} with other content",
                field="idempotency_key", detail={"seq": prior.seq})
            return AppendResult(False, error=err.to_dict(), index=p.index)
        if self.recheck is not None and p.sub is not None and p.sub.attestation is not None:
            change = self.recheck(p, self.size, self.now)
            if isinstance(change, SubmissionError):
                return AppendResult(False, error=change.to_dict(), index=p.index)
            if change:
                p.fields.update(check_hints(change))
                p.seal(self.ledger_id)
        e = link(self.prev, self.size, self.now, p.envelope)
        row = _columns(p, p.digests)
        row.update(seq=self.size, kind=p.kind, recorded_at=self.now, envelope=p.envelope,
                   body_hash=e.body_hash, prev_hash=self.prev, entry_hash=e.entry_hash)
        rows.append(row)
        for k, v in p.payloads.items():
            if v is not None:
                blobs[p.digests[k]] = v  # type: ignore[index]
        res = AppendResult(True, self.size, hash_hex(e.entry_hash), format_us(self.now),
                           index=p.index)
        if key is not None:
            self.known[key] = (p.envelope, res)
        self.size, self.prev = self.size + 1, e.entry_hash
        return res

    def finish(self) -> None:
        if self.wrote:
            self.txn.set_head(repo.Head(self.size, self.prev, self.now))


def commit_batch(engine: Engine, ledger_id: str, clock: Clock, prepared: Sequence[Prepared],
                 recheck: Recheck | None = None) -> list[AppendResult]:
    """Link and insert ``prepared`` under one head lock and one commit."""
    with repo.append_transaction(engine) as txn:
        writer = BatchWriter(txn, ledger_id, clock, recheck)
        results = writer.add(prepared)
        writer.finish()
    return results


QUARANTINE_MAX_RAW = 64 * 1024  # a rejected submission is kept up to this many bytes


def quarantine_rows(clock: Clock, producer: str | None,
                    items: Sequence[tuple[bytes, LedgerError | dict[str, Any]]],
                    ) -> list[dict[str, Any]]:
    """Quarantine rows; a raw submission over QUARANTINE_MAX_RAW bytes is kept
    truncated (its full size is in the message), so rejects cannot fill the disk."""
    now = clock.now_us()
    rows = []
    for raw, err in items:
        d = err.to_dict() if isinstance(err, LedgerError) else err
        message = d["message"]
        if len(raw) > QUARANTINE_MAX_RAW:
            message += f" [raw submission of {len(raw)} bytes kept truncated to " \
                       f"{QUARANTINE_MAX_RAW}]"
            raw = raw[:QUARANTINE_MAX_RAW]
        rows.append({"received_at": now, "code": d["code"], "field": d.get("field"),
                     "message": message, "producer": producer, "raw": raw})
    return rows
