"""Worker processes for re-execution, each with a per-entry time and memory limit.

A :class:`Sandbox` keeps ``workers`` processes of ``ledger.ops.reexec_worker`` (fresh
interpreters, started with ``PYTHONHASHSEED`` fixed, the address space limited to
``memory_mb``) and keeps up to ``depth`` plans in each one's pipe: the one it runs and
the next (a small one), so a worker takes its next plan as soon as it has answered, without
a round trip through the job.  A plan's time starts when it was sent to an idle worker, or
when the answer before it arrived (the worker reads the next plan when it has written that
answer).  A worker that has not answered ``time_limit_s`` after its plan started is killed
(``SIGKILL``) and replaced: the entry's answer is an engine error with reason
``time_limit``; a worker that dies is replaced and its entry answered ``worker_died`` (or
``memory_limit`` when it had reported that).  The plans queued behind the one that ended
so are sent again to a worker, not charged.
"""

from __future__ import annotations

import json
import os
import selectors
import signal
import subprocess
import sys
import time
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from ledger.core.reexec import TIME_LIMIT, WORKER_DIED
from ledger.errors import LedgerError

START_TIMEOUT_S = 120.0
# Plans in flight per worker: the one it runs and the next, already in its pipe, so the
# worker goes from one answer to the next plan without waiting for the job's turn.
QUEUE_DEPTH = 2
# A plan is queued behind another only if it is this small: the pipe (64 KiB on Linux)
# then always has room for it, and writing it never blocks the job.
QUEUED_MAX_BYTES = 32 * 1024


@dataclass
class _Job:
    key: Any
    msg: dict[str, Any]


@dataclass
class _Worker:
    proc: subprocess.Popen[bytes]
    buf: bytes = b""
    jobs: deque[_Job] = field(default_factory=deque)  # sent, in order; the first one runs
    deadline: float = 0.0  # of the running job
    started: float = 0.0   # when the running job was sent, or the answer before it came


