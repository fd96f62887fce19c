"""SIGKILL the producer at random points, with the ledger up or down: nothing it
acknowledged is lost, nothing is stored twice (a real ``ledger serve`` on SQLite)."""

from __future__ import annotations

import random
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.api.server import ROOT
from tests.client.conftest import audit_exit, result_keys
from tests.client.server import LedgerServer

ROUNDS = 6


def run_producer(srv: LedgerServer, token: str, spool: Path, start: int, count: int,
                 kill_after: float | None) -> list[str]:
    proc = subprocess.Popen([sys.executable, "-m", "tests.system.spool_producer", srv.url,
                             token, str(spool), str(start), str(count)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT)
    try:
        out, err = proc.communicate(timeout=kill_after) if kill_after else \
            proc.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGKILL)
        out, err = proc.communicate(timeout=30)
    assert proc.returncode in (0, -signal.SIGKILL), err.decode()
    return out.decode().splitlines()


@pytest.mark.slow
def test_sigkill_at_random_points_loses_nothing_and_stores_nothing_twice(
        sqlite_url: str, tmp_path: Path) -> None:
    rng = random.Random(20261201)
    srv = LedgerServer(sqlite_url, tmp_path, "test.example/sigkill").start()
    token, spool, next_i, spooled = srv.token(), tmp_path / "spool", 0, 0
    try:
        for r in range(ROUNDS):
            if r % 2 == 0:
                srv.kill()  # the ledger is down: appends are spooled
            elif srv.proc is None or srv.proc.poll() is not None:
                srv.start()
            lines = run_producer(srv, token, spool, next_i, 400, rng.uniform(1.2, 2.5))
            acks = [ln.split() for ln in lines if ln.startswith("ack ")]
            assert [int(a[1]) for a in acks] == list(range(next_i, next_i + len(acks)))
            spooled += sum(a[2] == "spooled" for a in acks)
            next_i += len(acks)  # the one in flight when killed is sent again
        if srv.proc is None or srv.proc.poll() is not None:
            srv.start()
        assert run_producer(srv, token, spool, 0, 0, None) == ["drained 0"]
        keys = [k for k in result_keys(srv.db_url) if k and k.startswith("sig-")]
        assert spooled > 0 and next_i > ROUNDS
        assert len(keys) == len(set(keys)), "a result was stored twice"
        assert set(keys) >= {f"sig-{i}" for i in range(next_i)}, "an acknowledged one is lost"
        # the item in flight at the last kill may be there too (spooled, never acknowledged)
        assert set(keys) <= {f"sig-{i}" for i in range(next_i + 1)}
        assert audit_exit(srv.db_url) == 0
    finally:
        srv.stop()
