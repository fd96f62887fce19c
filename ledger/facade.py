"""The public Python API: ``Ledger.open(url)`` and its use cases."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable, Sequence
from typing import Any

from sqlalchemy import Engine
from sqlalchemy.exc import OperationalError, ProgrammingError

from ledger.clock import Clock, SystemClock, format_us
from ledger.core.entry import FORMAT_VERSION, PAYLOAD_MAP, genesis_hash, hash_hex
from ledger.core.note import check_origin
from ledger.crypto.attestation import VERDICT_UNCHECKED, VERDICT_VALID
from ledger.crypto.trust import TrustStore, check_attestation, time_problem
from ledger.errors import (
    NotFound,
    NotInitialized,
    StoreUnavailable,
    SubmissionError,
    UsageError,
)
from ledger.ops.append import (
    AppendResult,
    AttestationJudge,
    Recheck,
    commit_batch,
    commit_one_pg,
    default_judge,
    quarantine_rows,
    raw_bytes,
    validate_items,
)
from ledger.ops.trust import (
    append_events,
    end_event,
    last_key_event_seq,
    load_trust_store,
    trust_events,
)
from ledger.store import db
from ledger.store import repository as repo


class Ledger:
    """One ledger in one database (SQLite file or PostgreSQL database/schema)."""

    def __init__(self, engine: Engine, meta: repo.LedgerMeta, clock: Clock | None = None,
                 judge: AttestationJudge | None = None) -> None:
        self.engine = engine
        self.meta = meta
        self.clock = clock or SystemClock()
        self.judge = judge
        self._trust: TrustStore | None = None

    # -- lifecycle --------------------------------------------------------
    @classmethod
    def init(cls, url: str | None = None, *, origin: str | None = None,
             clock: Clock | None = None) -> Ledger:
        """Create the schema (migrations) and the ledger identity if absent; idempotent.
        Raises UsageError (``bad_origin``) for an origin no signing key can be named after."""
        if origin is not None:
            check_origin(origin)
        clock = clock or SystemClock()
        engine = db.make_engine(url or db.default_url(), create=True)
        try:
            db.upgrade(engine)
            with db.write_connection(engine) as conn, conn.begin():
                meta = repo.read_meta(conn)
                if meta is None:
                    ledger_id = str(uuid.uuid4())
                    meta = repo.LedgerMeta(ledger_id, origin or f"ledger/{ledger_id}",
                                           FORMAT_VERSION, clock.now_us())
                    repo.create_meta(conn, meta, genesis_hash(ledger_id))
        except BaseException:
            engine.dispose()
            raise
        return cls(engine, meta, clock)

    @classmethod
    def open(cls, url: str | None = None, *, clock: Clock | None = None) -> Ledger:
        """Open an initialized ledger.  Raises NotInitialized or StoreUnavailable."""
        engine = db.make_engine(url or db.default_url())
        try:
            with engine.connect() as conn:
                meta = repo.read_meta(conn)
        except (OperationalError, ProgrammingError) as exc:
            engine.dispose()
            if "no such table" in str(exc) or "does not exist" in str(exc):
                raise NotInitialized("the ledger is not initialized here; run `ledger init`"
                                     ) from exc
            raise StoreUnavailable(f"cannot reach the database: {exc.orig}") from exc
        if meta is None:
            engine.dispose()
            raise NotInitialized("the ledger is not initialized here; run `ledger init`")
        return cls(engine, meta, clock)

    def close(self) -> None:
        self.engine.dispose()

    def __enter__(self) -> Ledger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- appends ----------------------------------------------------------
    def append(self, submission: Any, *, producer: str | None = None) -> AppendResult:
        """Append one submission (bytes, JSON text or a parsed object)."""
        return self.append_many([submission], producer=producer)[0]

    def append_many(self, submissions: Sequence[Any], *, producer: str | None = None,
                    ) -> list[AppendResult]:
        """Append a batch under one lock and one commit; results in input order.

        Rejected items (contract, format, attestation, idempotency conflict) are
        quarantined and reported with ``ok=False``; they do not stop the others.
        """
        _check_producer(producer)
        prepared, rejected = validate_items(submissions, producer, self.meta.ledger_id,
                                            self._judge())
        raws = {p.index: p.raw for p in prepared}
        bad = [(raw_bytes(submissions[r.index]), r.error) for r in rejected]
        results = list(rejected)
        committed: list[AppendResult] = []
        try:
            # one statement for a plain single append; an attested one needs its key
            # events read *after* the lock is taken (one statement sees one snapshot)
            if len(prepared) == 1 and prepared[0].idempotency_key is None and \
                    prepared[0].sub is not None and prepared[0].sub.attestation is None and \
                    self.engine.dialect.name == "postgresql":
                one = commit_one_pg(self.engine, self.clock, prepared[0])
                committed = [one] if one is not None else []
            if prepared and not committed:
                committed = commit_batch(self.engine, self.meta.ledger_id, self.clock,
                                         prepared, self._recheck())
        finally:  # rejected items are quarantined even if the batch itself failed
            bad.extend((raws[r.index], r.error) for r in committed if not r.ok)
            if bad:
                self._quarantine(bad, producer)
        results.extend(committed)
        results.sort(key=lambda r: r.index)
        return results

    # -- trust store ----------------------------------------------------------
    def trust_store(self, refresh: bool = True) -> TrustStore:
        """The attestation trust store folded from key_event entries (cached)."""
        if self._trust is None:
            self._trust = load_trust_store(self.engine)
        elif refresh and last_key_event_seq(self.engine) > self._trust.last_event_seq:
            self._trust = load_trust_store(self.engine, self._trust)
        return self._trust

    def _judge(self) -> AttestationJudge:
        if self.judge is not None:
            return self.judge
        ledger = self
        cache: list[TrustStore] = []  # refreshed at most once per batch

        def judge(sub: Any) -> dict[str, Any]:
            if sub.attestation is None:
                return default_judge(sub)
            if not cache:
                cache.append(ledger.trust_store())
            store = cache[0]
            fields = _judged(sub, store, store.last_event_seq + 1, ledger.clock.now_us())
            return {**fields, "_trust_seq": store.last_event_seq}

        return judge

    def _recheck(self) -> Recheck:
        """Under the append lock: judge again only if key events arrived since the
        item was judged; otherwise check the token's time bounds at recorded_at."""
        ledger = self
        latest: list[int] = []

        def recheck(p: Any, seq: int, recorded_at: int) -> Any:
            if not latest:
                latest.append(last_key_event_seq(ledger.engine))
            if p.trust_seq is not None and latest[0] != p.trust_seq:
                try:
                    fields = _judged(p.sub, ledger.trust_store(), seq, recorded_at)
                except SubmissionError as exc:
                    return exc
                fields.pop("_bounds", None)
                return fields if any(p.fields.get(k) != v for k, v in fields.items()) else None
            if p.att_bounds is not None:
                iat, exp, nbf = p.att_bounds
                bad = time_problem(iat, exp, recorded_at, nbf)
                if bad:
                    return SubmissionError(bad[1], code=bad[0], field="attestation")
            return None

        return recheck

    def trust_issuer(self, issuer: str, jwks: dict[str, Any], *, reason: str | None = None,
                     producer: str | None = None) -> list[AppendResult]:
        """Append one ``trust`` key event per new key of ``jwks``."""
        events = trust_events(self.trust_store(), issuer, jwks, reason, producer)
        return append_events(self.engine, self.meta.ledger_id, self.clock, events)

    def end_key(self, action: str, kid: str, *, reason: str | None = None,
                producer: str | None = None, compromised_since_us: int | None = None,
                thumbprint: str | None = None) -> list[AppendResult]:
        """Append a ``retire`` or ``revoke`` key event for an active key."""
        ev = end_event(self.trust_store(), action, kid, reason, producer,
                       compromised_since_us, thumbprint)
        return append_events(self.engine, self.meta.ledger_id, self.clock, [ev])

    def _quarantine(self, bad: list[tuple[bytes, Any]], producer: str | None) -> None:
        rows = quarantine_rows(self.clock, producer, bad)
        with db.write_connection(self.engine) as conn, conn.begin():
            repo.insert_quarantine(conn, rows)

    # -- reads ------------------------------------------------------------
    def head(self) -> dict[str, Any]:
        with self.engine.connect() as conn:
            h = repo.read_head(conn)
        assert h is not None
        return {"ledger_id": self.meta.ledger_id, "origin": self.meta.origin,
                "size": h.size, "head_hash": hash_hex(h.head_hash),
                "last_recorded_at": format_us(h.last_recorded_at) if h.size else None}

    def get(self, seq: int) -> dict[str, Any]:
        """One entry with its payloads.  Raises NotFound."""
        with self.engine.connect() as conn:
            row = repo.get_entry(conn, seq)
            if row is None:
                raise NotFound(f"no entry with seq {seq}", field="seq")
            cols = PAYLOAD_MAP[row.kind]
            blobs = repo.get_payloads(conn, [getattr(row, c) for c in cols.values()])
        return entry_view(row, blobs)

    def iter_entries(self, start: int = 0, end: int | None = None) -> Iterable[Any]:
        with self.engine.connect() as conn:
            yield from repo.iter_entries(conn, start, end)

    # -- queries and exports (ledger/ops/query.py, ledger/ops/export.py) ---------------
    def query(self, **filters: Any) -> Any:
        """One keyset page (``QueryPage``: ``rows``, ``next_after``) of the entries matching
        ``filters`` (see ``ledger.ops.query.make_filters``), with ``after=``, ``limit=`` and
        ``layer=`` (agent, developer, auditor; default agent).  Raises UsageError."""
        from ledger.ops.query import make_filters, query

        page = {k: filters.pop(k) for k in ("after", "limit", "layer") if k in filters}
        return query(self.engine, make_filters(**filters), **page)

    def export(self, out_dir: Any, **kw: Any) -> dict[str, Any]:
        """Write a verifiable export bundle to ``out_dir`` and return its manifest.  ``kw``:
        ``signer`` (``ledger.ops.export.Signer``) or ``keys`` (keyring directory) or
        ``key_file`` (PEM); ``proofs``; and the filters of :meth:`query`."""
        from ledger.crypto.keys import Keyring
        from ledger.ops.export import export_bundle, signer_from_keyring, signer_from_pem
        from ledger.ops.query import make_filters

        signer, keys, key_file = kw.pop("signer", None), kw.pop("keys", None), \
            kw.pop("key_file", None)
        proofs = kw.pop("proofs", "interval")
        if signer is None:
            signer = signer_from_pem(key_file, self.meta.origin, self.clock.now_us()) \
                if key_file else signer_from_keyring(Keyring.load(keys), self.meta.origin)
        return export_bundle(self, out_dir, signer, make_filters(**kw), proofs=proofs)


