"""``ledger serve --alert-webhook URL``: signed alerts POSTed to webhooks, with retries.

Each alert (docs/format-alert.md) is signed once with the ledger key and POSTed as
``application/json`` to every webhook.  Each webhook has its own delivery thread and
queue, so a slow or dead receiver delays neither appends nor the other receivers.  An
attempt has one overall deadline (``timeout_s``, 5 s: connecting, sending and reading
the answer together, however slowly the receiver drips bytes) and reads at most
``MAX_ANSWER_BYTES`` of the answer (its status line is all that counts).  A delivery
succeeds on any 2xx; a 408, 429, 5xx, a network error or a missed deadline is retried
with exponential backoff (``backoff_s`` doubling, up to ``retries`` more attempts);
another 4xx is not retried (the receiver refused the alert).  Every attempt's outcome
is logged (event ``alert``) and counted (``ledger_alerts_total``).

The request is written on a plain socket (TLS for ``https``) rather than through an HTTP
client library, because the deadline must bound the whole exchange, not each read; no
proxy from the environment is used.
"""

from __future__ import annotations

import base64
import json
import logging
import queue
import socket
import ssl
import threading
import time
from typing import Any
from urllib.parse import unquote, urlsplit

import httpx

from ledger import __version__
from ledger.clock import format_us
from ledger.core.alert import alert_document
from ledger.crypto.alert_sign import sign_alert
from ledger.service import metrics

log = logging.getLogger("ledger.alerts")
_STOP: Any = object()
TIMEOUT_S = 5.0  # per attempt, everything included
MAX_ANSWER_BYTES = 4096  # of an answer, headers included: only the status line is used
QUEUE_MAX = 1000  # alerts waiting for one receiver; beyond it the oldest is given up


def post_status(url: str, body: bytes, headers: dict[str, str], timeout_s: float,
                *, context: ssl.SSLContext | None = None) -> tuple[int | None, str]:
    """POST ``body`` to ``url`` within ``timeout_s`` seconds in all, reading at most
    MAX_ANSWER_BYTES: the answer's status code (None when there is none: a network
    error, the deadline, not HTTP) and a word on it for the log."""
    deadline = time.monotonic() + timeout_s
    late = f"no answer within {timeout_s:g} s"

    def left() -> float:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError(late)
        return remaining

    u = urlsplit(url)
    port = u.port or (443 if u.scheme == "https" else 80)
    host = u.hostname or ""
    target = (u.path or "/") + (f"?{u.query}" if u.query else "")
    lines = [f"POST {target} HTTP/1.1",
             f"Host: {host if ':' not in host else f'[{host}]'}"
             f"{'' if u.port is None else f':{u.port}'}",
             f"Content-Length: {len(body)}", "Connection: close"]
    if u.username is not None:
        cred = f"{unquote(u.username)}:{unquote(u.password or '')}".encode()
        lines.append("Authorization: Basic " + base64.b64encode(cred).decode("ascii"))
    lines += [f"{k}: {v}" for k, v in headers.items()]
    request = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body
    try:
        sock = socket.create_connection((host, port), timeout=left())
        try:
            if u.scheme == "https":
                sock.settimeout(left())
                sock = (context or ssl.create_default_context()).wrap_socket(
                    sock, server_hostname=host)
            sock.settimeout(left())
            sock.sendall(request)  # the timeout bounds the whole sendall
            answer = b""
            while b"\r\n" not in answer and len(answer) < MAX_ANSWER_BYTES:
                sock.settimeout(left())
                chunk = sock.recv(MAX_ANSWER_BYTES - len(answer))
                if not chunk:
                    break
                answer += chunk
        finally:
            sock.close()
    except TimeoutError:  # also socket.timeout and ssl's handshake timeout
        return None, late
    except OSError as exc:  # refused, reset, DNS, TLS verification
        return None, type(exc).__name__
    parts = answer.split(b"\r\n", 1)[0].split(b" ", 2)
    if len(parts) < 2 or not parts[0].startswith(b"HTTP/1.") or not parts[1].isdigit() \
            or len(parts[1]) != 3:
        return None, "the answer is not HTTP/1.x"
    return int(parts[1]), f"HTTP {int(parts[1])}"


