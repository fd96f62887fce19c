"""The service's own watch: ``--audit-every`` (background audits) and the alert
conditions of ``--alert-webhook`` (docs/operations.md#alerts).

Two daemon threads per process, active only in the process holding the leader lock
(``fcntl.flock`` on a file of the service's runtime directory, so with ``--workers N``
exactly one worker audits and watches; if it dies another takes over):

- ``AuditScheduler``: when the latest complete audit run is older than ``every_s`` (or
  there is none), runs the audit (``--since-last`` when asked) with ``--record``
  semantics (an ``audit_run`` entry is appended); one at a time.  A failed or
  needs-review outcome raises an alert once; the next audits with the same condition do
  not, until one passes (or is unverified only by redacted payloads) or the condition
  changes kind.
- ``Watchdog`` (only with a webhook): every ``poll_s`` reads the monitoring snapshot;
  raises an alert when the store has been unavailable for ``store_down_after_s``, when
  entries wait for a checkpoint longer than ``checkpoint_overdue_s``, or when a
  configured witness has not cosigned the latest checkpoint ``witness_overdue_s`` after
  it was signed.  Each condition alerts once when it starts and re-arms when it clears.
"""

from __future__ import annotations

import fcntl
import logging
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ledger.core.alert import audit_alert_part
from ledger.core.audit_report import AuditReport
from ledger.errors import LedgerError
from ledger.ops.audit import AuditOptions
from ledger.service import metrics
from ledger.service.alerts import AlertSender, build_alert, now_us

log = logging.getLogger("ledger.watch")
AUDIT_PRODUCER = "ledger-serve"


class Leader:
    """A non-blocking exclusive ``flock`` held for the life of the process."""

    def __init__(self, path: str | None) -> None:
        self.path = path
        self._fd: int | None = None
        self._lock = threading.Lock()

    def held(self) -> bool:
        if self.path is None:
            return True
        with self._lock:
            if self._fd is not None:
                return True
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                os.close(fd)
                return False
            self._fd = fd
            return True

    def release(self) -> None:
        with self._lock:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None


@dataclass(frozen=True)
class WatchConfig:
    audit_every_s: float | None = None
    audit_since_last: bool = False
    checkpoint_overdue_s: float | None = None
    witness_overdue_s: float | None = None
    store_down_after_s: float = 60.0
    witnesses: tuple[str, ...] = ()
    poll_s: float = 1.0
    # the ledger's public keys (its keyring's jwks.json): the background audit checks the
    # signatures of redactions and checkpoints with them, so that a lawful erasure is seen
    # as one (docs/audit.md "--since-last")
    audit_keys: tuple[str, ...] = ()


