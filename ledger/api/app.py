"""The HTTP service: ``create_app(settings)`` builds one FastAPI application.

One process holds one :class:`Service`: the open ledger, the ledger signing key
(receipts), the token verifier and the group committer -- and, with ``--read-db``, the
read replica that answers the reads (docs/operations.md, "Readers on a replica").  Several processes
(``ledger serve --workers N``, or several hosts against one PostgreSQL) each
hold their own; the database lock serializes their transactions.
"""

from __future__ import annotations

import threading
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from fastapi import FastAPI
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request

from ledger import __version__
from ledger.api import errors
from ledger.api.auth import TokenVerifier
from ledger.api.groupcommit import MeteredCommitter, scope_parts
from ledger.api.limits import OTHER_MAX_BYTES, BodyLimit
from ledger.api.logs import RequestLog
from ledger.api.receipts import sign_batch_receipts, sign_receipt
from ledger.api.schemas import COMMON_ERRORS
from ledger.api.settings import Settings
from ledger.core.submission import MAX_SUBMISSION_BYTES
from ledger.crypto.jwks import JwksSource
from ledger.crypto.keys import Keyring
from ledger.crypto.tokens import ledger_signer
from ledger.errors import LedgerError, NotFound, ReplicaBehind, StoreUnavailable
from ledger.facade import Ledger
from ledger.ops.append import AppendResult, Scope
from ledger.ops.checkpoint import load_anchor_config
from ledger.ops.lifecycle import RAW_CONNECTION_ERRORS
from ledger.ops.tokens import ACCESS_TOKEN_TYP
from ledger.service import metrics
from ledger.service.alerts import AlertSender
from ledger.service.anchoring import CheckpointScheduler
from ledger.service.watch import Watch, WatchConfig

DESCRIPTION = """Append-only, hash-chained, Merkle-committed audit ledger for verification
results.  Every endpoint but `/v1/health`, `/v1/health/live`, `/v1/health/ready` and
`/.well-known/jwks.json` needs a bearer JWT (roles: producer, auditor, developer, agent,
custodian, operator).  Errors are RFC 9457 problem documents
(`application/problem+json`: `type`, `title`, `status`, `detail`, and the extension members
`code`, `field`?, `error`) with the same stable codes as the CLI.  See docs/http.md."""


