"""Appending: validate outside the lock, link and insert inside one transaction.

``commit_batch`` takes the head lock once per call and commits once: either
every accepted item of the batch is in the ledger, or none is.  Rejected items
are reported per item and written to the quarantine table by the caller, in
their own transaction after the batch; they never enter the chain.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Engine

from ledger.clock import Clock, format_us
from ledger.core.canonical import canonical_json
from ledger.core.entry import (
    COLUMN_MAP,
    ENTRY_TAG,
    FORMAT_V2,
    SALT_SIZE,
    SLOTS,
    body_hash,
    build_envelope,
    column_map,
    commitment,
    digest_text,
    entry_hash,
    hash_hex,
    link,
    payload_map,
    version_of,
)
from ledger.core.submission import Submission, loads, parse_submission
from ledger.crypto.attestation import (
    VERDICT_NONE,
    VERDICT_UNCHECKED,
    VERDICT_VALID,
    inspect_attestation,
)
from ledger.crypto.trust import TrustStore, check_attestation, time_problem
from ledger.errors import (
    CanonicalizationError,
    IdempotencyConflict,
    LedgerError,
    StoreDataError,
    SubmissionError,
    UsageError,
)
from ledger.ops.append.quarantine import (  # noqa: F401 - the family's face
    QUARANTINE_MAX_RAW,
    quarantine,
    quarantine_rows,
    storable_text,
)
from ledger.ops.append.quarantine import prune as prune_quarantine  # noqa: F401
from ledger.ops.append.quarantine import status as quarantine_status  # noqa: F401
from ledger.ops.context import LedgerContext
from ledger.ops.trust_store import last_key_event_seq
from ledger.store import codec, db, postgres
from ledger.store.append import AppendTxn, append_transaction
from ledger.store.entries import Head


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
    salts: dict[str, bytes] = field(default_factory=dict)  # v2 result payloads only
    v: int = 0  # envelope version (0: the version of the kind, ledger.core.entry.version_of)
    sealed: dict[str, bytes | None] = field(default_factory=dict)  # payloads as committed
    # name -> (codec, stored bytes) of each present payload: encoded when sealed, before any
    # lock (in a validation worker when the pool runs); ledger.store.codec
    stored: dict[str, tuple[int, bytes]] = field(default_factory=dict)

    @property
    def version(self) -> int:
        return self.v or version_of(self.kind)

    def seal(self, ledger_id: str, salt: Callable[[int], bytes] = os.urandom,
             salts: dict[str, bytes] | None = None) -> Prepared:
        """Compute payload digests (v2 results: salted commitments) and the canonical
        envelope, before any lock is taken.

        ``salt(32)`` draws one salt per present payload of a v2 result (a parameter so
        that vectors are deterministic); ``salts`` reuses given salts by payload name
        (an idempotent replay is compared under the stored salts).  A v2 result's
        subject moves from the fields into the committed ``subject`` payload.
        Raises SubmissionError when a field cannot be canonicalized.
        """
        v = self.version
        fields, payloads = self.fields, self.payloads
        if v == FORMAT_V2 and self.kind == "result":
            subject = fields.get("subject")
            payloads = {name: self.payloads.get(name) for name in SLOTS}
            if subject is not None:
                payloads["subject"] = subject.encode("utf-8")
            fields = {k: x for k, x in fields.items() if k != "subject"}
            given = salts or {}
            self.salts = {n: given.get(n) or salt(SALT_SIZE)
                          for n, data in payloads.items() if data is not None}
            self.digests = {n: (commitment(self.salts[n], data) if data is not None else None)
                            for n, data in payloads.items()}
        else:
            self.digests = {k: (digest_text(x) if x is not None else None)
                            for k, x in payloads.items()}
        self.sealed = payloads
        try:
            self.envelope = build_envelope(ledger_id, self.kind, fields, self.digests, v)
        except CanonicalizationError as exc:
            raise SubmissionError(str(exc), code="invalid_value", field=None) from None
        # how each payload is stored depends on its bytes, slot and being salted only, and a
        # Prepared's payload bytes never change: a seal again (the stored salts of a replay,
        # a rechecked attestation hint) keeps what was already encoded
        slots, stored = payload_map(self.kind, v), self.stored
        for n, data in payloads.items():
            if data is not None and n not in stored:
                stored[n] = codec.encode(slots[n], self.salts.get(n), data)
        return self

    def payload_rows(self) -> list[tuple[int, bytes | None, bytes]]:
        """``(slot, salt, data)`` of every present payload (after :meth:`seal`)."""
        slots = payload_map(self.kind, self.version)
        payloads = self.sealed or self.payloads
        return [(slots[n], self.salts.get(n), data) for n, data in payloads.items()
                if data is not None]

    def stored_rows(self) -> list[tuple[int, bytes | None, int, bytes]]:
        """``(slot, salt, codec, stored bytes)`` of every present payload, as the payload
        table keeps them (after :meth:`seal`)."""
        slots = payload_map(self.kind, self.version)
        payloads = self.sealed or self.payloads
        stored, salts = self.stored, self.salts
        out = []
        for n, data in payloads.items():
            if data is not None:
                how, kept = stored.get(n) or codec.encode(slots[n], salts.get(n), data)
                out.append((slots[n], salts.get(n), how, kept))
        return out


@dataclass(frozen=True)
class Judgement:
    """The attestation verdict of a submission as judged before the lock.

    ``fields`` are the envelope's attestation fields (att_verdict, att_kid, att_iss);
    ``bounds`` the verified token's (iat, exp, nbf) in seconds, or None; ``trust_seq`` the
    last key_event seq the token was judged with, or None when no trust store was used.
    """

    fields: dict[str, Any]
    bounds: tuple[int, int, int | None] | None = None
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


def prepare_result(sub: Submission, producer: str | None, judge: AttestationJudge) -> Prepared:
    verdict = judge(sub)
    fields = {
        "engine": sub.engine, "status": sub.status, "constraint_id": sub.constraint_id,
        "proof_ref": sub.proof_ref, "subject": sub.subject, "producer": producer,
        "idempotency_key": sub.idempotency_key, "admission": sub.admission,
        **check_hints(verdict.fields),
    }
    return Prepared("result", fields, dict(sub.payloads), sub.idempotency_key, sub=sub,
                    att_bounds=verdict.bounds, trust_seq=verdict.trust_seq)


# Re-checks an item's attestation at its final (seq, recorded_at) under the lock:
# None = unchanged; a dict = new attestation fields (re-seal); an error = reject.
Recheck = Callable[[Prepared, int, int], "dict[str, Any] | SubmissionError | None"]


def _same_content(stored: bytes, new: bytes) -> bool:
    """Idempotent replay: the same envelope, ignoring the attestation verdict (which
    may change between the first try and a retry, e.g. when its issuer is trusted).
    A v2 retry is sealed with the stored entry's salts first (``BatchWriter``)."""
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


