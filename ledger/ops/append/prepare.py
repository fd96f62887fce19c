"""Receiving and validating submissions, before any lock: each item parsed, judged and
sealed into a ``Prepared`` (envelope, digests, stored payload bytes), or rejected.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ledger.core.canonical import canonical_json
from ledger.core.entry import (
    COLUMN_MAP,
    FORMAT_V2,
    SALT_SIZE,
    SLOTS,
    build_envelope,
    commitment,
    digest_text,
    payload_map,
    version_of,
)
from ledger.core.submission import Submission, loads, parse_submission
from ledger.core.tenant import DEFAULT_TENANT
from ledger.errors import CanonicalizationError, SubmissionError, UsageError
from ledger.ops.append.judge import AttestationJudge, check_hints, default_judge
from ledger.store import codec


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
    tenant: str | None = None  # the chain it joined, and its place there (appended only)
    tseq: int | None = None

    def to_dict(self) -> dict[str, Any]:
        if self.ok:
            out: dict[str, Any] = {"ok": True, "seq": self.seq, "entry_hash": self.entry_hash,
                                   "recorded_at": self.recorded_at}
            if self.replayed:
                out["replayed"] = True
            if self.tenant is not None and self.tenant != DEFAULT_TENANT:
                out.update(tenant=self.tenant, tseq=self.tseq)  # its chain and place there
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
    # verified (iat, exp, nbf), seconds (iat, exp None when verified by a key trusted later)
    att_bounds: tuple[int | None, int | None, int | None] | None = None
    trust_seq: int | None = None  # last key_event seq the attestation was judged with
    salts: dict[str, bytes] = field(default_factory=dict)  # v2 result payloads only
    v: int = 0  # envelope version (0: the version of the kind, ledger.core.entry.version_of)
    sealed: dict[str, bytes | None] = field(default_factory=dict)  # payloads as committed
    # name -> (codec, stored bytes) of each present payload: encoded when sealed, before any
    # lock (in a validation worker when the pool runs); ledger.store.codec
    stored: dict[str, tuple[int, bytes]] = field(default_factory=dict)
    tenant: str = DEFAULT_TENANT  # the chain it joins (ledger.core.tenant)

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
    validate_into(items, producer, ledger_id, judge, start, prepared, rejected)
    return prepared, rejected


def validate_into(items: Sequence[Any], producer: str | None, ledger_id: str,
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
