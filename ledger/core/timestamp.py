"""RFC 3339 text of microsecond timestamps (pure; re-exported by :mod:`ledger.clock`)."""

from __future__ import annotations

from datetime import UTC, datetime


def format_us(us: int) -> str:
    """RFC 3339 UTC with exactly six fractional digits: ``2026-11-29T20:05:04.123456Z``."""
    secs, frac = divmod(us, 1_000_000)
    return datetime.fromtimestamp(secs, UTC).strftime("%Y-%m-%dT%H:%M:%S") + f".{frac:06d}Z"


def parse_rfc3339(text: str) -> int:
    """Parse an RFC 3339 timestamp (``Z`` or an offset; date alone = midnight UTC) to µs."""
    t = text.strip()
    if t.endswith("Z") or t.endswith("z"):
        t = t[:-1] + "+00:00"
    dt = datetime.fromisoformat(t)
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    delta = dt - datetime(1970, 1, 1, tzinfo=UTC)
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds
