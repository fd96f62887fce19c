"""``ledger serve --alert-webhook URL``: signed alerts POSTed to webhooks, with retries.

Each alert (docs/format-alert.md) is signed once with the ledger key and POSTed as
``application/json`` to every webhook, from one background thread so a slow receiver
never delays appends.  A delivery succeeds on any 2xx; a 408, 429, 5xx or a network error
is retried with exponential backoff (``backoff_s`` doubling, up to ``retries`` more
attempts); another 4xx is not retried (the receiver refused the alert).  Every attempt's
outcome is logged (event ``alert``) and counted (``ledger_alerts_total``).
"""

from __future__ import annotations

import json
import logging
import queue
import threading
import time
from typing import Any

import httpx

from ledger import __version__
from ledger.api import metrics
from ledger.clock import format_us
from ledger.core.alert import alert_document
from ledger.crypto.alert_sign import sign_alert

log = logging.getLogger("ledger.alerts")
_STOP: Any = object()
TIMEOUT_S = 5.0


def build_alert(kind: str, *, now_us: int, **kw: Any) -> dict[str, Any]:
    """The alert document raised now (``ledger.core.alert.alert_document``)."""
    return alert_document(kind, raised_at=format_us(now_us), **kw)


def _safe_url(url: str) -> str:
    """A webhook URL for logs: scheme, host and path only (no credentials, no query)."""
    u = httpx.URL(url)
    return f"{u.scheme}://{u.host}{':' + str(u.port) if u.port else ''}{u.path}"


class AlertSender:
    """The delivery thread; ``send(alert)`` queues, ``stop()`` drains (bounded)."""

    def __init__(self, urls: list[str], signer: Any, *, retries: int = 5,
                 backoff_s: float = 0.5) -> None:
        self.urls = list(urls)
        self.signer = signer  # ledger.crypto.tokens.JwtSigner: key and kid
        self.retries = retries
        self.backoff_s = backoff_s
        self._queue: queue.Queue[Any] = queue.Queue()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="alerts", daemon=True)
        self.delivered = 0

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout_s: float = 10.0) -> None:
        self._queue.put(_STOP)
        self._thread.join(timeout=timeout_s)
        self._stop.set()

    def send(self, alert: dict[str, Any]) -> None:
        self._queue.put(alert)

    def _run(self) -> None:
        with httpx.Client(timeout=TIMEOUT_S, follow_redirects=False, headers={
                "User-Agent": f"ledger/{__version__}"}) as client:
            while True:
                alert = self._queue.get()
                if alert is _STOP:
                    return
                try:
                    envelope = sign_alert(alert, self.signer.key, self.signer.kid)
                    body = json.dumps(envelope, ensure_ascii=False).encode("utf-8")
                except Exception:
                    log.exception("alert %s could not be signed", alert.get("kind"),
                                  extra={"event": "alert", "kind": alert.get("kind")})
                    continue
                for url in self.urls:
                    self._deliver(client, url, alert, body)

    def _deliver(self, client: httpx.Client, url: str, alert: dict[str, Any],
                 body: bytes) -> bool:
        kind, safe = alert["kind"], _safe_url(url)
        delay = self.backoff_s
        for attempt in range(1, self.retries + 2):
            try:
                r = client.post(url, content=body, headers={
                    "Content-Type": "application/json", "Ledger-Alert-Id": alert["id"]})
                status: int | None = r.status_code
                why = f"HTTP {r.status_code}"
            except httpx.HTTPError as exc:
                status, why = None, type(exc).__name__
            if status is not None and 200 <= status < 300:
                metrics.ALERTS.labels(kind, "delivered").inc()
                self.delivered += 1
                log.info("alert %s delivered to %s", kind, safe, extra={
                    "event": "alert", "kind": kind, "url": safe, "attempt": attempt,
                    "status": status, "outcome": "delivered"})
                return True
            retry = status is None or status in (408, 429) or status >= 500
            log.warning("alert %s to %s failed (%s)%s", kind, safe, why,
                        ", retrying" if retry and attempt <= self.retries else "", extra={
                            "event": "alert", "kind": kind, "url": safe,
                            "attempt": attempt, "status": status, "outcome": "failed"})
            if not retry or attempt > self.retries or self._stop.wait(delay):
                break
            delay = min(delay * 2, 60.0)
        metrics.ALERTS.labels(kind, "failed").inc()
        return False


def now_us() -> int:
    return int(time.time() * 1_000_000)
