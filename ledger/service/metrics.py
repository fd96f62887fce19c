"""The service process's metrics, served by ``GET /metrics`` (``ledger.api.routes_ops``):
Prometheus text format (``prometheus-client``), role ``operator``.

Two kinds of series:

- **Counters and histograms of this process** (appends by outcome and code, append
  latency, group-commit batch sizes, queue depth, store errors by kind, witness
  failures, alerts).  ``ledger serve`` always runs them in prometheus-client's
  multiprocess mode (``PROMETHEUS_MULTIPROC_DIR``, a fresh directory per start, removed
  at exit), so whichever worker answers a scrape reports the sum over all workers of
  ``--workers N``.
- **Gauges read from the database at scrape time** (ledger size, quarantine rows,
  seconds since the last checkpoint, per witness the last cosigned size, the last
  audit's outcome and findings by class): the same for every worker, cached for
  ``DB_CACHE_S``.

Labels are fixed vocabularies (outcome, error code, witness name, finding class): no
series ever carries a subject, a payload, a token or evidence.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from typing import Any

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.multiprocess import MultiProcessCollector

from ledger.core.finding import FindingClass
from ledger.errors import LedgerError

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"
DB_CACHE_S = 2.0

APPENDS = Counter("ledger_appends_total", "Append outcomes by outcome and error code "
                  "(outcome: appended, replayed, rejected, error).", ["outcome", "code"])
APPEND_LATENCY = Histogram(
    "ledger_append_latency_seconds", "Time from request to answer of POST /v1/entries and "
    "/v1/entries/batch.", ["route"],
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10))
BATCH_SIZE = Histogram("ledger_group_commit_batch_size", "Submissions per group-commit "
                       "transaction.", buckets=(1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024))
QUEUE_DEPTH = Gauge("ledger_append_queue_depth", "Appends waiting for a group commit "
                    "(sum over the live worker processes).", multiprocess_mode="livesum")
QUEUE_MAX = Gauge("ledger_append_queue_max", "Queue bound per worker (--queue-max).",
                  multiprocess_mode="max")
STORE_ERRORS = Counter("ledger_store_errors_total", "Store faults answered 503, by kind "
                       "(the error code).", ["kind"])
WITNESS_FAILURES = Counter("ledger_witness_failures_total", "Scheduled checkpoints a witness "
                           "did not cosign.", ["witness"])
CHECKPOINT_FAILURES = Counter("ledger_scheduled_checkpoint_failures_total",
                              "Scheduled checkpoints that could not be made.")
ALERTS = Counter("ledger_alerts_total", "Alerts by kind and delivery result "
                 "(delivered, failed).", ["kind", "result"])
AUDIT_RUNS = Counter("ledger_scheduled_audits_total", "Background audits by outcome.",
                     ["outcome"])


_APPENDED = APPENDS.labels("appended", "")  # the common case, looked up once
_REPLAYED = APPENDS.labels("replayed", "")


def count_results(results: list[Any]) -> None:
    """Count append results (``ledger.ops.append.AppendResult``) by outcome and code: one
    increment per outcome seen in the batch, not one per item."""
    appended = replayed = 0
    for r in results:
        if r.ok:
            if r.replayed:
                replayed += 1
            else:
                appended += 1
        else:
            APPENDS.labels("rejected", str((r.error or {}).get("code", "unknown"))).inc()
    if appended:
        _APPENDED.inc(appended)
    if replayed:
        _REPLAYED.inc(replayed)


def count_error(exc: BaseException, n: int = 1) -> None:
    code = exc.code if isinstance(exc, LedgerError) else "internal_error"
    APPENDS.labels("error", code).inc(n)


def store_error(kind: str) -> None:
    STORE_ERRORS.labels(kind).inc()


class DatabaseCollector:
    """Gauges read from the database when scraped (cached ``DB_CACHE_S``)."""

    def __init__(self, ledger: Any, replica: Any = None) -> None:
        self.ledger = ledger
        self.replica = replica  # the read replica of --read-db, or None
        self._lock = threading.Lock()
        self._at = 0.0
        self._metrics: list[Metric] = []

    def collect(self) -> Iterator[Metric]:
        with self._lock:
            if time.monotonic() - self._at > DB_CACHE_S:
                self._metrics = self._read()
                self._at = time.monotonic()
            return iter(list(self._metrics))

    def _read(self) -> list[Metric]:
        up = GaugeMetricFamily("ledger_store_up", "1 if the database answered the scrape.")
        try:
            s = self.ledger.monitor_status()
        except LedgerError as exc:
            store_error(exc.code)
            up.add_metric([], 0)
            return [up]
        up.add_metric([], 1)
        out: list[Metric] = [up]
        now = time.time()
        if self.replica is not None:
            out += self._replica()

        def gauge(name: str, doc: str, value: float | None) -> None:
            g = GaugeMetricFamily(name, doc)
            if value is not None:
                g.add_metric([], value)
                out.append(g)

        gauge("ledger_size", "Entries in the ledger (the head's size).", s.size)
        gauge("ledger_quarantine_rows", "Rejected submissions kept in quarantine.",
              s.quarantine_rows)
        gauge("ledger_quarantine_dropped", "Rejects only counted (quarantine full).",
              s.quarantine_dropped)
        gauge("ledger_checkpoint_size", "Size of the latest signed checkpoint.",
              s.checkpoint_size)
        gauge("ledger_seconds_since_checkpoint", "Seconds since the latest checkpoint was "
              "signed.", None if s.checkpoint_created_us is None
              else max(0.0, now - s.checkpoint_created_us / 1e6))
        gauge("ledger_entries_since_checkpoint", "Entries not covered by a checkpoint yet.",
              s.size - (s.checkpoint_size or 0))
        w = GaugeMetricFamily("ledger_witness_cosigned_size", "Largest checkpoint size each "
                              "witness cosigned.", labels=["witness"])
        for name, size in sorted(s.witnesses.items()):
            w.add_metric([name], size)
        out.append(w)
        a = s.last_audit
        o = GaugeMetricFamily("ledger_last_audit_outcome", "1 for the outcome of the latest "
                              "recorded audit (audit_run entry).", labels=["outcome"])
        for name in ("passed", "failed", "unverified"):
            o.add_metric([name], 1 if a.outcome == name else 0)
        out.append(o)
        gauge("ledger_last_audit_seq", "Seq of the latest audit_run entry.", a.seq)
        gauge("ledger_last_audit_findings_total", "Findings of the latest recorded audit.",
              a.findings)
        gauge("ledger_last_audit_end", "End of the range the latest recorded audit covered.",
              None if a.range is None else a.range.get("end"))
        gauge("ledger_seconds_since_audit_run", "Seconds since the latest complete audit "
              "run finished.", None if a.run_finished_us is None
              else max(0.0, now - a.run_finished_us / 1e6))
        c = GaugeMetricFamily("ledger_last_audit_findings", "Findings of the latest complete "
                              "audit run, by class.", labels=["class"])
        for cls in FindingClass:
            c.add_metric([cls.value], a.by_class.get(cls.value, 0))
        out.append(c)
        return out


    def _replica(self) -> list[Metric]:
        """The read replica's gauges: up, and (when up) how far behind it is."""
        up = GaugeMetricFamily("ledger_replica_up", "1 if the read replica (--read-db) "
                               "answered the scrape.")
        try:
            r = self.ledger.replica_status(self.replica)
        except LedgerError as exc:
            store_error("replica_" + exc.code)
            up.add_metric([], 0)
            return [up]
        up.add_metric([], 1)
        out: list[Metric] = [up]
        for name, doc, value in (
                ("ledger_replica_lag_seconds", "Seconds since the newest commit the replica "
                 "replayed, while it has WAL left to replay (0: caught up).",
                 r["replay_lag_s"]),
                ("ledger_replica_replay_behind_bytes", "WAL bytes the replica received and "
                 "has not replayed.", r["replay_behind_bytes"]),
                ("ledger_replica_entries_behind", "Entries the primary holds and the "
                 "replica has not replayed.", r["entries_behind"]),
                ("ledger_replica_checkpoint_behind", "Latest checkpoint size on the primary "
                 "less the replica's.", r["checkpoint_behind"])):
            if value is not None:
                g = GaugeMetricFamily(name, doc)
                g.add_metric([], value)
                out.append(g)
        return out