def build_alert(kind: str, *, now_us: int, **kw: Any) -> dict[str, Any]:
    """The alert document raised now (``ledger.core.alert.alert_document``)."""
    return alert_document(kind, raised_at=format_us(now_us), **kw)


def _safe_url(url: str) -> str:
    """A webhook URL for logs: scheme, host and path only (no credentials, no query)."""
    u = httpx.URL(url)
    return f"{u.scheme}://{u.host}{':' + str(u.port) if u.port else ''}{u.path}"


class AlertSender:
    """One delivery thread per webhook; ``send(alert)`` signs and queues, ``stop()``
    drains (bounded)."""

    def __init__(self, urls: list[str], signer: Any, *, retries: int = 5,
                 backoff_s: float = 0.5, timeout_s: float = TIMEOUT_S) -> None:
        self.urls = list(urls)
        self.signer = signer  # ledger.crypto.tokens.JwtSigner: key and kid
        self.retries = retries
        self.backoff_s = backoff_s
        self.timeout_s = timeout_s
        self._stop = threading.Event()
        self._queues: list[queue.Queue[Any]] = [queue.Queue(QUEUE_MAX) for _ in self.urls]
        self._threads = [threading.Thread(target=self._run, args=(url, q), daemon=True,
                                          name=f"alerts-{i}")
                         for i, (url, q) in enumerate(zip(self.urls, self._queues,
                                                          strict=True))]
        self._count = threading.Lock()
        self.delivered = 0
        self.failed = 0

    def start(self) -> None:
        for t in self._threads:
            t.start()

    def stop(self, timeout_s: float = 10.0) -> None:
        end = time.monotonic() + timeout_s
        for q in self._queues:
            self._put(q, _STOP)
        for t in self._threads:
            if t.is_alive():
                t.join(timeout=max(0.0, end - time.monotonic()))
        self._stop.set()

    def send(self, alert: dict[str, Any]) -> None:
        try:
            envelope = sign_alert(alert, self.signer.key, self.signer.kid)
            body = json.dumps(envelope, ensure_ascii=False).encode("utf-8")
        except Exception:
            log.exception("alert %s could not be signed", alert.get("kind"),
                          extra={"event": "alert", "kind": alert.get("kind")})
            return
        for q in self._queues:
            self._put(q, (alert, body))

    def _put(self, q: queue.Queue[Any], item: Any) -> None:
        while True:
            try:
                q.put_nowait(item)
                return
            except queue.Full:
                try:
                    old = q.get_nowait()
                except queue.Empty:
                    continue
                if old is not _STOP:
                    self._gave_up(old[0], "queue full")

    def _gave_up(self, alert: dict[str, Any], why: str) -> None:
        metrics.ALERTS.labels(alert["kind"], "failed").inc()
        with self._count:
            self.failed += 1
        log.warning("alert %s given up (%s)", alert["kind"], why,
                    extra={"event": "alert", "kind": alert["kind"], "outcome": "failed"})

    def _run(self, url: str, q: queue.Queue[Any]) -> None:
        while True:
            item = q.get()
            if item is _STOP:
                return
            self._deliver(url, *item)

    def _deliver(self, url: str, alert: dict[str, Any], body: bytes) -> bool:
        kind, safe = alert["kind"], _safe_url(url)
        headers = {"Content-Type": "application/json", "Ledger-Alert-Id": alert["id"],
                   "User-Agent": f"ledger/{__version__}"}
        delay = self.backoff_s
        for attempt in range(1, self.retries + 2):
            status, why = post_status(url, body, headers, self.timeout_s)
            if status is not None and 200 <= status < 300:
                metrics.ALERTS.labels(kind, "delivered").inc()
                with self._count:
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
        with self._count:
            self.failed += 1
        return False


def now_us() -> int:
    return int(time.time() * 1_000_000)
