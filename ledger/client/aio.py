"""``AsyncLedgerClient``: :class:`~ledger.client.sync.LedgerClient` for asyncio.

Same arguments, outcomes and guarantees; ``append``, ``append_many``, ``drain`` and
``aclose`` are coroutines.  Spool writes (each ends in ``fsync``) run in a worker
thread, so the event loop never blocks on the disk.  With ``batch_max > 1`` a task
groups concurrent appends; with ``drain_interval_s`` a task drains in the background.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any, Self

import httpx

from ledger.client.core import ClientCore, NotNow
from ledger.client.errors import LedgerUnavailable, ReceiptInvalid, Rejected
from ledger.client.protocol import (
    AppendOutcome,
    DrainReport,
    batch_body,
    chunks,
    done_record,
    local_refusal,
    merge,
    prepare,
    rejected,
    spooled,
)


class AsyncLedgerClient:
    """A producer's asyncio connection to one ledger service."""

    def __init__(self, url: str, token: str, *, spool_dir: str | None = None,
                 origin: str | None = None, ledger_id: str | None = None,
                 timeout: float = 10.0, batch_max: int = 1, batch_wait_ms: float = 0.0,
                 drain_batch: int = 100, drain_interval_s: float | None = None,
                 key_prefix: str = "lc-", spool_max_records: int | None = None,
                 spool_max_bytes: int | None = None, fsync: bool = True,
                 spool_salvage: bool = False,
                 receipts: str = "batch",
                 transport: httpx.AsyncBaseTransport | None = None) -> None:
        limits = {k: v for k, v in (("spool_max_records", spool_max_records),
                                    ("spool_max_bytes", spool_max_bytes)) if v is not None}
        self.core = ClientCore(url, token, spool_dir=spool_dir, origin=origin,
                               ledger_id=ledger_id, timeout=timeout, batch_max=batch_max,
                               batch_wait_ms=batch_wait_ms, drain_batch=drain_batch,
                               key_prefix=key_prefix, fsync=fsync, receipts=receipts,
                               salvage=spool_salvage,
                               **limits)
        self.http = httpx.AsyncClient(base_url=self.core.url, headers=self.core.headers,
                                      timeout=timeout, transport=transport)
        self._order = asyncio.Lock()
        self._queue: asyncio.Queue[tuple[bytes, str, asyncio.Future[AppendOutcome]]] | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._drain_interval = drain_interval_s

    @property
    def spool(self) -> Any:
        return self.core.spool

    def _start(self) -> None:
        if self._tasks or (self.core.batch_max == 1 and self._drain_interval is None):
            return
        if self.core.batch_max > 1:
            self._queue = asyncio.Queue()
            self._tasks.append(asyncio.create_task(self._batch_loop()))
        if self._drain_interval is not None and self.core.spool is not None:
            self._tasks.append(asyncio.create_task(self._drain_loop(self._drain_interval)))

    # -- appending ---------------------------------------------------------------
    async def append(self, submission: Any) -> AppendOutcome:
        """As :meth:`LedgerClient.append`."""
        self._start()
        body, key = prepare(submission, self.core.key_prefix)
        if self._queue is not None:
            fut: asyncio.Future[AppendOutcome] = asyncio.get_running_loop().create_future()
            await self._queue.put((body, key, fut))
            out = await fut
        else:
            out = (await self._deliver([(body, key)], single=True))[0]
        if out.status == "rejected":
            raise Rejected.from_answer(422, out.error or {})
        return out

    async def append_many(self, submissions: Sequence[Any]) -> list[AppendOutcome]:
        """As :meth:`LedgerClient.append_many`."""
        return await self._deliver([prepare(s, self.core.key_prefix) for s in submissions],
                                   single=False)

    async def _deliver(self, items: list[tuple[bytes, str]], single: bool,
                       ) -> list[AppendOutcome]:
        core = self.core
        if core.pending():
            async with self._order:
                if not core.backing_off():
                    await self._drain_some(None, DrainReport())
                if core.pending() or core.backing_off():
                    return await self._to_spool(items, None)
        if core.backing_off() and core.spool is not None:
            return await self._to_spool(items, None)
        try:
            out = [await self._send_one(*items[0])] if single and len(items) == 1 \
                else await self._send_many(items)
        except NotNow as exc:
            core.failed()
            return await self._to_spool(items, exc)
        core.succeeded()
        return out

    async def _to_spool(self, items: list[tuple[bytes, str]], exc: Exception | None,
                        ) -> list[AppendOutcome]:
        spool = self.core.spool
        if spool is None:
            raise LedgerUnavailable(f"the ledger at {self.core.url} cannot take the "
                                    f"submission ({exc or 'backing off'}) and no spool_dir "
                                    "is configured")
        kept = await asyncio.to_thread(spool.put_many, items)
        return [spooled(i.key, i.id) for i in kept]

    # -- HTTP ----------------------------------------------------------------------
    async def _request(self, method: str, path: str, **kw: Any) -> tuple[int, Any]:
        try:
            r = await self.http.request(method, path, **kw)
        except httpx.TransportError as exc:
            raise NotNow(f"{type(exc).__name__}: {exc}") from exc
        try:
            return r.status_code, r.json()
        except ValueError:
            if r.status_code >= 500 or r.status_code in (408, 429):
                return r.status_code, None
            raise NotNow(f"HTTP {r.status_code} answer is not JSON") from None

    async def _identify(self, token: Any = None) -> None:
        core = self.core
        if core.origin is None or core.ledger_id is None:
            core.learn_health(*await self._request("GET", "/v1/health"))
        if core.jwks_stale_for(token) if token is not None else core.jwks is None:
            core.learn_jwks(*await self._request("GET", "/.well-known/jwks.json"))

    async def _verify(self, item: dict[str, Any], key: str) -> AppendOutcome:
        await self._identify()
        try:
            return self.core.verified(item, key)
        except ReceiptInvalid:
            if not self.core.jwks_stale_for(item.get("receipt")):
                raise
            await self._identify(item.get("receipt"))
            return self.core.verified(item, key)

    async def _send_one(self, body: bytes, key: str) -> AppendOutcome:
        await self._identify()
        status, payload = await self._request("POST", "/v1/entries", content=body, headers={
            "Content-Type": "application/json"})  # the body carries the key
        return await self._verify(self.core.single_answer(status, payload), key)

    async def _send_many(self, items: list[tuple[bytes, str]]) -> list[AppendOutcome]:
        if not items:
            return []
        await self._identify()
        bodies = [b for b, _ in items]
        out: list[AppendOutcome] = []
        for start, end in chunks(bodies, max(self.core.batch_max, self.core.drain_batch)):
            status, payload = await self._request("POST", "/v1/entries/batch",
                                                  content=batch_body(bodies[start:end]),
                                                  headers={"Content-Type": "application/json"})
            results = self.core.batch_answer(status, payload, end - start)
            for (_, key), res in zip(items[start:end], results, strict=True):
                out.append(await self._verify(res, key) if res.get("ok")
                           else rejected(key, res.get("error") or {}))
        return out

    # -- draining ---------------------------------------------------------------------
    async def drain(self, max_items: int | None = None) -> DrainReport:
        """As :meth:`LedgerClient.drain`."""
        report = DrainReport()
        if self.core.spool is None:
            return report
        async with self._order:
            await self._drain_some(max_items, report)
        report.remaining = self.core.pending()
        return report

    async def _drain_some(self, max_items: int | None, report: DrainReport) -> None:
        spool = self.core.spool
        while spool is not None and len(spool) and (max_items is None or report.sent < max_items):
            n = self.core.drain_batch if max_items is None else \
                min(self.core.drain_batch, max_items - report.sent)
            batch = await asyncio.to_thread(spool.peek, n)
            local = [local_refusal(i.body, i.key) for i in batch]
            try:
                outs = merge(local, await self._send_many(
                    [(i.body, i.key) for i, o in zip(batch, local, strict=True) if o is None]))
            except NotNow as exc:
                self.core.failed()
                report.error = str(exc)
                return
            self.core.succeeded()
            await asyncio.to_thread(spool.done, [(i, done_record(o))
                                                 for i, o in zip(batch, outs, strict=True)])
            report.sent += len(batch)
            for o in outs:
                setattr(report, o.status, getattr(report, o.status) + 1)
            report.outcomes.extend(outs)

    async def _drain_loop(self, interval: float) -> None:
        while True:
            await asyncio.sleep(interval)
            if self.core.pending() and not self.core.backing_off():
                try:
                    await self.drain()
                except Exception:  # noqa: BLE001 - the loop must survive; drain() reports
                    self.core.failed()

    async def _batch_loop(self) -> None:
        assert self._queue is not None
        loop = asyncio.get_running_loop()
        while True:
            group = [await self._queue.get()]
            deadline = loop.time() + self.core.batch_wait_s
            while len(group) < self.core.batch_max:
                timeout = deadline - loop.time()
                try:
                    group.append(await asyncio.wait_for(self._queue.get(), timeout)
                                 if timeout > 0 else self._queue.get_nowait())
                except (TimeoutError, asyncio.QueueEmpty):
                    break
            try:
                outs = await self._deliver([(b, k) for b, k, _ in group], len(group) == 1)
            except Exception as exc:  # noqa: BLE001 - handed to every waiting caller
                for _, _, fut in group:
                    if not fut.done():
                        fut.set_exception(exc)
                continue
            for (_, _, fut), out in zip(group, outs, strict=True):
                if not fut.done():
                    fut.set_result(out)

    async def aclose(self) -> None:
        """Stop the background tasks, close HTTP and the spool."""
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self.http.aclose()
        if self.core.spool is not None:
            self.core.spool.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
