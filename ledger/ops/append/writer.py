"""Linking and inserting under the append lock: one transaction, one commit per batch.

``commit_batch`` takes the head lock once per call and commits once: either every
accepted item of the batch is in the ledger, or none is.  ``commit_one_pg`` is the
PostgreSQL one-statement append; ``commit_redaction`` appends redaction entries and erases
what they name in one transaction.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Engine

from ledger.clock import Clock, format_us
from ledger.core.entry import (
    FORMAT_V2,
    SLOTS,
    body_hash,
    column_map,
    hash_hex,
)
from ledger.core.tenant import (
    DEFAULT_TENANT,
    link_parts,
    tenant_entry_hash,
    tenant_genesis,
    tseq_of,
)
from ledger.crypto.trust import time_problem
from ledger.errors import (
    IdempotencyConflict,
    LedgerError,
    QuotaExceeded,
    StoreDataError,
    SubmissionError,
    UsageError,
)
from ledger.ops.append.judge import check_hints, judge_attestation
from ledger.ops.append.prepare import AppendResult, Prepared
from ledger.ops.context import LedgerContext
from ledger.ops.limits import TenantQuotas
from ledger.ops.trust_store import last_key_event_seq
from ledger.store import db, layout, postgres
from ledger.store.append import AppendTxn, append_transaction
from ledger.store.entries import Head

# Re-checks an item's attestation at its final (seq, recorded_at) under the lock:
# None = unchanged; a dict = new attestation fields (re-seal); an error = reject.
Recheck = Callable[[Prepared, int, int], "dict[str, Any] | SubmissionError | None"]


def _same_content(stored: bytes, new: bytes) -> bool:
    """Idempotent replay: the same envelope, ignoring the attestation verdict (which
    may change between the first try and a retry, e.g. when its issuer is trusted).
    A v2 retry is sealed with the stored entry's salts first (``BatchWriter``)."""
    if stored == new:
        return True
    a: dict[str, Any] = json.loads(stored)
    b: dict[str, Any] = json.loads(new)
    a.pop("att_verdict", None)
    b.pop("att_verdict", None)
    return a == b


def _columns(p: Prepared) -> dict[str, Any]:
    return {column: p.fields.get(name)
            for name, column in column_map(p.kind, p.version).items()}


def commit_one_pg(engine: Engine, ledger_id: str, clock: Clock, p: Prepared,
                  quotas: TenantQuotas | None = None) -> AppendResult | None:
    """One entry of any tenant, one statement, one round trip (PostgreSQL, no idempotency
    key, no attestation: an attested entry needs its key events read after the lock is
    taken, so ``append_many`` sends it to commit_batch).

    Returns None — nothing written — when the statement finds no head row to extend, or
    the tenant is at its quota (``quotas``); the caller then uses commit_batch (which
    rejects an item over its quota).  The database's link is checked against
    ``tenant_entry_hash`` before COMMIT (``ledger.store.postgres``); a value the database
    refuses rejects the item.
    """
    row = _columns(p)
    body = body_hash(p.envelope)
    row.update(kind=p.kind, envelope=p.envelope, body_hash=body)
    blobs = p.stored_rows()
    tenant = p.tenant
    # the default tenant's head row always exists (created with the ledger, revision 0013);
    # another tenant's first entry links to its genesis
    genesis = None if tenant == DEFAULT_TENANT else tenant_genesis(ledger_id, tenant)
    try:
        got = postgres.append_one(
            engine, row, blobs, clock.now_us(), link_parts(tenant, body),
            lambda prev, seq, tseq, t: tenant_entry_hash(tenant, prev, seq, tseq, t, body),
            tenant=tenant, genesis=genesis,
            below=None if quotas is None or p.kind != "result" else quotas.of(tenant))
    except StoreDataError as exc:
        return AppendResult(False, error=exc.to_dict(), index=p.index)
    if got is None:
        return None
    return AppendResult(True, got.seq, hash_hex(got.entry_hash), format_us(got.recorded_at),
                        index=p.index, tenant=p.tenant, tseq=got.tseq)