@dataclass(frozen=True)
class Received:
    """A submission as it arrived: its exact bytes (what a rejection quarantines) and the
    object :func:`loads` parsed them to, possibly with an idempotency key added by the
    receiver -- parsed once, by whoever received it."""

    raw: bytes
    obj: Any


def raw_bytes(item: Any) -> bytes:
    if isinstance(item, Received):
        return item.raw
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
    _validate_into(items, producer, ledger_id, judge, start, prepared, rejected)
    return prepared, rejected


def _validate_into(items: Sequence[Any], producer: str | None, ledger_id: str,
                   judge: AttestationJudge, start: int, prepared: list[Prepared],
                   rejected: list[AppendResult]) -> None:
    for i, item in enumerate(items, start):
        raw = raw_bytes(item)
        try:
            if isinstance(item, Received):
                obj, text = item.obj, True
            else:
                text = isinstance(item, (bytes, str))
                obj = loads(item) if text else item
            p = prepare_result(parse_submission(obj, parsed_by_loads=text), producer,
                               judge).seal(ledger_id)
        except SubmissionError as exc:
            rejected.append(AppendResult(ok=False, error=exc.to_dict(), index=i))
            continue
        p.raw, p.index = raw, i
        prepared.append(p)


# -- validating a large batch on every core ----------------------------------------------
# A batch of at least POOL_MIN_ITEMS texts is validated by this process and a pool of
# worker processes side by side, before the lock is taken (the lock and the commit stay
# single, in this process).  Each worker runs the very code of ``validate_items`` on a
# slice of the texts; an attested item only comes back parsed, and is judged here (the
# trust store is this process's).  Results are merged in input order.  Below the
# threshold (and for single appends) handing the items over costs more than it saves
# (docs/performance.md).  LEDGER_VALIDATE_WORKERS sets the pool size (default 0: no pool).
POOL_MIN_ITEMS = 400
log = logging.getLogger("ledger.ops.append")
_POOL: list[Any] = []  # [ProcessPoolExecutor] once started
_POOL_LOCK = threading.Lock()


