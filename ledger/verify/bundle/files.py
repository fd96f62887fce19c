"""The files of a bundle directory: read once, each digest taken as it is read.

:class:`BundleFiles` is the only part of the verifier that opens files.  Every byte read
goes through the file's SHA-256, so the manifest's file digests are compared
(:func:`check_digests`) with exactly the bytes the other steps checked.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from ledger.core.bundle import LISTED_FILES, MANIFEST, REDACTIONS, BundleLine
from ledger.core.digest import Hasher
from ledger.core.finding import FindingClass
from ledger.verify.bundle.sink import FindingSink

MAX_SMALL_FILE = 16 * 1024 * 1024
# a disagreement between two files is named after the one whose digest is bad
BAD_FILE_CODES = frozenset({"file_digest_mismatch", "file_missing"})


class BundleFiles:
    """Reads the files of ``directory`` and keeps the SHA-256 of each one read."""

    def __init__(self, directory: Path) -> None:
        self.dir = directory
        self._hashers: dict[str, Hasher] = {}

    def _hasher(self, name: str) -> Hasher:
        self._hashers[name] = h = hashlib.sha256()
        return h

    def _present(self, name: str, sink: FindingSink) -> bool:
        if (self.dir / name).is_file():
            return True
        sink.fail("file_missing", FindingClass.DELETED, f"{name} is missing", name)
        return False

    def small(self, name: str, sink: FindingSink) -> bytes | None:
        """The bytes of a small file (at most 16 MiB), or None (a finding)."""
        if not self._present(name, sink):
            return None
        with open(self.dir / name, "rb") as fh:
            data = fh.read(MAX_SMALL_FILE + 1)
        if len(data) > MAX_SMALL_FILE:
            sink.fail("file_too_large", FindingClass.PAYLOAD_MODIFIED, f"{name} is too large",
                      name)
            return None
        self._hasher(name).update(data)
        return data

    def lines(self, name: str, sink: FindingSink) -> Iterator[BundleLine]:
        """The parsed lines of a JSON Lines file (none if it is missing: a finding)."""
        if not self._present(name, sink):
            return
        hasher = self._hasher(name)
        with open(self.dir / name, "rb") as fh:
            for n, raw in enumerate(fh, 1):
                hasher.update(raw)
                yield BundleLine(raw, n)

    def digest(self, name: str, sink: FindingSink) -> bytes | None:
        """The SHA-256 of a file read in chunks, or None (missing: a finding)."""
        if not self._present(name, sink):
            return None
        h = self._hasher(name)
        with open(self.dir / name, "rb") as fh:
            while chunk := fh.read(1 << 20):
                h.update(chunk)
        return h.digest()

    def read_digest(self, name: str) -> tuple[str, int] | None:
        """``("sha256:<hex>", size)`` of a file that was read, else None."""
        h = self._hashers.get(name)
        if h is None:
            return None
        return "sha256:" + h.hexdigest(), (self.dir / name).stat().st_size


def check_digests(files: BundleFiles, manifest: Mapping[str, Any], sink: FindingSink) -> None:
    """Every file the manifest lists must be the one it signs (digest and size); the
    list is the six files, or the six and ``redactions.jsonl``."""
    listed = manifest.get("files") or {}
    if manifest and set(listed) - {REDACTIONS} != set(LISTED_FILES):
        sink.fail("manifest_malformed", FindingClass.PAYLOAD_MODIFIED,
                  f"files lists {sorted(listed)}, expected {sorted(LISTED_FILES)} (and "
                  f"{REDACTIONS} when the bundle has one)", MANIFEST)
    for name, want in listed.items():
        got = files.read_digest(name)
        if got is None or not isinstance(want, dict):
            continue
        digest, size = got
        if (want.get("sha256"), want.get("bytes")) != got:
            cls = FindingClass.TRUNCATED if isinstance(want.get("bytes"), int) \
                and size < want["bytes"] else FindingClass.PAYLOAD_MODIFIED
            sink.fail("file_digest_mismatch", cls, f"{name} is not the file the manifest "
                      "signs", name, None, want, {"sha256": digest, "bytes": size})