def _judged(sub: Any, store: TrustStore, seq: int, recorded_at: int) -> dict[str, Any]:
    """Attestation fields for an entry at (seq, recorded_at); raises SubmissionError."""
    r = check_attestation(sub.attestation, store=store, seq=seq, recorded_at_us=recorded_at,
                          proof_ref=sub.proof_ref, query=sub.query, admission=sub.admission,
                          engine=sub.engine)
    if r.disposition == "failed":
        raise SubmissionError(r.message, code=r.code, field="attestation")
    verdict = VERDICT_VALID if r.disposition == "verified" else VERDICT_UNCHECKED
    out: dict[str, Any] = {"att_verdict": verdict, "att_kid": r.kid, "att_iss": r.iss}
    if r.disposition == "verified":
        out["_bounds"] = (r.iat, r.exp, r.nbf)
    return out


def _check_producer(producer: str | None) -> None:
    if producer is None:
        return
    try:
        ok = isinstance(producer, str) and 0 < len(producer) <= 256 and bool(
            producer.encode("utf-8"))
    except UnicodeEncodeError:
        ok = False
    if not ok:
        raise UsageError("producer must be 1..256 characters of valid text", field="producer")


def entry_view(row: Any, blobs: dict[str, bytes]) -> dict[str, Any]:
    """A JSON-ready view of a stored entry (auditor layer: everything)."""
    cols = PAYLOAD_MAP[row.kind]
    payloads: dict[str, Any] = {}
    for name, column in cols.items():
        digest = getattr(row, column)
        if digest is None:
            continue
        data = blobs.get(digest)
        payloads[name] = {"digest": digest,
                          "text": data.decode("utf-8") if data is not None else None,
                          "missing": data is None}
    doc = payloads.get("result") or payloads.get("event") or payloads.get("report")
    parsed = json.loads(doc["text"]) if doc and doc["text"] else None
    return {
        "seq": row.seq, "kind": row.kind, "recorded_at": format_us(row.recorded_at),
        "engine": row.engine, "status": row.status, "constraint_id": row.constraint_id,
        "proof_ref": row.proof_ref, "subject": row.subject, "producer": row.producer,
        "idempotency_key": row.idempotency_key, "admission": row.admission,
        "attestation_verdict": row.att_verdict, "attestation_kid": row.att_kid,
        "attestation_iss": row.att_iss,
        "document": parsed, "payloads": payloads,
        "envelope": bytes(row.envelope).decode("utf-8"),
        "body_hash": hash_hex(bytes(row.body_hash)),
        "prev_hash": hash_hex(bytes(row.prev_hash)),
        "entry_hash": hash_hex(bytes(row.entry_hash)),
    }