@dataclass
class Sandbox:
    workers: int = 1
    time_limit_s: float = 10.0
    memory_mb: int = 2048
    hash_seed: int = 0
    depth: int = QUEUE_DEPTH
    _pool: list[_Worker] = field(default_factory=list)
    restarts: int = 0

    def _spawn(self) -> _Worker:
        env = {**os.environ, "PYTHONHASHSEED": str(self.hash_seed)}
        proc = subprocess.Popen(
            [sys.executable, "-m", "ledger.ops.reexec_worker", "--memory-mb",
             str(self.memory_mb)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL, env=env, start_new_session=True)
        w = _Worker(proc)
        line = self._read_line(w, time.monotonic() + START_TIMEOUT_S)
        if line is None:
            self._kill(w)
            raise LedgerError("a re-execution worker did not start", code="worker_failed")
        return w

    @staticmethod
    def _read_line(w: _Worker, deadline: float) -> bytes | None:
        assert w.proc.stdout is not None
        fd = w.proc.stdout.fileno()
        while b"\n" not in w.buf:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            sel = selectors.DefaultSelector()
            sel.register(fd, selectors.EVENT_READ)
            ready = sel.select(left)
            sel.close()
            if not ready:
                return None
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                return None
            w.buf += chunk
        line, _, w.buf = w.buf.partition(b"\n")
        return line

    @staticmethod
    def _kill(w: _Worker) -> None:
        try:  # the worker leads its own session: anything it started dies with it
            os.killpg(w.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        w.proc.wait()
        for f in (w.proc.stdin, w.proc.stdout):
            if f is not None:
                f.close()

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        for w in self._pool:
            if w.proc.stdin is not None:
                try:
                    w.proc.stdin.close()
                except BrokenPipeError:
                    pass
            try:
                w.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
            self._kill(w)
        self._pool = []

    def _send(self, w: _Worker, job: _Job, data: bytes, now: float) -> bool:
        assert w.proc.stdin is not None
        if not w.jobs:
            w.started, w.deadline = now, now + self.time_limit_s
        w.jobs.append(job)
        try:
            w.proc.stdin.write(data)
            w.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            return False
        return True

    def start(self) -> None:
        """Start the workers now (``run`` starts any that are missing)."""
        while len(self._pool) < max(1, self.workers):
            self._pool.append(self._spawn())

    def run(self, jobs: Iterable[tuple[Any, dict[str, Any]]],
            ) -> Iterator[tuple[Any, dict[str, Any], float]]:
        """Execute every ``(key, message)`` of ``jobs``; yield ``(key, answer, seconds)``
        as the answers come (not in order; ``seconds`` from the plan's start, above).
        ``message``: ``{"reexecutor", "plan"}``."""
        pending = iter(jobs)
        self.start()
        r = _Round(self, pending)
        for w in self._pool:
            r.watch(w)
        try:
            while True:
                dead = r.fill()
                for w in dead:  # its running plan (the one just sent, if none ran) ends
                    key = w.jobs[0].key
                    yield key, r.replaced(w, WORKER_DIED), time.monotonic() - w.started
                if dead:
                    continue
                running = [w for w in self._pool if w.jobs]
                if not running:
                    return
                wait = max(0.0, min(w.deadline for w in running) - time.monotonic())
                for sk, _ in r.sel.select(wait):
                    yield from r.answers(r.by_fd[sk.fd], sk.fd)
                yield from r.expired()
        finally:
            r.sel.close()

    def _replace(self, w: _Worker, reason: str) -> dict[str, Any]:
        """Kill ``w``, start its replacement at the end of the pool, and say why."""
        self._kill(w)
        code = w.proc.returncode
        self._pool.remove(w)
        self._pool.append(self._spawn())
        self.restarts += 1
        if reason == TIME_LIMIT:
            msg = f"killed after the time limit of {self.time_limit_s:g} s"
        else:
            msg = f"the worker ended (exit status {code}) without an answer"
        return {"error": "Timeout" if reason == TIME_LIMIT else "WorkerDied",
                "reason": reason, "message": msg}


@dataclass
class _Round:
    """One :meth:`Sandbox.run`: the jobs still to send, the ones to send again (queued
    behind a plan that ended its worker), and the selector over the workers' answers."""

    box: Sandbox
    pending: Iterator[tuple[Any, dict[str, Any]]]
    again: deque[_Job] = field(default_factory=deque)
    sel: selectors.BaseSelector = field(default_factory=selectors.DefaultSelector)
    by_fd: dict[int, _Worker] = field(default_factory=dict)
    rid: int = 0
    exhausted: bool = False

    def watch(self, w: _Worker) -> None:
        fd = w.proc.stdout.fileno()  # type: ignore[union-attr]
        self.by_fd[fd] = w
        self.sel.register(fd, selectors.EVENT_READ)

    def replaced(self, w: _Worker, reason: str) -> dict[str, Any]:
        """Replace ``w``; its running plan gets the answer, the plans queued behind
        it are sent again (they never started: nothing is charged to them)."""
        fd = w.proc.stdout.fileno()  # type: ignore[union-attr]
        self.sel.unregister(fd)
        del self.by_fd[fd]
        if w.jobs:
            w.jobs.popleft()
        self.again.extendleft(reversed(w.jobs))
        w.jobs.clear()
        answer = self.box._replace(w, reason)
        self.watch(self.box._pool[-1])
        return answer

    def _next_job(self) -> _Job | None:
        """The next job to send: one to send again first; None when there is none."""
        if self.again:
            return self.again.popleft()
        if self.exhausted:
            return None
        nxt = next(self.pending, None)
        if nxt is None:
            self.exhausted = True
            return None
        return _Job(*nxt)

    def fill(self) -> list[_Worker]:
        """Send plans until every worker holds ``depth`` (a queued plan only if small);
        returns the workers whose pipe broke."""
        dead: list[_Worker] = []
        for slot in range(max(1, self.box.depth)):
            for w in list(self.box._pool):
                if len(w.jobs) > slot or w in dead:
                    continue
                job = self._next_job()
                if job is None:
                    break
                self.rid += 1
                data = json.dumps({**job.msg, "id": self.rid}).encode() + b"\n"
                if slot and len(data) > QUEUED_MAX_BYTES:
                    self.again.appendleft(job)  # too big to wait in a pipe: later
                    continue
                if not self.box._send(w, job, data, time.monotonic()):
                    dead.append(w)
        return dead

    def answers(self, w: _Worker, fd: int) -> Iterator[tuple[Any, dict[str, Any], float]]:
        """The answers ``w`` has written (its next plan's time starts at each); a worker
        that died is replaced, its running plan answered."""
        chunk = os.read(fd, 1 << 20)
        w.buf += chunk
        while b"\n" in w.buf and w.jobs:
            line, _, w.buf = w.buf.partition(b"\n")
            now = time.monotonic()
            job = w.jobs.popleft()
            took = now - w.started
            w.started, w.deadline = now, now + self.box.time_limit_s
            yield job.key, json.loads(line), took
        if not chunk and w.jobs:  # the worker died
            yield w.jobs[0].key, self.replaced(w, WORKER_DIED), time.monotonic() - w.started
        elif not chunk:  # it died idle: replaced, nothing to answer
            self.replaced(w, WORKER_DIED)

    def expired(self) -> Iterator[tuple[Any, dict[str, Any], float]]:
        """The running plans past their deadline, each answered and its worker replaced."""
        now = time.monotonic()
        for w in list(self.box._pool):
            if w.jobs and now >= w.deadline:
                yield w.jobs[0].key, self.replaced(w, TIME_LIMIT), now - w.started