def process_exit() -> None:
    """At a worker's shutdown: its live gauges (queue depth) stop counting."""
    if os.environ.get(MULTIPROC_ENV):
        from prometheus_client import multiprocess

        # prometheus-client leaves this function (and MultiProcessCollector's __init__,
        # below) unannotated; it ships no stubs of them
        multiprocess.mark_process_dead(os.getpid())  # type: ignore[no-untyped-call]


def exposition(ledger: Any, replica: Any = None) -> tuple[bytes, str]:
    """The scrape answer: (body, content type)."""
    registry = CollectorRegistry()
    if os.environ.get(MULTIPROC_ENV):
        MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
        body = generate_latest(registry)
    else:
        from prometheus_client import REGISTRY

        body = generate_latest(REGISTRY)
    db = CollectorRegistry()
    db.register(_collector_for(ledger, replica))
    return body + generate_latest(db), CONTENT_TYPE_LATEST


_COLLECTORS: dict[int, DatabaseCollector] = {}


def _collector_for(ledger: Any, replica: Any = None) -> DatabaseCollector:
    c = _COLLECTORS.get(id(ledger))
    if c is None or c.ledger is not ledger or c.replica is not replica:
        c = _COLLECTORS[id(ledger)] = DatabaseCollector(ledger, replica)
    return c
