"""SIGKILL the producer at random points, with the ledger up or down: nothing it
acknowledged is lost, nothing is stored twice (a real ``ledger serve`` on SQLite).

The kill points are counted in acknowledgements, not seconds (a random number of acks,
then a random few milliseconds into the next append), so every round acknowledges
something and the property is asserted whatever the machine's load."""

from __future__ import annotations

import random
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import pytest

from tests.api.server import ROOT
from tests.client.conftest import audit_exit, result_keys
from tests.client.server import LedgerServer

ROUNDS = 6


def run_producer(srv: LedgerServer, token: str, spool: Path, start: int, count: int,
                 kill: tuple[int, float] | None) -> list[str]:
    """Run the producer; ``kill`` = (acks, delay): SIGKILL it ``delay`` seconds after its
    ``acks``-th acknowledgement (so the kill lands at a random point of an append whatever
    the machine's speed), else let it finish.  Returns every line it printed."""
    proc = subprocess.Popen([sys.executable, "-m", "tests.system.spool_producer", srv.url,
                             token, str(spool), str(start), str(count)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT)
    assert proc.stdout is not None and proc.stderr is not None
    guard = threading.Timer(300, proc.kill)  # a hung producer fails the test, never hangs it
    guard.start()
    lines: list[str] = []
    try:
        if kill is not None:
            acks, delay = kill
            while sum(ln.startswith("ack ") for ln in lines) < acks:
                line = proc.stdout.readline().decode()
                if not line:
                    break  # it ended (or the guard killed it)
                lines.append(line.rstrip("\n"))
            time.sleep(delay)
            proc.send_signal(signal.SIGKILL)
        out, err = proc.communicate(timeout=310)
    finally:
        guard.cancel()
    lines += out.decode().splitlines()
    assert proc.returncode in (0, -signal.SIGKILL), err.decode()
    return lines


@pytest.mark.slow
def test_sigkill_at_random_points_loses_nothing_and_stores_nothing_twice(
        sqlite_url: str, tmp_path: Path) -> None:
    rng = random.Random(20261201)
    srv = LedgerServer(sqlite_url, tmp_path, "test.example/sigkill").start()
    token, spool, next_i, spooled = srv.token(), tmp_path / "spool", 0, 0
    seen: list[tuple[int, dict[str, int]]] = []  # per round: the ack statuses
    try:
        for r in range(ROUNDS):
            if r % 2 == 0:
                srv.kill()  # the ledger is down: appends are spooled
            elif srv.proc is None or srv.proc.poll() is not None:
                srv.start()
            kill = (rng.randint(2, 40), rng.uniform(0, 0.05))
            lines = run_producer(srv, token, spool, next_i, 400, kill)
            acks = [ln.split() for ln in lines if ln.startswith("ack ")]
            assert len(acks) >= kill[0], lines  # killed after that many acknowledgements
            if r % 2 == 0:  # with the ledger down nothing can be acknowledged as appended
                assert all(a[2] == "spooled" for a in acks), lines
            assert [int(a[1]) for a in acks] == list(range(next_i, next_i + len(acks)))
            spooled += sum(a[2] == "spooled" for a in acks)
            seen.append((r, dict(Counter(a[2] for a in acks))))
            next_i += len(acks)  # the one in flight when killed is sent again
        if srv.proc is None or srv.proc.poll() is not None:
            srv.start()
        assert run_producer(srv, token, spool, 0, 0, None) == ["drained 0"]
        keys = [k for k in result_keys(srv.db_url) if k and k.startswith("sig-")]
        assert spooled > 0 and next_i > ROUNDS, seen
        assert len(keys) == len(set(keys)), "a result was stored twice"
        assert set(keys) >= {f"sig-{i}" for i in range(next_i)}, "an acknowledged one is lost"
        # the item in flight at the last kill may be there too (spooled, never acknowledged)
        assert set(keys) <= {f"sig-{i}" for i in range(next_i + 1)}
        assert audit_exit(srv.db_url) == 0
    finally:
        srv.stop()
