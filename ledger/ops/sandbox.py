"""Worker processes for re-execution, each with a per-entry time and memory limit.

A :class:`Sandbox` keeps ``workers`` processes of ``ledger.ops.reexec_worker`` (fresh
interpreters, started with ``PYTHONHASHSEED`` fixed, the address space limited to
``memory_mb``) and hands each one plan at a time.  A worker that has not answered
``time_limit_s`` after it got its plan is killed (``SIGKILL``) and replaced: the entry's
answer is an engine error with reason ``time_limit``; a worker that dies is replaced and
its entry answered ``worker_died`` (or ``memory_limit`` when it had reported that).
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


@dataclass
class _Worker:
    proc: subprocess.Popen[bytes]
    buf: bytes = b""
    job: tuple[Any, dict[str, Any]] | None = None
    deadline: float = 0.0
    started: float = 0.0


@dataclass
class Sandbox:
    workers: int = 1
    time_limit_s: float = 10.0
    memory_mb: int = 2048
    hash_seed: int = 0
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

    def _send(self, w: _Worker, key: Any, msg: dict[str, Any]) -> bool:
        assert w.proc.stdin is not None
        w.job = (key, msg)
        w.started = time.monotonic()
        w.deadline = w.started + self.time_limit_s
        try:
            w.proc.stdin.write(json.dumps(msg).encode() + b"\n")
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
        as the answers come (not in order).  ``message``: ``{"reexecutor", "plan"}``."""
        pending = iter(jobs)
        self.start()
        idle = deque(self._pool)
        busy: dict[int, _Worker] = {}
        rid = 0
        exhausted = False
        while True:
            while idle and not exhausted:
                nxt = next(pending, None)
                if nxt is None:
                    exhausted = True
                    break
                w = idle.popleft()
                rid += 1
                key, msg = nxt
                if not self._send(w, key, {**msg, "id": rid}):
                    yield key, self._replace(w, WORKER_DIED), 0.0
                    idle.append(self._pool[-1])
                    continue
                busy[w.proc.stdout.fileno()] = w  # type: ignore[union-attr]
            if not busy:
                return
            sel = selectors.DefaultSelector()
            for fd in busy:
                sel.register(fd, selectors.EVENT_READ)
            now = time.monotonic()
            wait = max(0.0, min(w.deadline for w in busy.values()) - now)
            ready = sel.select(wait)
            sel.close()
            for sk, _ in ready:
                w = busy[sk.fd]
                chunk = os.read(sk.fd, 1 << 20)
                if chunk:
                    w.buf += chunk
                if b"\n" in w.buf:
                    line, _, w.buf = w.buf.partition(b"\n")
                    assert w.job is not None
                    key, _msg = w.job
                    took = time.monotonic() - w.started
                    w.job = None
                    del busy[sk.fd]
                    idle.append(w)
                    yield key, json.loads(line), took
                elif not chunk:  # the worker died
                    del busy[sk.fd]
                    key = w.job[0] if w.job else None
                    yield key, self._replace(w, WORKER_DIED), time.monotonic() - w.started
                    idle.append(self._pool[-1])
            now = time.monotonic()
            for fd, w in list(busy.items()):
                if now >= w.deadline:
                    del busy[fd]
                    key = w.job[0] if w.job else None
                    yield key, self._replace(w, TIME_LIMIT), now - w.started
                    idle.append(self._pool[-1])

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
