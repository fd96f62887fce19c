"""Many writer processes at once, and a SIGKILL in the middle of a batch."""

from __future__ import annotations

import multiprocessing as mp
import os
import random
import signal
import subprocess
import sys
import time

import pytest

from ledger import Ledger
from ledger.demo.samples import realistic
from tests.chaincheck import recompute_chain

pytestmark = pytest.mark.slow

WRITERS = 4
SINGLES = 25
BATCHES = 3
BATCH = 20


def _writer(url: str, wid: int, barrier) -> None:
    subs = realistic(SINGLES + BATCHES * BATCH, seed=wid, start=wid * 10_000)
    for s in subs:
        s["subject"] = f"writer-{wid}"
    with Ledger.open(url) as L:
        barrier.wait()
        for s in subs[:SINGLES]:
            assert L.append(s, producer=f"w{wid}").ok
        rest = subs[SINGLES:]
        for i in range(BATCHES):
            res = L.append_many(rest[i * BATCH:(i + 1) * BATCH], producer=f"w{wid}")
            assert all(r.ok for r in res)
            seqs = [r.seq for r in res]
            assert seqs == list(range(seqs[0], seqs[0] + BATCH)), "a batch must be contiguous"


def test_concurrent_writer_processes_keep_one_gapless_chain(db_url):
    Ledger.init(db_url).close()
    ctx = mp.get_context("spawn")
    barrier = ctx.Barrier(WRITERS)
    procs = [ctx.Process(target=_writer, args=(db_url, w, barrier)) for w in range(WRITERS)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    total = WRITERS * (SINGLES + BATCHES * BATCH)
    assert recompute_chain(db_url) == total
    with Ledger.open(db_url) as L:
        producers = {L.get(s)["producer"] for s in range(total)}
    assert producers == {f"w{w}" for w in range(WRITERS)}


CRASH_BATCH = 400

CHILD = """
import sys
from ledger import Ledger
from ledger.demo.samples import realistic
url = sys.argv[1]
subs = realistic({n}, seed=3)
with Ledger.open(url) as L:
    print("ready", flush=True)
    i = 0
    while True:
        res = L.append_many(subs)
        assert all(r.ok for r in res)
        i += 1
        print("batch", i, flush=True)
"""


@pytest.mark.parametrize("delay", [0.15, 0.45])
def test_sigkill_mid_batch_leaves_whole_batches_and_a_valid_chain(db_url, delay):
    Ledger.init(db_url).close()
    proc = subprocess.Popen([sys.executable, "-c", CHILD.format(n=CRASH_BATCH), db_url],
                            stdout=subprocess.PIPE, text=True,
                            cwd=os.path.dirname(os.path.dirname(os.path.dirname(__file__))))
    assert proc.stdout.readline().strip() == "ready"
    proc.stdout.readline()  # at least one batch committed
    time.sleep(delay + random.random() * 0.1)
    proc.send_signal(signal.SIGKILL)
    proc.wait(30)
    proc.stdout.close()
    size = recompute_chain(db_url)
    assert size >= CRASH_BATCH
    assert size % CRASH_BATCH == 0, f"partial batch survived the crash: size {size}"
    # the ledger keeps working after the crash
    with Ledger.open(db_url) as L:
        assert L.append(realistic(1)[0]).seq == size
    assert recompute_chain(db_url) == size + 1