class Watch:
    """Both threads and what they share; ``start()``/``stop()`` from the app's lifespan."""

    def __init__(self, ledger: Any, config: WatchConfig, sender: AlertSender | None,
                 runtime_dir: str | None) -> None:
        self.ledger, self.config, self.sender = ledger, config, sender
        self.leader = Leader(str(Path(runtime_dir) / "watch.lock") if runtime_dir else None)
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        if sender is not None:  # the conditions are only watched to be alerted
            self._threads.append(threading.Thread(target=self._watch, name="watchdog",
                                                  daemon=True))
        if config.audit_every_s:
            self._threads.append(threading.Thread(target=self._audits, name="audit-every",
                                                  daemon=True))
        self._audit_lock = threading.Lock()
        self.audits = 0
        self.alerts: list[dict[str, Any]] = []
        self._last: Any = None  # the latest snapshot, for the head/checkpoint of alerts
        self._audit_alerted: str | None = None  # the audit condition in force, once alerted

    def start(self) -> None:
        if self.sender is not None:
            self.sender.start()
        for t in self._threads:
            t.start()

    def stop(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(timeout=120)
        self.leader.release()

    # -- alerts -------------------------------------------------------------------
    def raise_alert(self, kind: str, *, audit: dict[str, Any] | None = None,
                    detail: dict[str, Any] | None = None) -> None:
        s = self._last
        head = None if s is None else {"size": s.size, "head_hash": s.head_hash}
        checkpoint = None if s is None or s.checkpoint_size is None else {
            "size": s.checkpoint_size, "note": s.checkpoint_note}
        meta = self.ledger.meta
        alert = build_alert(kind, origin=meta.origin, ledger_id=meta.ledger_id,
                            now_us=now_us(), head=head, checkpoint=checkpoint, audit=audit,
                            detail=detail)
        log.warning("alert %s", kind, extra={"event": "alert_raised", "kind": kind})
        self.alerts.append(alert)
        if self.sender is not None:
            self.sender.send(alert)

    # -- background audits ----------------------------------------------------------
    def _audits(self) -> None:
        every = float(self.config.audit_every_s or 0)
        last_try = 0.0
        while not self._stop.wait(self.config.poll_s):
            if not self.leader.held() or time.monotonic() - last_try < every:
                continue
            try:
                finished = self.ledger.monitor_status(False).last_audit.run_finished_us
            except LedgerError:
                continue  # the watchdog reports a store that stays down
            if finished is not None and now_us() - finished < every * 1e6:
                continue
            last_try = time.monotonic()
            self.run_audit()

    def run_audit(self) -> AuditReport | None:
        """One recorded audit (skipped if one is running in this process)."""
        if not self._audit_lock.acquire(blocking=False):
            return None
        try:
            report: AuditReport = self.ledger.audit(AuditOptions(
                since_last=self.config.audit_since_last, record=True,
                producer=AUDIT_PRODUCER, keys=self.config.audit_keys,
                command="ledger serve (scheduled audit)", actor=AUDIT_PRODUCER))
        except LedgerError as exc:
            metrics.AUDIT_RUNS.labels("error").inc()
            log.warning("scheduled audit could not run: %s", exc,
                        extra={"event": "audit", "error_code": exc.code})
            return None
        finally:
            self._audit_lock.release()
        self.audits += 1
        out = report.outcome
        metrics.AUDIT_RUNS.labels(out).inc()
        log.info("scheduled audit %s", out, extra={
            "event": "audit", "outcome": out, "findings": len(report.findings),
            "seq": report.recorded_seq})
        kind = audit_alert_kind(report)
        if kind is None:
            self._audit_alerted = None  # the condition cleared: the next one alerts again
        elif kind != self._audit_alerted:
            self._audit_alerted = kind
            self._refresh()
            self.raise_alert(kind, audit=audit_summary(report))
        return report

    # -- the watchdog -------------------------------------------------------------
    def _refresh(self) -> Any:
        try:
            self._last = self.ledger.monitor_status(False)
            return self._last
        except LedgerError:
            return None

    def _watch(self) -> None:
        c = self.config
        down_since: float | None = None
        down_alerted = False
        cp_alerted: int | None = None
        w_alerted: dict[str, int] = {}
        started_us = now_us()
        while not self._stop.wait(c.poll_s):
            if not self.leader.held():
                continue
            try:
                s = self.ledger.monitor_status(False)
            except LedgerError as exc:
                down_since = down_since or time.monotonic()
                down_for = time.monotonic() - down_since
                if not down_alerted and down_for >= c.store_down_after_s:
                    down_alerted = True
                    self.raise_alert("store_unavailable", detail={
                        "down_for_s": int(down_for), "code": exc.code})
                continue
            if down_alerted:
                log.info("store reachable again", extra={"event": "store_recovered"})
            down_since, down_alerted = None, False
            self._last = s
            now = now_us()
            cp_size = s.checkpoint_size or 0
            since = s.checkpoint_created_us or started_us
            if c.checkpoint_overdue_s and s.size > cp_size and \
                    now - since > c.checkpoint_overdue_s * 1e6 and cp_alerted != cp_size:
                cp_alerted = cp_size
                self.raise_alert("checkpoint_overdue", detail={
                    "uncovered_entries": s.size - cp_size,
                    "overdue_after_s": int(c.checkpoint_overdue_s),
                    "checkpoint_age_s": int((now - since) / 1e6)})
            if c.witness_overdue_s and s.checkpoint_size and s.checkpoint_created_us:
                for name in c.witnesses:
                    got = s.witnesses.get(name, 0)
                    late = now - s.checkpoint_created_us > c.witness_overdue_s * 1e6
                    if got < s.checkpoint_size and late and w_alerted.get(name) != cp_size:
                        w_alerted[name] = cp_size
                        self.raise_alert("witness_overdue", detail={
                            "witness": name, "cosigned_size": got,
                            "checkpoint_size": s.checkpoint_size,
                            "overdue_after_s": int(c.witness_overdue_s)})


def audit_alert_kind(report: AuditReport) -> str | None:
    """The alert condition an audit shows: ``audit_failed``, ``audit_needs_review``, or
    None when it passed or did not verify only payloads erased by redactions (nothing to
    review, :meth:`ledger.core.audit_report.AuditReport.only_redactions`)."""
    out = report.outcome
    if out == "failed":
        return "audit_failed"
    if out == "passed" or report.only_redactions():
        return None
    return "audit_needs_review"


def audit_summary(report: AuditReport) -> dict[str, Any]:
    """What an alert says about an audit: counts and the first findings, no values."""
    return audit_alert_part(report)
