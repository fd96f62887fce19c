"""``ledger serve --checkpoint-every``: sign, witness and time-stamp checkpoints on a
schedule, in one background thread of the process (one checkpoint at a time).

A checkpoint is made when the ledger grew since the last one and either ``every_s``
seconds passed or ``every_entries`` entries were appended.  Signing takes the append lock
only for the O(log n) tree update (``make_checkpoint``); witnesses and the TSA are asked
after it is released, so appends never wait for them.  Failures are logged and retried
on the next round.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from ledger.core.schedule import Schedule, parse_every
from ledger.errors import LedgerError
from ledger.ops.checkpoint import AnchorConfig, load_anchor_config
from ledger.service import metrics

log = logging.getLogger("ledger.anchoring")
POLL_S = 0.2


class CheckpointScheduler:
    """The background thread; ``start()`` and ``stop()`` from the app's lifespan."""

    def __init__(self, ledger: Any, keyring: Any, schedule: Schedule,
                 anchors: AnchorConfig) -> None:
        self.ledger, self.keyring, self.schedule, self.anchors = ledger, keyring, schedule, \
            anchors
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="checkpoint-every",
                                        daemon=True)
        self.made = 0

    @classmethod
    def from_settings(cls, ledger: Any, keyring: Any, every: str | None,
                      anchors_file: str | None) -> CheckpointScheduler | None:
        if not every:
            return None
        anchors = load_anchor_config(anchors_file) if anchors_file else AnchorConfig()
        return cls(ledger, keyring, parse_every(every), anchors)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=60)

    def _due(self, last_size: int, last_t: float) -> bool:
        size = self.ledger.head()["size"]
        if size <= last_size:
            return False
        s = self.schedule
        return bool(s.entries and size - last_size >= s.entries or
                    s.seconds and time.monotonic() - last_t >= s.seconds)

    def _run(self) -> None:
        last = self.ledger.latest_checkpoint()
        last_size, last_t = (last.size if last else 0), time.monotonic()
        while not self._stop.wait(POLL_S):
            try:
                if not self._due(last_size, last_t):
                    continue
                report = self.ledger.anchored_checkpoint(self.keyring, self.anchors)
                last_size, last_t = report.size, time.monotonic()
                self.made += 1
                for name, why in report.failed.items():
                    metrics.WITNESS_FAILURES.labels(name).inc()
                    log.warning("witness %s did not cosign size %d: %s", name, report.size,
                                why)
                if report.tsa_error:
                    log.warning("no timestamp for size %d: %s", report.size, report.tsa_error)
            except LedgerError as exc:
                metrics.CHECKPOINT_FAILURES.inc()
                log.warning("scheduled checkpoint failed: %s", exc)
                last_t = time.monotonic()
            except Exception:
                log.exception("scheduled checkpoint failed")
                last_t = time.monotonic()
