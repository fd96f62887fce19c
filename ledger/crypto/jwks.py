"""Key sets tokens are verified against, kept fresh: fixed, a file (re-read when it
changes) or a URL (fetched over HTTPS, redirects refused, at most 1 MiB).

Used by ``ledger serve --jwks`` (the external issuer's keys) and the HTTP service's
token check (``ledger.api.auth``).
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable
from typing import Any

from ledger.crypto.tokens import KeySet
from ledger.errors import UsageError

__all__ = ["MAX_JWKS_BYTES", "JwksSource"]

MAX_JWKS_BYTES = 1024 * 1024


class JwksSource:
    """Where trusted keys come from: fixed, a file (re-read on change), or a URL."""

    REFETCH_S = 30.0
    MAX_AGE_S = 300.0

    def __init__(self, *, fixed: dict[str, Any] | None = None, location: str | None = None,
                 fetch: Callable[[str], bytes] | None = None) -> None:
        self.location = location
        self._fetch = fetch or _http_get
        self._lock = threading.Lock()
        self._stamp: Any = None
        self._fetched_at = 0.0
        self.keyset = KeySet(fixed) if fixed is not None else KeySet({"keys": []})
        if location is not None:
            self.refresh(force=True)

    @property
    def is_url(self) -> bool:
        return self.location is not None and self.location.startswith(("http://", "https://"))

    def stale(self, kid: Any) -> bool:
        """Whether a (blocking) refresh is due before verifying a token with ``kid``."""
        if self.location is None:
            return False
        age = time.monotonic() - self._fetched_at
        if not self.is_url:
            return age > 1.0  # cheap stat, at most once a second
        return age > self.MAX_AGE_S or (not self.keyset.knows(kid) and age > self.REFETCH_S)

    def refresh(self, force: bool = False) -> None:
        """Reload the keys.  Raises UsageError on the first load only; later failures keep
        the keys already known (an issuer outage must not lock everybody out at once)."""
        assert self.location is not None
        with self._lock:
            try:
                if self.is_url:
                    data = self._fetch(self.location)
                else:
                    st = os.stat(self.location)
                    stamp = (st.st_mtime_ns, st.st_size)
                    self._fetched_at = time.monotonic()
                    if stamp == self._stamp and not force:
                        return
                    with open(self.location, "rb") as fh:
                        data = fh.read(MAX_JWKS_BYTES + 1)
                    self._stamp = stamp
                if len(data) > MAX_JWKS_BYTES:
                    raise UsageError("JWKS larger than 1 MiB", code="bad_jwks", field="jwks")
                try:
                    doc = json.loads(data)
                except ValueError as exc:
                    raise UsageError("the JWKS is not JSON", code="bad_jwks",
                                     field="jwks") from exc
                self.keyset = KeySet(doc)
            except (OSError, UsageError) as exc:
                if force:
                    if isinstance(exc, UsageError):
                        raise
                    raise UsageError(f"cannot read JWKS {self.location}: {exc}",
                                     code="bad_jwks", field="jwks") from exc
            finally:
                self._fetched_at = time.monotonic()


def _http_get(url: str) -> bytes:
    """GET a JWKS (5 s timeout, at most 1 MiB + 1 byte read, redirects refused).
    Raises OSError."""
    import urllib.error
    import urllib.request

    class _NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args: Any, **kwargs: Any) -> None:
            return None

    opener = urllib.request.build_opener(_NoRedirect)
    req = urllib.request.Request(url, headers={"Accept": "application/json"})
    try:
        with opener.open(req, timeout=5.0) as resp:
            data: bytes = resp.read(MAX_JWKS_BYTES + 1)
            return data
    except (urllib.error.URLError, ValueError) as exc:
        raise OSError(f"JWKS fetch failed: {exc}") from exc
