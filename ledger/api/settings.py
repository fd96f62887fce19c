"""Service settings (one dataclass; ``ledger serve`` options map 1:1 onto it)."""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, fields
from typing import Any

from ledger.crypto.keys import DEFAULT_KEYS_DIR
from ledger.errors import UsageError
from ledger.ops.limits import MIN_CONNECTIONS, ConnectionGuard, QuarantineLimits, descriptor_cap

ENV_VAR = "LEDGER_SERVE_SETTINGS"  # how `ledger serve --workers N` hands settings to workers


@dataclass(frozen=True)
class Settings:
    """What a service process needs.

    ``issuer``/``audience`` default to the ledger origin.  With ``external_jwks``
    (a JWKS file path or an http(s) URL) access tokens are verified against that
    issuer's keys only, and ``issuer`` must be given; the ledger keyring still
    signs receipts and is still published at ``/.well-known/jwks.json``.
    """

    db_url: str
    # a read replica (PostgreSQL hot standby) answering the reads; None: the primary does
    read_db_url: str | None = None
    keys_dir: str = DEFAULT_KEYS_DIR
    issuer: str | None = None
    audience: str | None = None
    external_jwks: str | None = None
    role_claim: str = "role"
    token_leeway_s: int = 30
    group_wait_ms: float = 0.0       # extra wait of a first item for company (0: none)
    group_max_items: int = 256       # largest group-commit batch
    queue_max: int = 4096            # appends waiting; beyond: 503 overloaded
    batch_max_items: int = 1000      # items of one POST /v1/entries/batch
    batch_max_bytes: int = 8 * 1024 * 1024
    page_max: int = 1000             # largest page of GET /v1/entries
    checkpoint_on_demand: bool = True  # ?proof=true signs a checkpoint if none covers seq
    # ... but at most one per interval for the whole ledger (judged from the stored
    # checkpoints' times; docs/http.md#get-v1entriesseq--one-entry)
    checkpoint_on_demand_interval: str = "30s"
    # ledger-retention/1 file whose minimum retention POST /v1/redactions respects
    # (None: $LEDGER_RETENTION_POLICY, else no minimum)
    retention_policy: str | None = None
    # quarantine bounds; None: LEDGER_QUARANTINE_MAX_ROWS / _MAX_PER_PRODUCER or the defaults
    quarantine_max_rows: int | None = None
    quarantine_max_per_producer: int | None = None
    checkpoint_every: str | None = None  # "30s", "1000e": ledger.service.anchoring.parse_every
    anchors_file: str | None = None    # witnesses and TSA of scheduled checkpoints
    # operations (docs/operations.md): logs, metrics, background audits, alerts
    log_format: str = "text"             # json | text (ledger.api.logs)
    access_log: bool = True              # the `request` log event
    metrics: bool = True                 # GET /metrics (role operator)
    audit_every: str | None = None       # "1h": ledger.core.schedule.parse_duration
    audit_since_last: bool = False
    alert_webhooks: tuple[str, ...] = ()
    alert_retries: int = 5
    alert_backoff: str = "500ms"
    checkpoint_overdue: str | None = None
    witness_overdue: str | None = None
    store_down_after: str = "60s"
    watch_poll: str = "1s"
    runtime_dir: str | None = None       # the leader lock of the watch (one per `serve`)
    # slow and many clients (ledger.api.limits.ConnectionGuard)
    head_timeout: str = "10s"            # a request head must be complete within this
    body_timeout: str = "30s"            # a body within this of its head
    max_connections: int | None = None   # per process; None: descriptor limit less a reserve

    def __post_init__(self) -> None:
        if self.external_jwks and not self.issuer:
            raise UsageError("an external JWKS needs --issuer (the iss its tokens carry)",
                             code="missing_issuer", field="issuer")
        for name in ("group_max_items", "queue_max", "batch_max_items", "batch_max_bytes",
                     "page_max"):
            if getattr(self, name) < 1:
                raise UsageError(f"{name} must be at least 1", field=name)
        self.quarantine_limits()  # raises UsageError for a negative bound
        if self.group_wait_ms < 0 or self.group_wait_ms > 1000:
            raise UsageError("group wait must be 0..1000 ms", field="group_wait_ms")
        if self.log_format not in ("json", "text"):
            raise UsageError("log format must be json or text", field="log_format")
        object.__setattr__(self, "alert_webhooks", tuple(self.alert_webhooks))
        for url in self.alert_webhooks:
            if not url.startswith(("http://", "https://")):
                raise UsageError(f"alert webhook {url!r} must be an http(s) URL",
                                 code="bad_webhook", field="alert_webhook")
        if self.alert_retries < 0:
            raise UsageError("alert retries must be at least 0", field="alert_retries")
        for name in ("audit_every", "alert_backoff", "checkpoint_overdue", "witness_overdue",
                     "store_down_after", "watch_poll", "head_timeout", "body_timeout"):
            self.seconds(name)  # raises UsageError naming the setting
        self.on_demand_interval_s()  # raises UsageError naming the setting
        if self.max_connections is not None:
            cap = descriptor_cap()
            if not MIN_CONNECTIONS <= self.max_connections <= cap:
                raise UsageError(
                    f"max_connections must be {MIN_CONNECTIONS}..{cap} (the descriptor limit"
                    " less what the process needs besides connections)",
                    field="max_connections")

    def connection_guard(self) -> ConnectionGuard:
        """The connection bounds of these settings."""
        return ConnectionGuard(self.seconds("head_timeout") or 0.0,
                               self.seconds("body_timeout") or 0.0,
                               self.max_connections or 0)

    def seconds(self, name: str) -> float | None:
        """The duration setting ``name`` in seconds (None when unset)."""
        from ledger.core.schedule import parse_duration

        value = getattr(self, name)
        return None if value is None else parse_duration(value, name)

    def on_demand_interval_s(self) -> float:
        """The least time between two checkpoints signed for proof requests."""
        from ledger.core.schedule import on_demand_interval

        return on_demand_interval(self.checkpoint_on_demand_interval)

    def quarantine_limits(self) -> QuarantineLimits:
        """The quarantine bounds: these settings over the environment's defaults."""
        base = QuarantineLimits.from_env()
        return QuarantineLimits(
            base.max_rows if self.quarantine_max_rows is None else self.quarantine_max_rows,
            base.max_per_producer if self.quarantine_max_per_producer is None
            else self.quarantine_max_per_producer)

    def to_env(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_env(cls, environ: dict[str, str] | None = None) -> Settings:
        raw = (environ if environ is not None else os.environ).get(ENV_VAR)
        if not raw:
            raise UsageError(f"{ENV_VAR} is not set", code="no_settings")
        data: dict[str, Any] = json.loads(raw)
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})
