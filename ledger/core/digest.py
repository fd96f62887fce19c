"""SHA-256 digests as bytes and as text (the one spelling of ``sha256:<hex>``).

Payload digests, proof_refs, file digests in an export manifest and report digests are
all ``sha256:`` followed by 64 lowercase hex digits of SHA-256 over the exact bytes.
Pure: stdlib only.
"""

from __future__ import annotations

import hashlib
import re
from typing import Protocol

PREFIX = "sha256:"
_HASH_TEXT = re.compile(r"sha256:[0-9a-f]{64}")


class Hasher(Protocol):
    """A running hash object such as ``hashlib.sha256()``."""

    def update(self, data: bytes, /) -> None: ...

    def digest(self) -> bytes: ...

    def hexdigest(self) -> str: ...


def sha256(data: bytes) -> bytes:
    """The 32-byte SHA-256 of ``data``."""
    return hashlib.sha256(data).digest()


def digest_text(data: bytes) -> str:
    """Content address of ``data``: ``sha256:<64 lowercase hex>``."""
    return PREFIX + hashlib.sha256(data).hexdigest()


def hasher_text(hasher: Hasher) -> str:
    """:func:`digest_text` of everything fed to a running ``hashlib.sha256()`` object."""
    return PREFIX + hasher.hexdigest()


def hash_hex(h: bytes) -> str:
    """A 32-byte hash as text: ``sha256:<hex>``."""
    return PREFIX + h.hex()


def parse_hash_hex(text: str) -> bytes:
    """Inverse of :func:`hash_hex`; raises ValueError on anything else."""
    if not isinstance(text, str) or not _HASH_TEXT.fullmatch(text):
        raise ValueError("expected 'sha256:' followed by 64 lowercase hex digits")
    return bytes.fromhex(text[7:])
