"""Group commit in the append path (``ledger.ops.append.GroupCommit``): ``Ledger.append``
called from many threads shares transactions, each caller gets its own result only once its
transaction committed, and nothing is lost or appended twice.  On SQLite and PostgreSQL."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from typing import Any

from ledger.errors import StoreDataError
from ledger.facade import Ledger
from ledger.ops.append import AppendResult, GroupCommit

THREADS = 8
EACH = 12


def sub(msg: str, key: str | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"engine": "logic",
                           "result": {"status": "BLOCKED", "agent_message": msg}}
    if key is not None:
        out["idempotency_key"] = key
    return out


def test_threads_appending_through_the_facade_share_transactions(db_url, monkeypatch):
    with Ledger.init(db_url) as L:
        real = L.append_many
        transactions: list[int] = []
        committed: set[str] = set()
        lock = threading.Lock()

        def counting(submissions: Sequence[Any], *, producer: str | None = None,
                     ) -> list[AppendResult]:
            time.sleep(0.002)  # a commit that takes a while: the other threads queue meanwhile
            results = real(submissions, producer=producer)  # returns after the commit
            with lock:
                transactions.append(len(submissions))
                committed.update(s["result"]["agent_message"] for s in submissions)
            return results

        monkeypatch.setattr(L, "append_many", counting)
        start = threading.Barrier(THREADS)
        got: dict[str, AppendResult] = {}
        errors: list[BaseException] = []

        def worker(t: int) -> None:
            start.wait()
            try:
                for i in range(EACH):
                    msg = f"t{t}-{i}"
                    res = L.append(sub(msg), producer=f"p{t % 2}")
                    # acknowledged only once its transaction committed
                    assert msg in committed
                    with lock:
                        got[msg] = res
            except BaseException as exc:  # noqa: BLE001 - reported below
                errors.append(exc)

        threads = [threading.Thread(target=worker, args=(t,)) for t in range(THREADS)]
        for th in threads:
            th.start()
        for th in threads:
            th.join(60)
        assert errors == []
        n = THREADS * EACH
        assert len(got) == n and all(r.ok and not r.replayed and r.index == 0
                                     for r in got.values())
        assert sum(transactions) == n
        assert len(transactions) < n / 2, transactions  # batched: far fewer transactions
        # nothing lost, nothing twice: every seq once, each holding its caller's submission
        assert sorted(r.seq for r in got.values()) == list(range(n))
        assert L.head()["size"] == n
        for msg, res in got.items():
            entry = L.get(res.seq)
            assert entry["document"]["agent_message"] == msg
            assert entry["entry_hash"] == res.entry_hash


def test_a_lone_append_is_a_batch_of_one(db_url):
    with Ledger.init(db_url) as L:
        first = L.append(sub("alone", key="k"), producer="p")
        again = L.append(sub("alone", key="k"), producer="p")
        assert first.ok and again.replayed and again.seq == first.seq
        assert (first.index, again.index) == (0, 0)


def test_isolate_commits_each_item_alone_when_one_value_fails_the_group() -> None:
    """With ``isolate`` (the facade's), one item the database refuses fails only its own
    caller: the group is committed again item by item."""
    calls: list[list[str]] = []

    def append_many(items: Sequence[Any], producer: str | None) -> list[Any]:
        calls.append(list(items))
        if "bad" in items:
            raise StoreDataError("the database refused a value")
        return [f"ok-{x}" for x in items]

    gc = GroupCommit(append_many, isolate=True)
    futures = [gc.submit(x, "p") for x in ("a", "bad", "b")]
    gc.commit(gc._take())
    assert [f.exception() is not None for f in futures] == [False, True, False]
    assert [futures[0].result(), futures[2].result()] == ["ok-a", "ok-b"]
    assert calls == [["a", "bad", "b"], ["a"], ["bad"], ["b"]]
