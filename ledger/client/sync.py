"""``LedgerClient``: append results over HTTP, verify each receipt, spool what cannot
be sent, and drain the spool in order.

    with LedgerClient("http://ledger:8080", token, spool_dir="/var/spool/gw") as client:
        outcome = client.append(submission)   # appended / replayed / spooled
        client.drain()                         # or drain_interval_s=5.0

Threads may share one client.  With ``batch_max > 1`` concurrent ``append`` calls are
grouped (up to ``batch_max`` items, waiting at most ``batch_wait_ms`` for company) into
one ``POST /v1/entries/batch``; each caller still gets its own outcome.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from concurrent.futures import Future
from queue import Empty, Queue
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


class LedgerClient:
    """A producer's connection to one ledger service (see the module docstring)."""

    def __init__(self, url: str, token: str, *, spool_dir: str | None = None,
                 origin: str | None = None, ledger_id: str | None = None,
                 timeout: float = 10.0, batch_max: int = 1, batch_wait_ms: float = 0.0,
                 drain_batch: int = 100, drain_interval_s: float | None = None,
                 key_prefix: str = "lc-", spool_max_records: int | None = None,
                 spool_max_bytes: int | None = None, fsync: bool = True,
                 spool_salvage: bool = False,
                 receipts: str = "batch",
                 transport: httpx.BaseTransport | None = None) -> None:
        limits = {k: v for k, v in (("spool_max_records", spool_max_records),
                                    ("spool_max_bytes", spool_max_bytes)) if v is not None}
        self.core = ClientCore(url, token, spool_dir=spool_dir, origin=origin,
                               ledger_id=ledger_id, timeout=timeout, batch_max=batch_max,
                               batch_wait_ms=batch_wait_ms, drain_batch=drain_batch,
                               key_prefix=key_prefix, fsync=fsync, receipts=receipts,
                               salvage=spool_salvage,
                               **limits)
        self.http = httpx.Client(base_url=self.core.url, headers=self.core.headers,
                                 timeout=timeout, transport=transport)
        self._order = threading.RLock()  # spooling and draining keep one order
        self._stop = threading.Event()
        self._batcher = _Batcher(self._deliver, batch_max, self.core.batch_wait_s) \
            if batch_max > 1 else None
        self._drainer: threading.Thread | None = None
        if drain_interval_s is not None and self.core.spool is not None:
            self._drainer = threading.Thread(target=self._drain_loop, args=(drain_interval_s,),
                                             name="ledger-client-drain", daemon=True)
            self._drainer.start()

    @property
    def spool(self) -> Any:
        return self.core.spool

    # -- appending ---------------------------------------------------------------
    def append(self, submission: Any) -> AppendOutcome:
        """Append one submission; the outcome is ``appended``/``replayed`` (receipt
        verified) or ``spooled``.  Raises Rejected (the ledger refused it: 4xx),
        AccessDenied, ReceiptInvalid, SpoolFull, or LedgerUnavailable (no spool)."""
        body, key = prepare(submission, self.core.key_prefix)
        if self._batcher is not None:
            out = self._batcher.submit(body, key)
        else:
            out = self._deliver([(body, key)], single=True)[0]
        if out.status == "rejected":
            raise Rejected.from_answer(422, out.error or {})
        return out

    def append_many(self, submissions: Sequence[Any]) -> list[AppendOutcome]:
        """Append several in batch requests; rejected items are outcomes, not errors."""
        items = [prepare(s, self.core.key_prefix) for s in submissions]
        return self._deliver(items, single=False)

    def _deliver(self, items: list[tuple[bytes, str]], single: bool) -> list[AppendOutcome]:
        core = self.core
        if core.pending():
            with self._order:
                if not core.backing_off():
                    self._drain_some(None, DrainReport())
                if core.pending() or core.backing_off():
                    return self._to_spool(items, None)
        if core.backing_off() and core.spool is not None:
            return self._to_spool(items, None)
        try:
            if single and len(items) == 1:
                out = [self._send_one(*items[0])]
            else:
                out = self._send_many(items)
        except NotNow as exc:
            core.failed()
            return self._to_spool(items, exc)
        core.succeeded()
        return out

    def _to_spool(self, items: list[tuple[bytes, str]], exc: Exception | None,
                  ) -> list[AppendOutcome]:
        if self.core.spool is None:
            raise LedgerUnavailable(f"the ledger at {self.core.url} cannot take the "
                                    f"submission ({exc or 'backing off'}) and no spool_dir "
                                    "is configured")
        with self._order:
            kept = self.core.spool.put_many(items)
        return [spooled(i.key, i.id) for i in kept]

    # -- HTTP ----------------------------------------------------------------------
    def _request(self, method: str, path: str, **kw: Any) -> tuple[int, Any]:
        try:
            r = self.http.request(method, path, **kw)
        except httpx.TransportError as exc:
            raise NotNow(f"{type(exc).__name__}: {exc}") from exc
        try:
            return r.status_code, r.json()
        except ValueError:
            if r.status_code >= 500 or r.status_code in (408, 429):
                return r.status_code, None
            raise NotNow(f"HTTP {r.status_code} answer is not JSON") from None

    def _identify(self, token: Any = None) -> None:
        core = self.core
        if core.origin is None or core.ledger_id is None:
            core.learn_health(*self._request("GET", "/v1/health"))
        if core.jwks_stale_for(token) if token is not None else core.jwks is None:
            core.learn_jwks(*self._request("GET", "/.well-known/jwks.json"))

    def _verify(self, item: dict[str, Any], key: str) -> AppendOutcome:
        self._identify()
        try:
            return self.core.verified(item, key)
        except ReceiptInvalid:
            if not self.core.jwks_stale_for(item.get("receipt")):
                raise
            self._identify(item.get("receipt"))
            return self.core.verified(item, key)

    def _send_one(self, body: bytes, key: str) -> AppendOutcome:
        self._identify()
        status, payload = self._request("POST", "/v1/entries", content=body, headers={
            "Content-Type": "application/json"})  # the body carries the key
        return self._verify(self.core.single_answer(status, payload), key)

    def _send_many(self, items: list[tuple[bytes, str]]) -> list[AppendOutcome]:
        if not items:
            return []
        self._identify()
        bodies = [b for b, _ in items]
        out: list[AppendOutcome] = []
        for start, end in chunks(bodies, max(self.core.batch_max, self.core.drain_batch)):
            status, payload = self._request("POST", "/v1/entries/batch",
                                            content=batch_body(bodies[start:end]),
                                            headers={"Content-Type": "application/json"})
            results = self.core.batch_answer(status, payload, end - start)
            for (_, key), res in zip(items[start:end], results, strict=True):
                out.append(self._verify(res, key) if res.get("ok")
                           else rejected(key, res.get("error") or {}))
        return out

    # -- draining ---------------------------------------------------------------------
    def drain(self, max_items: int | None = None) -> DrainReport:
        """Send spooled items oldest first until the spool is empty, ``max_items`` were
        sent, or the ledger is unavailable again (``report.error``)."""
        report = DrainReport()
        if self.core.spool is None:
            return report
        with self._order:
            self._drain_some(max_items, report)
        report.remaining = self.core.pending()
        return report

    def _drain_some(self, max_items: int | None, report: DrainReport) -> None:
        spool = self.core.spool
        while spool is not None and len(spool) and (max_items is None or report.sent < max_items):
            n = self.core.drain_batch if max_items is None else \
                min(self.core.drain_batch, max_items - report.sent)
            batch = spool.peek(n)
            local = [local_refusal(i.body, i.key) for i in batch]
            try:
                outs = merge(local, self._send_many(
                    [(i.body, i.key) for i, o in zip(batch, local, strict=True) if o is None]))
            except NotNow as exc:
                self.core.failed()
                report.error = str(exc)
                return
            self.core.succeeded()
            spool.done([(i, done_record(o)) for i, o in zip(batch, outs, strict=True)])
            report.sent += len(batch)
            for o in outs:
                setattr(report, o.status, getattr(report, o.status) + 1)
            report.outcomes.extend(outs)

    def _drain_loop(self, interval: float) -> None:
        while not self._stop.wait(interval):
            if self.core.pending() and not self.core.backing_off():
                try:
                    self.drain()
                except Exception:  # noqa: BLE001 - the loop must survive; drain() reports
                    self.core.failed()

    def close(self) -> None:
        """Stop the batcher and the drain thread, close HTTP and the spool."""
        self._stop.set()
        if self._batcher is not None:
            self._batcher.stop()
        if self._drainer is not None:
            self._drainer.join(timeout=self.core.timeout + 5)
        self.http.close()
        if self.core.spool is not None:
            self.core.spool.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _Batcher:
    """Groups concurrent appends: up to ``max_items``, or what came within ``wait_s``."""

    def __init__(self, deliver: Any, max_items: int, wait_s: float) -> None:
        self.deliver, self.max_items, self.wait_s = deliver, max_items, wait_s
        self.queue: Queue[tuple[bytes, str, Future[AppendOutcome]] | None] = Queue()
        self.thread = threading.Thread(target=self._run, name="ledger-client-batch",
                                       daemon=True)
        self.thread.start()

    def submit(self, body: bytes, key: str) -> AppendOutcome:
        fut: Future[AppendOutcome] = Future()
        self.queue.put((body, key, fut))
        return fut.result()

    def _run(self) -> None:
        while True:
            first = self.queue.get()
            if first is None:
                return
            group = [first]
            deadline = time.monotonic() + self.wait_s
            while len(group) < self.max_items:
                try:
                    nxt = self.queue.get(timeout=max(0.0, deadline - time.monotonic())) \
                        if self.wait_s else self.queue.get_nowait()
                except Empty:
                    break
                if nxt is None:
                    self.queue.put(None)
                    break
                group.append(nxt)
            try:
                outs = self.deliver([(b, k) for b, k, _ in group], len(group) == 1)
            except BaseException as exc:  # noqa: BLE001 - handed to every waiting caller
                for _, _, fut in group:
                    fut.set_exception(exc)
                continue
            for (_, _, fut), out in zip(group, outs, strict=True):
                fut.set_result(out)

    def stop(self) -> None:
        self.queue.put(None)
        self.thread.join(timeout=30)