class Service:
    """What every request of one process shares.  Raises (at construction) the
    errors that keep a service from starting: NotInitialized, StoreUnavailable,
    KeyringError (no active ledger key), UsageError (bad JWKS)."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.ledger = Ledger.open(settings.db_url, quarantine=settings.quarantine_limits())
        # reads (queries, proofs, exports, history, tiles) go to ``reader``: the replica of
        # --read-db, else the primary itself; writes always to ``ledger``
        self.reader = self.ledger
        self.replica: Ledger | None = None
        try:
            if settings.read_db_url:
                self.replica = self.reader = Ledger.open(settings.read_db_url)
                self.ledger.check_replica(self.replica)
            self.origin = self.ledger.meta.origin
            self.keyring = Keyring.load(settings.keys_dir)
            self.signer = ledger_signer(self.keyring, self.origin)
            if settings.external_jwks:
                source = JwksSource(location=settings.external_jwks)
                typs: tuple[str | None, ...] = (ACCESS_TOKEN_TYP, "jwt", None)
            else:
                source = JwksSource(fixed=self.signer.jwks())
                typs = (ACCESS_TOKEN_TYP,)
            self.verifier = TokenVerifier(
                source, issuer=settings.issuer or self.origin,
                audience=settings.audience or self.origin, typs=typs,
                role_claim=settings.role_claim, leeway_s=settings.token_leeway_s)
        except BaseException:
            self.ledger.close()
            if self.replica is not None:
                self.replica.close()
            raise
        self.committer = MeteredCommitter(
            self.append_many, finish=self.finish, max_wait_ms=settings.group_wait_ms,
            max_items=settings.group_max_items, max_queue=settings.queue_max)
        self.checkpoint_lock = threading.Lock()
        self.scheduler = CheckpointScheduler.from_settings(
            self.ledger, self.keyring, settings.checkpoint_every, settings.anchors_file)
        self.watch = build_watch(self)

    def append_many(self, items: Any, scope: Scope) -> list[AppendResult]:
        """Append ``items`` for ``scope``: a producer (the default tenant), or
        ``(producer, tenant)`` for a token with a tenant (``append_scope``)."""
        producer, tenant = scope_parts(scope)
        try:
            results = self.ledger.append_many(items, producer=producer, tenant=tenant)
        except Exception as exc:
            metrics.count_error(exc, len(items))
            raise
        metrics.count_results(results)
        return results

    def key_loaded(self) -> bool:
        """The ledger signing key was loaded (receipts can be signed)."""
        return self.signer is not None and self.signer.kid is not None

    def finish(self, results: list[Any], scopes: list[Scope],
               batch_receipts: list[bool]) -> list[Any]:
        """The JSON outcome of each item of one committed batch (an exception stays as it
        is); appended items get their signed receipt: a per-entry JWT each, or -- for the
        callers that asked for one -- a batch receipt, all of them under one signature."""
        now_s, ledger_id = int(time.time()), self.ledger.meta.ledger_id
        producers = [scope_parts(s)[0] for s in scopes]
        out: list[Any] = list(results)
        batched: list[int] = []
        for i, result in enumerate(results):
            if isinstance(result, Exception):
                continue
            out[i] = result.to_dict()
            if not result.ok:
                continue
            if batch_receipts[i]:
                batched.append(i)
            else:
                out[i]["receipt"] = sign_receipt(self.signer, result, origin=self.origin,
                                                 ledger_id=ledger_id, producer=producers[i],
                                                 now_s=now_s)
        if batched:
            receipts = sign_batch_receipts(
                self.signer, [(results[i], producers[i]) for i in batched], origin=self.origin,
                ledger_id=ledger_id, now_s=now_s)
            for i, receipt in zip(batched, receipts, strict=True):
                out[i]["receipt"] = receipt
        return out

    def replica_behind(self) -> bool:
        """The primary holds entries or a checkpoint the read replica lacks (never true
        without a replica).  Raises StoreUnavailable when either does not answer."""
        return self.replica is not None and self.ledger.replica_behind(self.replica)

    def close(self) -> None:
        if self.watch.sender is not None:
            self.watch.sender.stop()
        self.ledger.close()
        if self.replica is not None:
            self.replica.close()


RETRY_AFTER_S = 1


def unavailable_response(exc: LedgerError) -> Any:
    """503 with ``Retry-After``: the fault (lost connection, lock timeout) may pass."""
    response = errors.ledger_error_response(exc)
    response.headers["Retry-After"] = str(RETRY_AFTER_S)
    return response


def limit_for(settings: Settings) -> Any:
    def limit(path: str) -> int:
        if path == "/v1/entries":
            return MAX_SUBMISSION_BYTES
        if path == "/v1/entries/batch":
            return settings.batch_max_bytes
        return OTHER_MAX_BYTES

    return limit


def create_app(settings: Settings) -> FastAPI:
    """The application for ``settings``.  Opens the ledger and loads the keys now (so a
    misconfiguration fails before serving); the group committer starts with the app."""
    from ledger.api import (
        routes_append,
        routes_console,
        routes_custody,
        routes_export,
        routes_history,
        routes_meta,
        routes_ops,
        routes_proofs,
        routes_read,
        routes_tiles,
    )

    service = Service(settings)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        await service.committer.start()
        if service.scheduler is not None:
            service.scheduler.start()
        service.watch.start()
        try:
            yield
        finally:
            service.watch.stop()
            if service.scheduler is not None:
                service.scheduler.stop()
            await service.committer.stop()
            service.close()
            metrics.process_exit()

    app = FastAPI(title="ledger", version=__version__, description=DESCRIPTION,
                  lifespan=lifespan, openapi_url=None, docs_url=None, redoc_url=None,
                  responses=COMMON_ERRORS)
    app.state.service = service
    app.state.verifier = service.verifier
    errors.install(app)

    @app.exception_handler(StoreUnavailable)
    async def _store_down(_: Request, exc: StoreUnavailable) -> Any:
        errors.log.warning("store unavailable: %s", exc)
        metrics.store_error(exc.code)
        return unavailable_response(exc)

    # A read the replica cannot answer because it has not replayed it yet is a 503 with
    # Retry-After, never a 404 the primary would contradict (docs/operations.md).
    @app.exception_handler(NotFound)
    async def _not_found(request: Request, exc: NotFound) -> Any:
        if service.replica is not None and request.method in ("GET", "HEAD"):
            try:
                behind = await run_in_threadpool(service.replica_behind)
            except StoreUnavailable as down:
                return await _store_down(request, down)
            if behind:
                return await _store_down(request, ReplicaBehind(
                    f"the read replica has not replayed this yet ({exc.message}); the "
                    "primary has newer entries or checkpoints", field=exc.field))
        return errors.ledger_error_response(exc)

    # The store translates every driver error (ledger.store.db.translate); a connection
    # fault that still arrives raw is answered the same way, never as a 500.
    async def _db_down(_: Request, exc: Exception) -> Any:
        errors.log.warning("database error: %s", exc)
        metrics.store_error("driver_" + type(exc).__name__.lower())
        return unavailable_response(StoreUnavailable("the database is unreachable"))

    for raw in RAW_CONNECTION_ERRORS:  # (OperationalError, InterfaceError)
        app.exception_handler(raw)(_db_down)

    for module in (routes_append, routes_read, routes_proofs, routes_export, routes_meta,
                   routes_custody, routes_history, routes_console, routes_tiles):
        app.include_router(module.router)
    if settings.metrics:
        app.include_router(routes_ops.router)
    else:
        app.include_router(routes_ops.health_router)
    app.add_middleware(BodyLimit, limit_for=limit_for(settings))
    app.add_middleware(RequestLog, access_log=settings.access_log)
    return app


def build_watch(service: Service) -> Watch:
    """The background audits and alert conditions of ``service`` (ledger.service.watch)."""
    s = service.settings
    sender = None
    if s.alert_webhooks:
        sender = AlertSender(list(s.alert_webhooks), service.signer, retries=s.alert_retries,
                             backoff_s=s.seconds("alert_backoff") or 0.5)
    witnesses: tuple[str, ...] = ()
    if service.scheduler is not None:
        witnesses = tuple(w.name for w in service.scheduler.anchors.witnesses)
    elif s.anchors_file:
        witnesses = tuple(w.name for w in load_anchor_config(s.anchors_file).witnesses)
    config = WatchConfig(
        audit_every_s=s.seconds("audit_every"), audit_since_last=s.audit_since_last,
        checkpoint_overdue_s=s.seconds("checkpoint_overdue"),
        witness_overdue_s=s.seconds("witness_overdue"),
        store_down_after_s=s.seconds("store_down_after") or 60.0, witnesses=witnesses,
        poll_s=s.seconds("watch_poll") or 1.0,
        audit_keys=tuple(str(p) for p in [Path(s.keys_dir) / "jwks.json"] if p.is_file()))
    return Watch(service.ledger, config, sender, s.runtime_dir)


def app_from_env() -> FastAPI:
    """Factory for ``uvicorn --factory`` worker processes (settings from the environment)."""
    return create_app(Settings.from_env())
