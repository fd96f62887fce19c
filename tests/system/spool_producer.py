"""A producer for the SIGKILL test (run as a program; killed at random points).

    python -m tests.system.spool_producer URL TOKEN SPOOL_DIR START COUNT

Drains its spool, then appends items START..START+COUNT-1 (idempotency key
``sig-<i>``), printing ``ack <i> <status>`` after each append has returned — i.e. after
the ledger's receipt verified or the spool's fsync.  COUNT 0: drain only, then
``drained <remaining>``.
"""

from __future__ import annotations

import sys

from ledger.client import LedgerClient
from tests.client.submissions import mixed


def main(url: str, token: str, spool: str, start: int, count: int) -> None:
    with LedgerClient(url, token, spool_dir=spool, timeout=2) as client:
        report = client.drain()
        if count == 0:
            print(f"drained {report.remaining}", flush=True)
            return
        for i in range(start, start + count):
            out = client.append({**mixed(i, "sig"), "idempotency_key": f"sig-{i}"})
            print(f"ack {i} {out.status}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]))