class BatchWriter:
    """Links and inserts prepared items inside one append transaction (lock held).

    ``add`` may be called several times (chunks of one batch); ``finish`` moves the
    head.  Nothing is visible to others until the transaction commits.

    Idempotency: keys are scoped per producer.  An item whose key its producer already
    used (in the ledger or earlier in the batch) with the same envelope is replayed (the
    existing entry is returned); with a different envelope it is rejected with
    ``idempotency_conflict``, naming only that producer's own entry.  Another producer's
    entry under the same key is neither found nor disclosed; nor is the producer's own
    entry in another tenant's chain (a conflict without a seq: keys are unique per
    producer across tenants).
    """

    def __init__(self, txn: AppendTxn, ledger_id: str, clock: Clock,
                 recheck: Recheck | None = None, quotas: TenantQuotas | None = None) -> None:
        self.txn, self.ledger_id, self.recheck, self.quotas = txn, ledger_id, recheck, quotas
        h = txn.lock_head()
        self.now = max(clock.now_us(), h.last_recorded_at)
        self.size, self.prev = h.size, h.head_hash
        self.first = h.size  # the first seq this writer appends
        # tenant -> (next tseq, prev hash) of each tenant this writer has appended to
        self.chains: dict[str, tuple[int, bytes]] = {}
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
                                             format_us(e.recorded_at), replayed=True,
                                             tenant=e.tenant,
                                             tseq=tseq_of(e.tenant, e.seq, e.tseq)),
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
            if prior.tenant is not None and prior.tenant != p.tenant:
                # the producer used the key in another tenant's chain: neither replayed nor
                # named (a tenant never learns of another tenant's entries)
                err = IdempotencyConflict("idempotency_key was already used by this producer",
                                          field="idempotency_key")
                return AppendResult(False, error=err.to_dict(), index=p.index)
            if salts and p.version == FORMAT_V2 and p.kind == "result":
                p.seal(self.ledger_id, salts=salts)  # commitments comparable to the stored
            if _same_content(env, p.envelope):
                return AppendResult(True, prior.seq, prior.entry_hash, prior.recorded_at,
                                    replayed=True, index=p.index, tenant=prior.tenant,
                                    tseq=prior.tseq)
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
        tseq, prev = self._chain(p.tenant)
        limit = None if self.quotas is None or p.kind != "result" else self.quotas.of(p.tenant)
        if limit is not None and tseq >= limit:
            over = QuotaExceeded(f"tenant {p.tenant!r} holds {tseq} entries, its quota is "
                                 f"{limit}: the result was not appended", field="tenant",
                                 detail={"quota": limit, "entries": tseq})
            return AppendResult(False, error=over.to_dict(), index=p.index)
        body = body_hash(p.envelope)
        eh = tenant_entry_hash(p.tenant, prev, self.size, tseq, self.now, body)
        row = _columns(p)
        row.update(seq=self.size, kind=p.kind, recorded_at=self.now, envelope=p.envelope,
                   body_hash=body, prev_hash=prev, entry_hash=eh, tenant=p.tenant, tseq=tseq)
        rows.append(row)
        self.chains[p.tenant] = (tseq + 1, eh)
        blobs.extend((layout.pid(self.size, slot), salt, how, kept)
                     for slot, salt, how, kept in p.stored_rows())
        res = AppendResult(True, self.size, hash_hex(eh), format_us(self.now),
                           index=p.index, tenant=p.tenant, tseq=tseq)
        if key is not None:
            self.known[key] = (p.envelope, res, dict(p.salts))
        self.size, self.prev = self.size + 1, eh
        return res

    def _chain(self, tenant: str) -> tuple[int, bytes]:
        """(tseq, prev_hash) of the next entry of ``tenant``."""
        got = self.chains.get(tenant)
        if got is None:
            got = self.txn.tenant_head(tenant) or (0, tenant_genesis(self.ledger_id, tenant))
            self.chains[tenant] = got
        return got

    def finish(self) -> None:
        if self.wrote:
            self.txn.set_head(Head(self.size, self.prev, self.now))
            self.txn.set_tenant_heads(self.chains)


def _keys_by_producer(prepared: Sequence[Prepared], known: Any) -> dict[str | None, list[str]]:
    """The idempotency keys not yet looked up, grouped by the producer that scopes them."""
    out: dict[str | None, list[str]] = {}
    for p in prepared:
        producer = p.fields.get("producer")
        if p.idempotency_key and (producer, p.idempotency_key) not in known:
            out.setdefault(producer, []).append(p.idempotency_key)
    return out


def commit_batch(engine: Engine, ledger_id: str, clock: Clock, prepared: Sequence[Prepared],
                 recheck: Recheck | None = None, quotas: TenantQuotas | None = None,
                 ) -> list[AppendResult]:
    """Link and insert ``prepared`` under one head lock and one commit.

    An item whose value the database refuses (StoreDataError) is rejected alone:
    the batch is rolled back, each item is tried in a transaction that is rolled
    back, and the others are committed together without the refused ones.  ``quotas``: a
    result beyond its tenant's quota is rejected (``tenant_quota_exceeded``).
    """
    try:
        return _commit(engine, ledger_id, clock, prepared, recheck, quotas)
    except StoreDataError as exc:
        refused = _refused(engine, ledger_id, clock, prepared) if len(prepared) > 1 \
            else {prepared[0].index: exc} if prepared else {}
    if not refused:
        raise StoreDataError("the database refused the batch but no single item of it",
                             code="unstorable_batch")
    rest = [p for p in prepared if p.index not in refused]
    results = _commit(engine, ledger_id, clock, rest, recheck, quotas) if rest else []
    results += [AppendResult(False, error=e.to_dict(), index=i) for i, e in refused.items()]
    return sorted(results, key=lambda r: r.index)


def _commit(engine: Engine, ledger_id: str, clock: Clock, prepared: Sequence[Prepared],
            recheck: Recheck | None, quotas: TenantQuotas | None) -> list[AppendResult]:
    with append_transaction(engine) as txn:
        writer = BatchWriter(txn, ledger_id, clock, recheck, quotas)
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