def pool_workers() -> int:
    """Worker processes for large batches: LEDGER_VALIDATE_WORKERS (default 0, no pool:
    it pays only where a core is idle, see docs/performance.md)."""
    env = os.environ.get("LEDGER_VALIDATE_WORKERS", "").strip()
    if not env:
        return 0
    try:
        return max(0, int(env))
    except ValueError:
        raise UsageError("LEDGER_VALIDATE_WORKERS must be an integer",
                         field="LEDGER_VALIDATE_WORKERS") from None


def _pool(workers: int) -> Any:
    """The worker processes, started on first use.  Spawned (a worker never inherits this
    process's threads, locks or connections) and started at once, with the caller's
    ``__main__`` hidden while they start: a worker runs only ledger code, so it must not
    import (and run again) the caller's main script, guarded by ``if __name__ ==
    "__main__"`` or not."""
    with _POOL_LOCK:
        if not _POOL:
            import multiprocessing
            import sys
            import types
            from concurrent.futures import ProcessPoolExecutor

            pool = ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"))
            main = sys.modules["__main__"]
            sys.modules["__main__"] = types.ModuleType("__main__")
            try:
                for fut in [pool.submit(pool_workers) for _ in range(workers)]:
                    fut.result()
            except BaseException:
                pool.shutdown(wait=False, cancel_futures=True)
                raise
            finally:
                sys.modules["__main__"] = main
            _POOL.append(pool)
        return _POOL[0]


def shutdown_pool() -> None:
    """Stop the validation workers (they are started again on the next large batch)."""
    with _POOL_LOCK:
        while _POOL:
            _POOL.pop().shutdown(wait=True, cancel_futures=True)


# A worker's answer per item: (index, error dict) | (index, sealed state) | (index, Submission)
_Outcome = tuple[int, Any]


def _validate_slice(texts: list[bytes], producer: str | None, ledger_id: str, start: int,
                    ) -> list[_Outcome]:
    """In a worker: ``validate_items`` of ``texts``, except that an attested item is only
    parsed (its verdict needs the caller's trust store)."""
    out: list[_Outcome] = []
    for i, raw in enumerate(texts, start):
        try:
            sub = parse_submission(loads(raw), parsed_by_loads=True)
            if sub.attestation is not None:
                out.append((i, sub))
                continue
            p = prepare_result(sub, producer, default_judge).seal(ledger_id)
        except SubmissionError as exc:
            out.append((i, exc.to_dict()))
            continue
        # what linking needs, as plain values (pickling the parsed Submission would cost
        # about as much as validating it; the shared bytes objects are pickled once)
        out.append((i, (p.fields, p.payloads, p.digests, p.salts, p.sealed, p.envelope,
                        p.stored)))
    return out


def _unpack(state: tuple[Any, ...]) -> Prepared:
    """A worker's sealed unattested result as a Prepared (``sub`` is None: it is only
    needed to judge an attestation again under the lock)."""
    fields, payloads, digests, salts, sealed, envelope, stored = state
    return Prepared("result", fields, payloads, fields["idempotency_key"], digests=digests,
                    envelope=envelope, salts=salts, sealed=sealed, stored=stored)


