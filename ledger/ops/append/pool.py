"""Validating a large batch on every core (``validate_batch``), before the lock."""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Sequence
from concurrent.futures.process import BrokenProcessPool
from typing import Any

from ledger.core.submission import Submission, loads, parse_submission
from ledger.errors import SubmissionError, UsageError
from ledger.ops.append.judge import AttestationJudge, default_judge
from ledger.ops.append.prepare import (
    AppendResult,
    Prepared,
    prepare_result,
    validate_into,
    validate_items,
)

# -- validating a large batch on every core ----------------------------------------------
# A batch of at least POOL_MIN_ITEMS texts is validated by this process and a pool of
# worker processes side by side, before the lock is taken (the lock and the commit stay
# single, in this process).  Each worker runs the very code of ``validate_items`` on a
# slice of the texts; an attested item only comes back parsed, and is judged here (the
# trust store is this process's).  Results are merged in input order.  Below the
# threshold (and for single appends) handing the items over costs more than it saves
# (docs/performance.md).  LEDGER_VALIDATE_WORKERS sets the pool size (default 0: no pool).
POOL_MIN_ITEMS = 400
log = logging.getLogger("ledger.ops.append")

_POOL: list[Any] = []  # [ProcessPoolExecutor] once started

_POOL_LOCK = threading.Lock()



def pool_workers() -> int:
    """Worker processes for large batches: LEDGER_VALIDATE_WORKERS (default 0, no pool:
    it pays only where a core is idle, see docs/performance.md)."""
    env = os.environ.get("LEDGER_VALIDATE_WORKERS", "").strip()
    if not env:
        return 0
    try:
        return max(0, int(env))
    except ValueError:
        raise UsageError("LEDGER_VALIDATE_WORKERS must be an integer",
                         field="LEDGER_VALIDATE_WORKERS") from None


def _pool(workers: int) -> Any:
    """The worker processes, started on first use.  Spawned (a worker never inherits this
    process's threads, locks or connections) and started at once, with the caller's
    ``__main__`` hidden while they start: a worker runs only ledger code, so it must not
    import (and run again) the caller's main script, guarded by ``if __name__ ==
    "__main__"`` or not."""
    with _POOL_LOCK:
        if not _POOL:
            import multiprocessing
            import sys
            import types
            from concurrent.futures import ProcessPoolExecutor

            pool = ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"))
            main = sys.modules["__main__"]
            sys.modules["__main__"] = types.ModuleType("__main__")
            try:
                for fut in [pool.submit(pool_workers) for _ in range(workers)]:
                    fut.result()
            except BaseException:
                pool.shutdown(wait=False, cancel_futures=True)
                raise
            finally:
                sys.modules["__main__"] = main
            _POOL.append(pool)
        return _POOL[0]


def shutdown_pool() -> None:
    """Stop the validation workers (they are started again on the next large batch)."""
    with _POOL_LOCK:
        while _POOL:
            _POOL.pop().shutdown(wait=True, cancel_futures=True)


# A worker's answer per item: (index, error dict) | (index, sealed state) | (index, Submission)
_Outcome = tuple[int, Any]


def _validate_slice(texts: list[bytes], producer: str | None, ledger_id: str, start: int,
                    ) -> list[_Outcome]:
    """In a worker: ``validate_items`` of ``texts``, except that an attested item is only
    parsed (its verdict needs the caller's trust store)."""
    out: list[_Outcome] = []
    for i, raw in enumerate(texts, start):
        try:
            sub = parse_submission(loads(raw), parsed_by_loads=True)
            if sub.attestation is not None:
                out.append((i, sub))
                continue
            p = prepare_result(sub, producer, default_judge).seal(ledger_id)
        except SubmissionError as exc:
            out.append((i, exc.to_dict()))
            continue
        # what linking needs, as plain values (pickling the parsed Submission would cost
        # about as much as validating it; the shared bytes objects are pickled once)
        out.append((i, (p.fields, p.payloads, p.digests, p.salts, p.sealed, p.envelope,
                        p.stored)))
    return out


def _unpack(state: tuple[Any, ...]) -> Prepared:
    """A worker's sealed unattested result as a Prepared (``sub`` is None: it is only
    needed to judge an attestation again under the lock)."""
    fields, payloads, digests, salts, sealed, envelope, stored = state
    return Prepared("result", fields, payloads, fields["idempotency_key"], digests=digests,
                    envelope=envelope, salts=salts, sealed=sealed, stored=stored)


def validate_batch(items: Sequence[Any], producer: str | None, ledger_id: str,
                   judge: AttestationJudge, workers: int | None = None,
                   ) -> tuple[list[Prepared], list[AppendResult]]:
    """``validate_items`` for the batches of ``append_many``: the same results (pinned by
    tests/ops/test_validate_pool.py), on several processes when the batch is large and
    every item is text.  ``judge`` must give unattested items the verdict of
    :func:`default_judge` (every judge of this module does)."""
    workers = pool_workers() if workers is None else workers
    if workers < 1 or len(items) < POOL_MIN_ITEMS or \
            not all(type(x) is bytes for x in items):
        return validate_items(items, producer, ledger_id, judge)
    share = len(items) // (workers + 1)  # this process validates the first share
    bounds = [share + (len(items) - share) * k // workers for k in range(workers + 1)]
    try:
        pool = _pool(workers)
        futures = [pool.submit(_validate_slice, list(items[a:b]), producer, ledger_id, a)
                   for a, b in zip(bounds, bounds[1:], strict=False)]
        fut_start = dict(zip(futures, bounds, strict=False))
        fut_end = dict(zip(futures, bounds[1:], strict=False))
    except (OSError, RuntimeError) as exc:  # cannot start processes here: validate alone
        log.warning("validation workers unavailable (%s); validating in this process", exc)
        shutdown_pool()
        return validate_items(items, producer, ledger_id, judge)
    prepared: list[Prepared] = []
    rejected: list[AppendResult] = []
    validate_into(items[:share], producer, ledger_id, judge, 0, prepared, rejected)
    for fut in futures:
        try:
            outcomes = fut.result()
        except BrokenProcessPool as exc:  # a worker died: do its slice here
            log.warning("a validation worker stopped (%s); validating in this process", exc)
            shutdown_pool()
            outcomes = _validate_slice(list(items[fut_start[fut]:fut_end[fut]]), producer,
                                       ledger_id, fut_start[fut])
        for i, got in outcomes:
            if isinstance(got, dict):
                rejected.append(AppendResult(ok=False, error=got, index=i))
                continue
            if isinstance(got, tuple):
                got = _unpack(got)
            elif isinstance(got, Submission):
                try:
                    got = prepare_result(got, producer, judge).seal(ledger_id)
                except SubmissionError as exc:
                    rejected.append(AppendResult(ok=False, error=exc.to_dict(), index=i))
                    continue
            got.raw, got.index = items[i], i
            prepared.append(got)
    return prepared, rejected
