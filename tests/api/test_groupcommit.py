"""The group committer on its own (no server): batching, bounds, ordering, failures, and
no acknowledgement before the commit has returned."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Sequence
from typing import Any

import pytest

from ledger.api.errors import Overloaded
from ledger.api.groupcommit import GroupCommitter
from ledger.errors import StoreUnavailable
from ledger.ops.append import AppendResult


class FakeLedger:
    """append_many that takes ``delay`` s, records batches, and marks items committed."""

    def __init__(self, delay: float = 0.01, fail_for: str | None = None) -> None:
        self.delay = delay
        self.fail_for = fail_for
        self.batches: list[tuple[str | None, list[Any]]] = []
        self.committed: set[Any] = set()
        self.gate = threading.Event()
        self.gate.set()
        self.lock = threading.Lock()

    def append_many(self, items: Sequence[Any], producer: str | None) -> list[AppendResult]:
        self.gate.wait(10)
        time.sleep(self.delay)
        if producer is not None and producer == self.fail_for:
            raise StoreUnavailable("disk on fire")
        with self.lock:
            self.batches.append((producer, list(items)))
            base = sum(len(b) for _, b in self.batches) - len(items)
            self.committed.update(items)
        return [AppendResult(True, seq=base + i, entry_hash=f"h-{item}", index=i)
                for i, item in enumerate(items)]


def run(coro: Any) -> Any:
    return asyncio.run(asyncio.wait_for(coro, 30))


def test_concurrent_submits_share_transactions_and_get_their_own_result() -> None:
    fake = FakeLedger(delay=0.02)

    async def main() -> list[Any]:
        gc = GroupCommitter(fake.append_many, max_wait_ms=5, max_items=64)
        await gc.start()

        async def one(i: int) -> Any:
            res = await gc.submit(f"item-{i}", "p")
            # acknowledged only once its transaction returned
            assert f"item-{i}" in fake.committed
            return res

        try:
            return await asyncio.gather(*(one(i) for i in range(200)))
        finally:
            await gc.stop()

    results = run(main())
    assert [r.entry_hash for r in results] == [f"h-item-{i}" for i in range(200)]
    assert sorted(r.seq for r in results) == list(range(200))
    assert len(fake.batches) < 50  # grouped: far fewer transactions than appends
    assert max(len(b) for _, b in fake.batches) <= 64


def test_a_lone_append_waits_at_most_the_bound() -> None:
    fake = FakeLedger(delay=0)

    async def main() -> float:
        gc = GroupCommitter(fake.append_many, max_wait_ms=20, max_items=8)
        await gc.start()
        try:
            t0 = time.perf_counter()
            await gc.submit("alone", None)
            return time.perf_counter() - t0
        finally:
            await gc.stop()

    assert run(main()) < 0.5
    assert fake.batches == [(None, ["alone"])]


def test_a_failed_transaction_fails_only_its_callers() -> None:
    fake = FakeLedger(delay=0.01, fail_for="bad")

    async def main() -> list[Any]:
        gc = GroupCommitter(fake.append_many, max_wait_ms=20, max_items=16)
        await gc.start()
        try:
            return await asyncio.gather(
                *(gc.submit(f"g{i}", "good") for i in range(3)),
                *(gc.submit(f"b{i}", "bad") for i in range(3)), return_exceptions=True)
        finally:
            await gc.stop()

    out = run(main())
    assert all(isinstance(x, AppendResult) for x in out[:3])
    assert all(isinstance(x, StoreUnavailable) for x in out[3:])
    assert not any(i.startswith("b") for i in fake.committed)


def test_producers_are_committed_separately_in_arrival_order() -> None:
    fake = FakeLedger(delay=0.0)

    async def main() -> None:
        gc = GroupCommitter(fake.append_many, max_wait_ms=50, max_items=16)
        await gc.start()
        try:
            await asyncio.gather(*(gc.submit(f"x{i}", "a" if i % 2 else "b")
                                   for i in range(6)))
        finally:
            await gc.stop()

    run(main())
    by = {p: items for p, items in fake.batches}
    assert by == {"b": ["x0", "x2", "x4"], "a": ["x1", "x3", "x5"]}


def test_queue_is_bounded() -> None:
    fake = FakeLedger(delay=0)
    fake.gate.clear()  # the first commit blocks until released

    async def main() -> Any:
        gc = GroupCommitter(fake.append_many, max_wait_ms=0, max_items=1, max_queue=2)
        await gc.start()
        first = asyncio.create_task(gc.submit("a", None))
        await asyncio.sleep(0.05)  # "a" is committing (blocked); the queue is empty
        waiting = [asyncio.create_task(gc.submit(x, None)) for x in ("b", "c")]
        await asyncio.sleep(0.01)
        with pytest.raises(Overloaded):
            await gc.submit("d", None)
        fake.gate.set()
        done = await asyncio.gather(first, *waiting)
        await gc.stop()
        return done

    assert len(run(main())) == 3
    assert [b for _, b in fake.batches] == [["a"], ["b"], ["c"]]


def test_stopped_committer_refuses() -> None:
    fake = FakeLedger()

    async def main() -> None:
        gc = GroupCommitter(fake.append_many)
        await gc.start()
        await gc.stop()
        with pytest.raises(StoreUnavailable):
            await gc.submit("late", None)

    run(main())


def test_bounds_are_validated() -> None:
    with pytest.raises(ValueError):
        GroupCommitter(FakeLedger().append_many, max_items=0)


def test_stop_commits_the_batch_in_flight_and_everything_queued() -> None:
    fake = FakeLedger(delay=0.05)

    async def main() -> list[Any]:
        gc = GroupCommitter(fake.append_many, max_items=2)
        await gc.start()
        calls = [asyncio.create_task(gc.submit(f"s{i}", None)) for i in range(5)]
        await asyncio.sleep(0.01)  # the first batch is committing
        await gc.stop()
        return await asyncio.gather(*calls, return_exceptions=True)

    out = run(main())
    assert all(isinstance(x, AppendResult) for x in out), out
    assert fake.committed == {f"s{i}" for i in range(5)}


def test_finish_runs_once_per_committed_batch_with_each_callers_choice() -> None:
    """One finish call per batch (so one batch-receipt signature), after the commit, with
    every caller's outcome, producer and receipt choice in queue order; a producer's failed
    transaction reaches finish as its exception and its callers get it."""
    fake = FakeLedger(delay=0.02, fail_for="bad")
    calls: list[tuple[list[Any], list[str | None], list[bool]]] = []

    def finish(outcomes: list[Any], producers: list[str | None],
               flags: list[bool]) -> list[Any]:
        assert all(isinstance(o, Exception) or o.entry_hash.removeprefix("h-") in
                   fake.committed for o in outcomes)
        calls.append((list(outcomes), list(producers), list(flags)))
        return [o if isinstance(o, Exception) else (o.entry_hash, f, len(outcomes))
                for o, f in zip(outcomes, flags, strict=True)]

    async def main() -> list[Any]:
        gc = GroupCommitter(fake.append_many, finish=finish, max_wait_ms=10, max_items=64)
        await gc.start()
        try:
            return await asyncio.gather(
                *(gc.submit(f"i{i}", "bad" if i % 7 == 3 else "p", i % 2 == 0)
                  for i in range(40)), return_exceptions=True)
        finally:
            await gc.stop()

    results = run(main())
    for i, r in enumerate(results):
        if i % 7 == 3:
            assert isinstance(r, StoreUnavailable)
        else:
            assert r[0] == f"h-i{i}" and r[1] is (i % 2 == 0)
    assert len(calls) < 40 and sum(len(c[0]) for c in calls) == 40
    for outcomes, producers, flags in calls:
        assert len(outcomes) == len(producers) == len(flags)
        assert all(isinstance(o, StoreUnavailable) == (p == "bad")
                   for o, p in zip(outcomes, producers, strict=True))
