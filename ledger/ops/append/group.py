"""Group commit: concurrent single appends become one serialized transaction.

Any caller's submissions go through one :class:`GroupCommit`: the HTTP service (its asyncio
adapter, ``ledger.api.groupcommit``), and ``Ledger.append`` called from several threads.
Each submission waits on a bounded queue with its own future; whoever commits takes every
item waiting (at most ``max_items``) and runs ONE ``append_many`` for them (one lock, one
commit; items of several producers in one batch are committed as one ``append_many`` per
producer, in arrival order).  Only when ``append_many`` has returned -- the transaction is
committed, so every entry of the batch is durable -- is each future resolved with its *own*
result (its seq, or its own rejection).  A failed transaction fails every caller of its
producer group and no caller is told "appended"; with ``isolate`` set, a group refused
because of one item's value (``StoreDataError``: nothing was committed) is committed again
item by item, so each caller gets what it would have got alone.

Two ways to commit what is queued, both in input order:

- a committer thread (:meth:`start` / :meth:`stop`), for a server: while one batch commits
  (an fsync), the next one fills, so under load batches grow by themselves and an idle
  service adds no latency; ``max_wait_ms`` (default 0) is an extra wait for company after
  the first item;
- the callers themselves (:meth:`append`, leader and followers): a caller finding nobody
  committing commits the waiting batch in its own thread; the others wait for it and the
  next batch is what arrived meanwhile.  A caller alone commits its own item at once,
  exactly as ``append_many`` of one item would.

Bounds: ``max_items`` (default 256) the largest batch; ``max_queue`` (default 4096)
submissions waiting: one more is refused at once with ``Overloaded``, never queued without
bound.  A submission once queued is committed, whatever its caller does meanwhile.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any, TypeAlias

from ledger.errors import Overloaded, StoreDataError, StoreUnavailable

log = logging.getLogger("ledger.api.groupcommit")  # the name its log lines always had

# Who a group of items is committed for: a producer (or None), or (producer, tenant) for
# items of a tenant other than the default one; items of one scope share a transaction.
Scope: TypeAlias = str | tuple[str | None, str] | None
# append_many(items, scope) -> one result per item, in order, after the commit
AppendMany = Callable[[Sequence[Any], Scope], list[Any]]
# finish(outcomes, producers, flags) runs once per committed batch in the committing thread:
# each outcome is a result (or the exception that failed its producer's transaction, to be
# passed through), and it returns what each caller gets (the HTTP service: receipts)
Finish = Callable[[list[Any], list[Scope], list[bool]], list[Any]]
# one queued submission: item, producer, the caller's flag (handed to finish), its future
Slot = tuple[Any, Scope, bool, "Future[Any]"]


@dataclass
class Stats:
    batches: int = 0
    items: int = 0
    largest: int = 0


class GroupCommit:
    """Batches concurrent single appends; thread-safe.  See the module docstring."""

    def __init__(self, append_many: AppendMany, *, finish: Finish | None = None,
                 max_wait_ms: float = 0.0, max_items: int = 256, max_queue: int = 4096,
                 isolate: bool = False, on_batch: Callable[[int], None] | None = None,
                 ) -> None:
        if max_items < 1 or max_queue < 1 or max_wait_ms < 0:
            raise ValueError("group commit bounds must be positive")
        self._append_many = append_many
        self._finish = finish
        self.max_wait = max_wait_ms / 1000.0
        self.max_items = max_items
        self.max_queue = max_queue
        self.isolate = isolate
        self._on_batch = on_batch  # called with each batch's size before it commits (metrics)
        self.stats = Stats()
        self._queue: deque[Slot] = deque()
        self._cond = threading.Condition()
        self._committing = False  # a batch is being committed (by the thread or a caller)
        self._closed = False
        self._thread: threading.Thread | None = None

    @property
    def pending(self) -> int:
        """Submissions queued and not yet in a committing batch."""
        return len(self._queue)

    # -- queueing ------------------------------------------------------------
    def submit(self, item: Any, producer: Scope, flag: bool = False) -> Future[Any]:
        """Queue one submission; its future gets its own outcome once its batch committed.

        Raises Overloaded (queue full) or StoreUnavailable (stopped)."""
        fut: Future[Any] = Future()
        with self._cond:
            if self._closed:
                raise StoreUnavailable("the service is shutting down", code="shutting_down")
            if len(self._queue) >= self.max_queue:
                raise Overloaded(f"{self.max_queue} appends are already waiting; retry shortly")
            self._queue.append((item, producer, flag, fut))
            self._cond.notify_all()
        return fut

    def append(self, item: Any, producer: Scope, flag: bool = False) -> Any:
        """Queue one submission and return its outcome once its transaction committed
        (raising what failed it), committing the waiting batch in this thread when no
        other thread is committing one."""
        fut = self.submit(item, producer, flag)
        while True:
            with self._cond:
                while self._committing and not fut.done():
                    self._cond.wait()  # a follower: the batch in flight may hold this item
                if fut.done():
                    break
                batch = self._take()  # the leader: this item is still queued
                self._committing = True
            try:
                self.commit(batch)
            finally:
                with self._cond:
                    self._committing = False
                    self._cond.notify_all()
        return fut.result()

    def _take(self) -> list[Slot]:
        """Under the lock: the waiting items, oldest first, at most ``max_items``."""
        n = min(len(self._queue), self.max_items)
        return [self._queue.popleft() for _ in range(n)]

    # -- the committer thread ------------------------------------------------------
    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="group-commit", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 60.0) -> None:
        """Refuse new items, commit everything queued (the batch in flight included: no
        caller is told "failed" about an append that commits), then stop the thread.  What
        is still queued after ``timeout`` is failed with ``shutting_down``."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        if self._thread is None:
            return
        self._thread.join(timeout)
        if self._thread.is_alive():
            log.error("group commit did not drain in time; stopping it")
            with self._cond:
                left = [self._queue.popleft() for _ in range(len(self._queue))]
            exc = StoreUnavailable("the service stopped during the commit",
                                   code="shutting_down")
            for *_, fut in left:
                if not fut.done():
                    fut.set_exception(exc)

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._queue and not self._closed:
                    self._cond.wait()
                if not self._queue:
                    return  # closed and drained
                if self.max_wait > 0 and not self._closed:
                    deadline = time.monotonic() + self.max_wait
                    while len(self._queue) < self.max_items and not self._closed:
                        remaining = deadline - time.monotonic()
                        if remaining <= 0:
                            break
                        self._cond.wait(remaining)
                batch = self._take()
                self._committing = True
            try:
                self.commit(batch)
            except BaseException:
                log.exception("group commit failed")
            finally:
                with self._cond:
                    self._committing = False
                    self._cond.notify_all()

    # -- one batch -----------------------------------------------------------
    def commit(self, batch: list[Slot]) -> None:
        """Commit ``batch`` in this thread and resolve each of its futures."""
        if not batch:
            return
        if self._on_batch is not None:
            self._on_batch(len(batch))
        items = [b[0] for b in batch]
        producers = [b[1] for b in batch]
        flags = [b[2] for b in batch]
        try:
            outcomes = self._work(items, producers, flags)
        except BaseException as exc:  # every caller of the batch gets it
            failure: BaseException = exc if isinstance(exc, Exception) else StoreUnavailable(
                "the service stopped during the commit", code="shutting_down")
            for *_, fut in batch:
                if not fut.done():
                    fut.set_exception(failure)
            if not isinstance(exc, Exception):
                raise
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

    def _work(self, items: list[Any], producers: list[Scope],
              flags: list[bool]) -> list[Any]:
        """One append_many per producer, outcomes in input order, then one ``finish`` for
        the whole batch (one signature for its batch receipts).

        An outcome is the (finished) result, or the exception that failed its
        producer's transaction -- other producers' committed items still succeed.
        """
        outcomes: list[Any] = [None] * len(items)
        groups: dict[Scope, list[int]] = {}
        for i, p in enumerate(producers):
            groups.setdefault(p, []).append(i)
        for producer, idx in groups.items():
            for part in self._group(items, producer, idx):
                for i, res in part:
                    outcomes[i] = res
        if self._finish is None:
            return outcomes
        return self._finish(outcomes, producers, flags)

    def _group(self, items: list[Any], producer: Scope,
               idx: list[int]) -> list[list[tuple[int, Any]]]:
        """The outcomes of one producer's items: one transaction, or -- with ``isolate``,
        when one item's value failed it (nothing committed) -- one transaction each."""
        try:
            results = self._append_many([items[i] for i in idx], producer)
            if len(results) != len(idx):
                raise RuntimeError("append_many must return one result per item")
        except StoreDataError as exc:
            if not self.isolate or len(idx) == 1:
                return [[(i, exc) for i in idx]]
            return [self._group(items, producer, [i])[0] for i in idx]
        except Exception as exc:  # noqa: BLE001 - handed to each caller of the group
            return [[(i, exc) for i in idx]]
        return [list(zip(idx, results, strict=False))]