def validate_batch(items: Sequence[Any], producer: str | None, ledger_id: str,
                   judge: AttestationJudge, workers: int | None = None,
                   ) -> tuple[list[Prepared], list[AppendResult]]:
    """``validate_items`` for the batches of ``append_many``: the same results (pinned by
    tests/ops/test_validate_pool.py), on several processes when the batch is large and
    every item is text.  ``judge`` must give unattested items the verdict of
    :func:`default_judge` (every judge of this module does)."""
    workers = pool_workers() if workers is None else workers
    if workers < 1 or len(items) < POOL_MIN_ITEMS or \
            not all(type(x) is bytes for x in items):
        return validate_items(items, producer, ledger_id, judge)
    share = len(items) // (workers + 1)  # this process validates the first share
    bounds = [share + (len(items) - share) * k // workers for k in range(workers + 1)]
    try:
        pool = _pool(workers)
        futures = [pool.submit(_validate_slice, list(items[a:b]), producer, ledger_id, a)
                   for a, b in zip(bounds, bounds[1:], strict=False)]
        fut_start = dict(zip(futures, bounds, strict=False))
        fut_end = dict(zip(futures, bounds[1:], strict=False))
    except (OSError, RuntimeError) as exc:  # cannot start processes here: validate alone
        log.warning("validation workers unavailable (%s); validating in this process", exc)
        shutdown_pool()
        return validate_items(items, producer, ledger_id, judge)
    prepared: list[Prepared] = []
    rejected: list[AppendResult] = []
    _validate_into(items[:share], producer, ledger_id, judge, 0, prepared, rejected)
    for fut in futures:
        try:
            outcomes = fut.result()
        except BrokenProcessPool as exc:  # a worker died: do its slice here
            log.warning("a validation worker stopped (%s); validating in this process", exc)
            shutdown_pool()
            outcomes = _validate_slice(list(items[fut_start[fut]:fut_end[fut]]), producer,
                                       ledger_id, fut_start[fut])
        for i, got in outcomes:
            if isinstance(got, dict):
                rejected.append(AppendResult(ok=False, error=got, index=i))
                continue
            if isinstance(got, tuple):
                got = _unpack(got)
            elif isinstance(got, Submission):
                try:
                    got = prepare_result(got, producer, judge).seal(ledger_id)
                except SubmissionError as exc:
                    rejected.append(AppendResult(ok=False, error=exc.to_dict(), index=i))
                    continue
            got.raw, got.index = items[i], i
            prepared.append(got)
    return prepared, rejected


def _columns(p: Prepared) -> dict[str, Any]:
    return {column: p.fields.get(name)
            for name, column in column_map(p.kind, p.version).items()}


def commit_one_pg(engine: Engine, clock: Clock, p: Prepared) -> AppendResult | None:
    """One entry, one statement, one round trip (PostgreSQL, no idempotency key, no
    attestation: an attested entry needs its key events read after the lock is taken,
    so ``append_many`` sends it to commit_batch).

    Returns None — nothing written — when the statement finds no head row to extend;
    the caller then uses commit_batch.  The database's link is checked against
    ``entry_hash`` before COMMIT (``ledger.store.postgres``); a value the database
    refuses rejects the item.
    """
    row = _columns(p)
    body = body_hash(p.envelope)
    row.update(kind=p.kind, envelope=p.envelope, body_hash=body)
    blobs = p.stored_rows()
    try:
        got = postgres.append_one(engine, row, blobs, clock.now_us(),  # type: ignore[arg-type]
                                  ENTRY_TAG, lambda prev, seq, t: entry_hash(prev, seq, t, body))
    except StoreDataError as exc:
        return AppendResult(False, error=exc.to_dict(), index=p.index)
    if got is None:
        return None
    return AppendResult(True, got.seq, hash_hex(got.entry_hash), format_us(got.recorded_at),
                        index=p.index)


class BatchWriter:
    """Links and inserts prepared items inside one append transaction (lock held).

    ``add`` may be called several times (chunks of one batch); ``finish`` moves the
    head.  Nothing is visible to others until the transaction commits.

    Idempotency: keys are scoped per producer.  An item whose key its producer already
    used (in the ledger or earlier in the batch) with the same envelope is replayed (the
    existing entry is returned); with a different envelope it is rejected with
    ``idempotency_conflict``, naming only that producer's own entry.  Another producer's
    entry under the same key is neither found nor disclosed.
    """

    def __init__(self, txn: AppendTxn, ledger_id: str, clock: Clock,
                 recheck: Recheck | None = None) -> None:
        self.txn, self.ledger_id, self.recheck = txn, ledger_id, recheck
        h = txn.lock_head()
        self.now = max(clock.now_us(), h.last_recorded_at)
        self.size, self.prev = h.size, h.head_hash
        self.first = h.size  # the first seq this writer appends
        # (producer, idempotency key) -> (envelope, result, salts by payload name): keys are
        # scoped per producer
        self.known: dict[tuple[str | None, str],
                         tuple[bytes, AppendResult, dict[str, bytes]]] = {}
        self.wrote = False

    def add(self, prepared: Sequence[Prepared]) -> list[AppendResult]:
        for p in prepared:
            if not p.envelope:
                p.seal(self.ledger_id)
        names = {s: n for n, s in SLOTS.items()}
        for producer, keys in _keys_by_producer(prepared, self.known).items():
            for k, e in self.txn.find_idempotent(keys, producer).items():
                self.known[(producer, k)] = (
                    e.envelope, AppendResult(True, e.seq, hash_hex(e.entry_hash),
                                             format_us(e.recorded_at), replayed=True),
                    {names[s]: salt for s, salt in e.salts.items() if s in names})
        results: list[AppendResult] = []
        rows: list[dict[str, Any]] = []
        blobs: list[tuple[int, bytes | None, int, bytes]] = []
        for p in prepared:
            res = self._one(p, rows, blobs)
            results.append(res)
        if rows:
            self.txn.insert_payloads(blobs)
            self.txn.insert_entries(rows)
            self.wrote = True
        return results

    def erase(self, targets: Iterable[tuple[int, int]], redaction_seq: int,
              ) -> list[tuple[int, int]]:
        """Erase payload rows ``(seq, slot)`` for the redaction entry at ``redaction_seq``
        that this writer appended (``add``) in the same transaction; returns the pairs
        that were stored (``ledger.store.append.erase_payloads``).  Raises UsageError
        unless every seq is earlier than ``redaction_seq`` and the redaction entry is
        part of this transaction."""
        pairs = list(targets)
        if not (self.size > redaction_seq >= self.first):
            raise UsageError(f"entry {redaction_seq} was not appended in this transaction",
                             field="redaction_seq")
        late = [s for s, _ in pairs if s >= redaction_seq]
        if late:
            raise UsageError(f"entry {late[0]} is not earlier than redaction {redaction_seq}",
                             code="redaction_target_invalid", field="seq")
        return self.txn.erase_payloads(pairs, redaction_seq)

    def _one(self, p: Prepared, rows: list[dict[str, Any]],
             blobs: list[tuple[int, bytes | None, int, bytes]]) -> AppendResult:
        key = None if p.idempotency_key is None else (p.fields.get("producer"),
                                                      p.idempotency_key)
        if key is not None and key in self.known:
            env, prior, salts = self.known[key]
            if salts and p.version == FORMAT_V2 and p.kind == "result":
                p.seal(self.ledger_id, salts=salts)  # commitments comparable to the stored
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
        row = _columns(p)
        row.update(seq=self.size, kind=p.kind, recorded_at=self.now, envelope=p.envelope,
                   body_hash=e.body_hash, prev_hash=self.prev, entry_hash=e.entry_hash)
        rows.append(row)
        base = self.size * 8
        blobs.extend((base + slot, salt, how, kept) for slot, salt, how, kept in p.stored_rows())
        res = AppendResult(True, self.size, hash_hex(e.entry_hash), format_us(self.now),
                           index=p.index)
        if key is not None:
            self.known[key] = (p.envelope, res, dict(p.salts))
        self.size, self.prev = self.size + 1, e.entry_hash
        return res

    def finish(self) -> None:
        if self.wrote:
            self.txn.set_head(Head(self.size, self.prev, self.now))


def _keys_by_producer(prepared: Sequence[Prepared], known: Any) -> dict[str | None, list[str]]:
    """The idempotency keys not yet looked up, grouped by the producer that scopes them."""
    out: dict[str | None, list[str]] = {}
    for p in prepared:
        producer = p.fields.get("producer")
        if p.idempotency_key and (producer, p.idempotency_key) not in known:
            out.setdefault(producer, []).append(p.idempotency_key)
    return out


def commit_batch(engine: Engine, ledger_id: str, clock: Clock, prepared: Sequence[Prepared],
                 recheck: Recheck | None = None) -> list[AppendResult]:
    """Link and insert ``prepared`` under one head lock and one commit.

    An item whose value the database refuses (StoreDataError) is rejected alone:
    the batch is rolled back, each item is tried in a transaction that is rolled
    back, and the others are committed together without the refused ones.
    """
    try:
        return _commit(engine, ledger_id, clock, prepared, recheck)
    except StoreDataError as exc:
        refused = _refused(engine, ledger_id, clock, prepared) if len(prepared) > 1 \
            else {prepared[0].index: exc} if prepared else {}
    if not refused:
        raise StoreDataError("the database refused the batch but no single item of it",
                             code="unstorable_batch")
    rest = [p for p in prepared if p.index not in refused]
    results = _commit(engine, ledger_id, clock, rest, recheck) if rest else []
    results += [AppendResult(False, error=e.to_dict(), index=i) for i, e in refused.items()]
    return sorted(results, key=lambda r: r.index)


def _commit(engine: Engine, ledger_id: str, clock: Clock, prepared: Sequence[Prepared],
            recheck: Recheck | None) -> list[AppendResult]:
    with append_transaction(engine) as txn:
        writer = BatchWriter(txn, ledger_id, clock, recheck)
        results = writer.add(prepared)
        writer.finish()
    return results


def _refused(engine: Engine, ledger_id: str, clock: Clock, prepared: Sequence[Prepared],
             ) -> dict[int, StoreDataError]:
    """index -> error of the items the database refuses, each tried alone and rolled back."""
    out: dict[int, StoreDataError] = {}
    for p in prepared:
        try:
            with append_transaction(engine, trial=True) as txn:
                BatchWriter(txn, ledger_id, clock).add([p])
        except StoreDataError as exc:
            out[p.index] = exc
    return out


# -- the use case ------------------------------------------------------------------
def append_many(ctx: LedgerContext, submissions: Sequence[Any], *, producer: str | None = None,
                judge: AttestationJudge | None = None) -> list[AppendResult]:
    """Append a batch under one lock and one commit; results in input order.

    Rejected items (contract, format, attestation, idempotency conflict) are
    quarantined and reported with ``ok=False``; they do not stop the others.  Once
    the batch has committed, every stored item is reported even when writing the
    quarantine fails (the quarantine is not part of the chain).
    """
    check_producer(producer)
    if judge is None:
        prepared, rejected = validate_batch(submissions, producer, ctx.ledger_id,
                                            trust_judge(ctx))
    else:
        prepared, rejected = validate_items(submissions, producer, ctx.ledger_id, judge)
    raws = {p.index: p.raw for p in prepared}
    bad = [(raw_bytes(submissions[r.index]), r.error) for r in rejected]
    results = list(rejected)
    committed: list[AppendResult] = []
    try:
        # one statement for a plain single append; an attested one needs its key
        # events read *after* the lock is taken (one statement sees one snapshot)
        if len(prepared) == 1 and prepared[0].idempotency_key is None and \
                prepared[0].sub is not None and prepared[0].sub.attestation is None and \
                ctx.engine.dialect.name == "postgresql":
            one = commit_one_pg(ctx.engine, ctx.clock, prepared[0])
            committed = [one] if one is not None else []
        if prepared and not committed:
            committed = commit_batch(ctx.engine, ctx.ledger_id, ctx.clock, prepared,
                                     trust_recheck(ctx))
    finally:  # rejected items are quarantined even if the batch itself failed
        bad.extend((raws[r.index], r.error) for r in committed if not r.ok)
        if bad:
            quarantine(ctx, bad, producer)
    results.extend(committed)
    results.sort(key=lambda r: r.index)
    return results


def check_producer(producer: str | None) -> None:
    """Raises UsageError unless ``producer`` is None or 1..256 characters of valid text
    without U+0000 (a text column on every engine; PostgreSQL cannot hold NUL)."""
    if producer is None:
        return
    try:
        ok = isinstance(producer, str) and 0 < len(producer) <= 256 and bool(
            producer.encode("utf-8"))
    except UnicodeEncodeError:
        ok = False
    if not ok:
        raise UsageError("producer must be 1..256 characters of valid text", field="producer")
    if "\x00" in producer:
        raise UsageError("producer must not contain U+0000 (NUL)", code="invalid_text",
                         field="producer")


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


def trust_recheck(ctx: LedgerContext) -> Recheck:
    """Under the append lock: judge again only if key events arrived since the item
    was judged; otherwise check the token's time bounds at recorded_at."""
    latest: list[int] = []

    def recheck(p: Prepared, seq: int, recorded_at: int,
                ) -> dict[str, Any] | SubmissionError | None:
        if not latest:
            latest.append(last_key_event_seq(ctx.engine))
        if p.trust_seq is not None and latest[0] != p.trust_seq:
            assert p.sub is not None
            try:
                fields = judge_attestation(p.sub, ctx.trust_store(), seq, recorded_at).fields
            except SubmissionError as exc:
                return exc
            return fields if any(p.fields.get(k) != v for k, v in fields.items()) else None
        if p.att_bounds is not None:
            iat, exp, nbf = p.att_bounds
            bad = time_problem(iat, exp, recorded_at, nbf)
            if bad:
                return SubmissionError(bad[1], code=bad[0], field="attestation")
        return None

    return recheck


# -- redaction: the entry and the erasure in one transaction ----------------------------
@dataclass
class RedactionCommit:
    """One committed redaction entry and the payloads it erased, as (seq, payload name)."""

    result: AppendResult
    erased: list[tuple[int, str]]
    already_erased: list[tuple[int, str]]


def commit_redaction(ctx: LedgerContext, prepared: Sequence[Prepared],
                     erasures: Sequence[Sequence[tuple[int, str]]], *,
                     under_lock: Callable[[AppendTxn], None] | None = None,
                     ) -> list[RedactionCommit]:
    """Append redaction entries and erase the payloads they name, in ONE transaction.

    ``prepared[i]`` is a sealed ``redaction`` entry (``prepare_event("redaction",
    {"producer": ..., "role": ...}, "request", document)``); ``erasures[i]`` the
    ``(seq, payload name)`` pairs its document names (result payload names,
    ``ledger.core.entry.SLOTS``).  Each entry is linked, then its pairs get guard rows in
    ``redacted_payloads`` and their payload rows are deleted
    (``ledger.store.append.erase_payloads``); a pair already erased is reported in
    ``already_erased`` (a no-op).  Either everything commits or nothing does.  On SQLite
    the WAL is checkpointed (TRUNCATE) after the commit, so the erased bytes are gone
    from the WAL too.  Validation of the document (targets exist, are results, holds,
    retention) is the caller's, except what must be decided under the append lock:
    ``under_lock(txn)`` runs once the lock is held, before anything is written, and may
    raise to refuse (the legal holds are checked there: a hold appended by another
    process is either committed before the lock and seen, or appended after the
    erasure).  This raises UsageError for a target that is not earlier than its
    redaction, LedgerError for an entry the batch rejected, and StoreDataError /
    StoreUnavailable (rolled back).
    """
    if len(prepared) != len(erasures):
        raise ValueError("one list of erasures per redaction entry")
    if any(p.kind != "redaction" for p in prepared):
        raise ValueError("commit_redaction appends redaction entries only")
    out: list[RedactionCommit] = []
    with append_transaction(ctx.engine) as txn:
        writer = BatchWriter(txn, ctx.ledger_id, ctx.clock)
        if under_lock is not None:
            under_lock(txn)
        for p, pairs in zip(prepared, erasures, strict=True):
            res = writer.add([p])[0]
            if not res.ok or res.seq is None:
                raise LedgerError("the redaction entry was rejected", code="redaction_rejected",
                                  detail=res.error or {})
            wanted = [(seq, SLOTS[name]) for seq, name in pairs]
            done = set(writer.erase(wanted, res.seq))
            names = {s: n for n, s in SLOTS.items()}
            erased = [(s, names[slot]) for s, slot in sorted(set(wanted)) if (s, slot) in done]
            already = [(s, names[slot]) for s, slot in sorted(set(wanted))
                       if (s, slot) not in done]
            out.append(RedactionCommit(res, erased, already))
        writer.finish()
    db.wal_checkpoint(ctx.engine)
    return out
