"""State shared by :class:`LedgerClient` and :class:`AsyncLedgerClient` (no I/O here).

The ledger's identity (origin, ledger id) is pinned by the caller or learnt once from
``GET /v1/health``; its keys come from ``GET /.well-known/jwks.json`` and are fetched
again (at most every ``JWKS_REFRESH_S``) when a receipt names a key not in the cache.
After a failed attempt the client backs off (1 s, doubling to 30 s): meanwhile appends
go straight to the spool, so a gateway never waits on a ledger that is down.
"""

from __future__ import annotations

import time
from typing import Any

from ledger.client.errors import ClientUsage, LedgerNotNow, ReceiptInvalid
from ledger.client.protocol import AppendOutcome, error_of, is_retryable, raise_refusal, taken
from ledger.client.receipt import receipt_kid, token_tenant, verify_receipt
from ledger.client.spool import DEFAULT_MAX_BYTES, DEFAULT_MAX_RECORDS, Spool

JWKS_REFRESH_S = 30.0
BACKOFF_MIN_S, BACKOFF_MAX_S = 1.0, 30.0


# "batch": ask for batch receipts (one ledger signature per committed batch, each verified
# here with its audit path); "entry": a signed JWT per entry.  Either form is verified.
RECEIPT_KINDS = ("batch", "entry")

NotNow = LedgerNotNow  # the ledger cannot take the submission now (unreachable, timeout, 5xx)


class ClientCore:
    """Configuration, pinned identity, key cache and back-off of one client."""

    def __init__(self, url: str, token: str, *, spool_dir: str | None, origin: str | None,
                 ledger_id: str | None, timeout: float, batch_max: int, batch_wait_ms: float,
                 drain_batch: int, key_prefix: str, spool_max_records: int = DEFAULT_MAX_RECORDS,
                 spool_max_bytes: int = DEFAULT_MAX_BYTES, fsync: bool = True,
                 receipts: str = "batch", salvage: bool = False) -> None:
        if batch_max < 1 or drain_batch < 1 or batch_wait_ms < 0:
            raise ClientUsage("batch_max and drain_batch must be >= 1, batch_wait_ms >= 0")
        if receipts not in RECEIPT_KINDS:
            raise ClientUsage(f"receipts must be one of {', '.join(RECEIPT_KINDS)}, "
                              f"got {receipts!r}")
        self.url, self.timeout = url.rstrip("/"), timeout
        self.headers = {"Authorization": f"Bearer {token}"}
        self.tenant = token_tenant(token)  # the chain its items join (None: not known)
        if receipts == "batch":  # RFC 7240; a ledger that ignores it answers per-entry JWTs
            self.headers["Prefer"] = "receipt=batch"
        self.origin, self.ledger_id = origin, ledger_id
        self.batch_max, self.batch_wait_s = batch_max, batch_wait_ms / 1000.0
        self.drain_batch, self.key_prefix = drain_batch, key_prefix
        self.spool = Spool(spool_dir, max_records=spool_max_records,
                           max_bytes=spool_max_bytes, fsync=fsync,
                           salvage=salvage) if spool_dir else None
        self.jwks: dict[str, Any] | None = None
        self._jwks_at = 0.0
        self._down_until = 0.0
        self._backoff = BACKOFF_MIN_S

    # -- identity and keys ------------------------------------------------------
    @property
    def identified(self) -> bool:
        return self.origin is not None and self.jwks is not None

    def learn_health(self, status: int, body: Any) -> None:
        """Pin origin/ledger id from ``/v1/health`` (or check them when pinned)."""
        if status != 200 or not isinstance(body, dict):
            raise NotNow(f"health answered HTTP {status}")
        origin, ledger_id = body.get("origin"), body.get("ledger_id")
        if self.origin is not None and origin != self.origin:
            raise ReceiptInvalid(f"the ledger at {self.url} is {origin!r}, not {self.origin!r}")
        if self.ledger_id is not None and ledger_id != self.ledger_id:
            raise ReceiptInvalid(f"the ledger at {self.url} has id {ledger_id!r}, "
                                 f"not {self.ledger_id!r}")
        self.origin, self.ledger_id = origin, ledger_id

    def learn_jwks(self, status: int, body: Any) -> None:
        if status != 200 or not isinstance(body, dict) or not isinstance(body.get("keys"), list):
            raise NotNow(f"jwks answered HTTP {status}")
        self.jwks, self._jwks_at = body, time.monotonic()

    def jwks_stale_for(self, token: Any) -> bool:
        """True when ``token`` names a key the cache lacks and a re-fetch is allowed."""
        if self.jwks is None:
            return True
        kid = receipt_kid(token) if isinstance(token, str) else None
        known = any(k.get("kid") == kid for k in self.jwks.get("keys", []))
        return not known and time.monotonic() - self._jwks_at >= JWKS_REFRESH_S

    def verified(self, item: dict[str, Any], key: str) -> AppendOutcome:
        """The outcome of a taken item; raises ReceiptInvalid."""
        assert self.origin is not None and self.jwks is not None
        answered = item.get("tenant") or "default"
        if self.tenant is not None and answered != self.tenant:
            raise ReceiptInvalid(f"the ledger answered for tenant {answered}, the token's is "
                                 f"{self.tenant}", detail={"tenant": self.tenant})
        claims = verify_receipt(item.get("receipt"), self.jwks, origin=self.origin,
                                ledger_id=self.ledger_id, seq=item.get("seq"),
                                entry_hash=item.get("entry_hash"), tenant=item.get("tenant"),
                                tseq=item.get("tseq"))
        return taken(item, key, claims)

    # -- answers and back-off ------------------------------------------------------
    def single_answer(self, status: int, payload: Any) -> dict[str, Any]:
        """The JSON of a taken single append; raises NotNow or the refusal."""
        if is_retryable(status):
            raise NotNow(f"HTTP {status} {error_of(status, payload).get('code')}")
        if status not in (200, 201) or not isinstance(payload, dict) or not payload.get("ok"):
            raise_refusal(status, payload)
        return payload

    def batch_answer(self, status: int, payload: Any, n: int) -> list[dict[str, Any]]:
        """The per-item results of a batch; raises NotNow or the refusal."""
        if is_retryable(status):
            raise NotNow(f"HTTP {status} {error_of(status, payload).get('code')}")
        results = payload.get("results") if isinstance(payload, dict) else None
        if status != 200 or not isinstance(results, list):
            raise_refusal(status, payload)
        if len(results) != n:
            raise NotNow(f"batch answered {len(results)} results for {n} items")
        return results

    def backing_off(self) -> bool:
        return time.monotonic() < self._down_until

    def failed(self) -> None:
        self._down_until = time.monotonic() + self._backoff
        self._backoff = min(self._backoff * 2, BACKOFF_MAX_S)

    def succeeded(self) -> None:
        self._down_until, self._backoff = 0.0, BACKOFF_MIN_S

    def pending(self) -> int:
        return len(self.spool) if self.spool is not None else 0
