"""Group commit: concurrent single appends become one serialized transaction.

Each ``POST /v1/entries`` puts its submission on a bounded queue and awaits its
own future.  One consumer task takes every item waiting (at most ``max_items``),
optionally waits up to ``max_wait_ms`` for more, and runs ONE
``Ledger.append_many`` for them in a dedicated worker thread (one lock, one
commit; items of several producers in one batch are committed as one
``append_many`` per producer, in arrival order).  Only when ``append_many`` has
returned — the transaction is committed, so every entry of the batch is
durable — is each caller's future resolved with its *own* result (its seq, or
its own rejection).  A failed transaction fails every caller of its producer
group and no caller is told "appended".

While one batch commits (an fsync), the next one fills: a batch is what
arrived during the previous commit, so under load batches grow by themselves
and an idle service adds no latency.  Bounds:

- ``max_wait_ms`` (default 0): an extra wait for company after the first item
  (measured: on 2 vCPUs it only added latency; it can help when commits are
  far cheaper than the arrival spacing);
- ``max_items`` (default 256): the largest batch;
- ``max_queue`` (default 4096): submissions waiting; one more is refused at
  once with 503 ``overloaded`` (``Retry-After: 1``), never queued without bound.

A caller that disconnects while waiting does not cancel its append: once
queued it is committed (retrying with the same Idempotency-Key returns it).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from ledger.errors import Overloaded, StoreUnavailable
from ledger.ops.append import AppendResult
from ledger.service import metrics

log = logging.getLogger("ledger.api.groupcommit")
_STOP: Any = object()  # queued by stop(): everything before it is committed, then the loop ends

# append_many(items, producer) -> one result per item, in order, after the commit
AppendMany = Callable[[Sequence[Any], "str | None"], list[AppendResult]]
# finish(outcomes, producers, batch_receipts) runs once per committed batch in the worker
# thread: each outcome is an AppendResult (or the exception that failed its producer's
# transaction, to be passed through), and it returns what each caller gets (receipts)
Finish = Callable[[list[Any], list["str | None"], list[bool]], list[Any]]


@dataclass
class Stats:
    batches: int = 0
    items: int = 0
    largest: int = 0


class GroupCommitter:
    """Batches concurrent single appends; see the module docstring for the bounds."""

    def __init__(self, append_many: AppendMany, *, finish: Finish | None = None,
                 max_wait_ms: float = 0.0, max_items: int = 256, max_queue: int = 4096,
                 ) -> None:
        if max_items < 1 or max_queue < 1 or max_wait_ms < 0:
            raise ValueError("group commit bounds must be positive")
        self._append_many = append_many
        self._finish = finish
        self.max_wait = max_wait_ms / 1000.0
        self.max_items = max_items
        self.max_queue = max_queue
        self.stats = Stats()
        self._queue: asyncio.Queue[tuple[Any, str | None, bool, asyncio.Future[Any]]] | None \
            = None
        self._task: asyncio.Task[None] | None = None
        self._executor: ThreadPoolExecutor | None = None
        self._closed = False

    @property
    def pending(self) -> int:
        """Submissions queued and not yet in a committing batch."""
        return self._queue.qsize() if self._queue is not None else 0

    async def start(self) -> None:
        self._queue = asyncio.Queue(self.max_queue)
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="group-commit")
        self._task = asyncio.create_task(self._run(), name="group-commit")

    async def stop(self) -> None:
        """Refuse new items, commit everything queued (the batch in flight included: no
        caller is told "failed" about an append that commits), then stop the consumer."""
        self._closed = True
        if self._task is not None and self._queue is not None:
            try:
                await asyncio.wait_for(self._queue.put(_STOP), 30)
                await asyncio.wait_for(asyncio.shield(self._task), 60)
            except TimeoutError:
                log.error("group commit did not drain in time; stopping it")
                self._task.cancel()
                try:
                    await self._task
                except asyncio.CancelledError:
                    pass
        if self._executor is not None:
            self._executor.shutdown(wait=True)

    async def submit(self, item: Any, producer: str | None, batch_receipt: bool = False) -> Any:
        """Queue one submission; return its own outcome once its batch is committed
        (``batch_receipt``: the caller asked for a batch receipt, handed to ``finish``).

        Raises Overloaded (queue full), StoreUnavailable (shutting down or the
        transaction failed) or whatever ``append_many`` raised for its batch.
        """
        if self._closed or self._queue is None:
            raise StoreUnavailable("the service is shutting down", code="shutting_down")
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        try:
            self._queue.put_nowait((item, producer, batch_receipt, fut))
        except asyncio.QueueFull:
            raise Overloaded(f"{self.max_queue} appends are already waiting; retry shortly"
                             ) from None
        # shield: a disconnecting caller must not cancel a queued append's future
        return await asyncio.shield(fut)

    async def _run(self) -> None:
        assert self._queue is not None
        loop = asyncio.get_running_loop()
        while True:
            first = await self._queue.get()
            if first is _STOP:
                return
            batch = [first]
            stopping = self._drain(batch)
            if not stopping and len(batch) < self.max_items and self.max_wait > 0:
                deadline = loop.time() + self.max_wait
                while not stopping and len(batch) < self.max_items:
                    remaining = deadline - loop.time()
                    if remaining <= 0:
                        break
                    try:
                        item = await asyncio.wait_for(self._queue.get(), remaining)
                    except TimeoutError:
                        break
                    if item is _STOP:
                        stopping = True
                        break
                    batch.append(item)
                    stopping = self._drain(batch)
            await self._commit(loop, batch)
            if stopping:
                return

    def _drain(self, batch: list[Any]) -> bool:
        """Move waiting items into ``batch`` (up to the bound); True if the stop mark came."""
        assert self._queue is not None
        while len(batch) < self.max_items:
            try:
                item = self._queue.get_nowait()
            except asyncio.QueueEmpty:
                return False
            if item is _STOP:
                return True
            batch.append(item)
        return False

    async def _commit(self, loop: asyncio.AbstractEventLoop, batch: list[Any]) -> None:
        items = [b[0] for b in batch]
        producers = [b[1] for b in batch]
        flags = [b[2] for b in batch]
        try:
            outcomes = await loop.run_in_executor(self._executor, self._work, items, producers,
                                                  flags)
        except BaseException as exc:  # every caller of the batch gets it
            if isinstance(exc, asyncio.CancelledError):
                exc = StoreUnavailable("the service stopped during the commit",
                                       code="shutting_down")
            elif not isinstance(exc, Exception):
                raise
            for *_, fut in batch:
                if not fut.done():
                    fut.set_exception(exc)
            return
        self.stats.batches += 1
        self.stats.items += len(batch)
        self.stats.largest = max(self.stats.largest, len(batch))
        for (*_, fut), outcome in zip(batch, outcomes, strict=False):
            if fut.done():
                continue
            if isinstance(outcome, Exception):
                fut.set_exception(outcome)
            else:
                fut.set_result(outcome)

    def _work(self, items: list[Any], producers: list[str | None],
              flags: list[bool]) -> list[Any]:
        """In the worker thread: one append_many per producer, outcomes in input order,
        then one ``finish`` for the whole batch (one signature for its batch receipts).

        An outcome is the (finished) result, or the exception that failed its
        producer's transaction — other producers' committed items still succeed.
        """
        outcomes: list[Any] = [None] * len(items)
        groups: dict[str | None, list[int]] = {}
        for i, p in enumerate(producers):
            groups.setdefault(p, []).append(i)
        for producer, idx in groups.items():
            try:
                results = self._append_many([items[i] for i in idx], producer)
                if len(results) != len(idx):
                    raise RuntimeError("append_many must return one result per item")
            except Exception as exc:  # noqa: BLE001 - handed to each caller of the group
                for i in idx:
                    outcomes[i] = exc
                continue
            for i, res in zip(idx, results, strict=False):
                outcomes[i] = res
        if self._finish is None:
            return outcomes
        return self._finish(outcomes, producers, flags)


class MeteredCommitter(GroupCommitter):
    """The group committer, counting batch sizes, queue depth and refused submissions."""

    def __init__(self, *args: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        metrics.QUEUE_MAX.set(self.max_queue)
        metrics.QUEUE_DEPTH.set(0)

    async def submit(self, item: Any, producer: str | None, batch_receipt: bool = False) -> Any:
        try:
            return await super().submit(item, producer, batch_receipt)
        except (Overloaded, StoreUnavailable) as exc:
            metrics.count_error(exc)
            raise

    async def _commit(self, loop: Any, batch: list[Any]) -> None:
        metrics.BATCH_SIZE.observe(len(batch))
        metrics.QUEUE_DEPTH.set(self.pending)  # what waits while this batch commits
        await super()._commit(loop, batch)
