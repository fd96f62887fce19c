"""The strict reader of every artifact a verifier is handed (docs/format-checkpoint.md,
docs/export.md, "Strict reading").

Two tools reading the same bytes must see the same document, so an artifact is refused
(with :class:`StrictError`, naming the field and the rule) when it is

* not UTF-8 JSON (no byte-order mark, no other encoding, no ``NaN``/``Infinity``);
* an object with a duplicate key (``json.loads`` keeps the last one; another parser may
  keep the first);
* an object with a key its closed format does not define;
* base64 (RFC 4648 §4, padded) or base64url (§5, unpadded) that is not canonical: a
  character outside the alphabet, wrong padding, or non-zero padding bits, all of which
  decode to the same bytes as a canonical text.

Pure (stdlib only).
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Iterable
from typing import Any, NoReturn

from ledger.errors import StrictError

__all__ = ["StrictError"]  # re-exported: the strict readers raise it

_B64 = re.compile(r"[A-Za-z0-9+/]*={0,2}")
_B64URL = re.compile(r"[A-Za-z0-9_-]*")


def unique_object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """``object_pairs_hook`` refusing a duplicate key."""
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise StrictError(f"duplicate key {key!r}", key, "duplicate_key")
        out[key] = value
    return out


def _no_constant(name: str) -> NoReturn:
    raise StrictError(f"{name} is not JSON")


def loads(data: str | bytes) -> Any:
    """Parse UTF-8 JSON strictly (see the module docstring).  Raises StrictError; a syntax
    error keeps the message of :func:`json.loads` (which names line and column)."""
    if isinstance(data, (bytes, bytearray)):
        try:
            data = bytes(data).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise StrictError("not UTF-8", rule="encoding") from exc
    if data.startswith("\ufeff"):
        raise StrictError("starts with a byte-order mark", rule="encoding")
    try:
        return json.loads(data, object_pairs_hook=unique_object, parse_constant=_no_constant)
    except StrictError:
        raise
    except RecursionError as exc:
        raise StrictError("nested too deeply") from exc
    except ValueError as exc:
        raise StrictError(str(exc)) from exc


def closed(doc: dict[str, Any], allowed: Iterable[str], where: str = "") -> None:
    """Refuse keys of ``doc`` outside ``allowed`` (a closed format).  Raises StrictError."""
    unknown = sorted(set(doc) - set(allowed))
    if unknown:
        raise StrictError(f"unknown field {where}{unknown[0]}", where + unknown[0],
                          "unknown_key")


def b64decode(text: str, field: str | None = None) -> bytes:
    """Canonical padded standard base64 (RFC 4648 §4).  Raises StrictError."""
    if not isinstance(text, str) or len(text) % 4 or not _B64.fullmatch(text):
        raise StrictError(f"{field or 'the value'} is not base64", field, "base64")
    try:
        raw = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise StrictError(f"{field or 'the value'} is not base64", field, "base64") from exc
    if base64.b64encode(raw).decode("ascii") != text:
        raise StrictError(f"{field or 'the value'} is not canonical base64", field, "base64")
    return raw


def b64url_decode(text: str, field: str | None = None) -> bytes:
    """Canonical unpadded base64url (RFC 4648 §5, as in JWS).  Raises StrictError."""
    if not isinstance(text, str) or len(text) % 4 == 1 or not _B64URL.fullmatch(text):
        raise StrictError(f"{field or 'the value'} is not base64url", field, "base64")
    raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    if base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii") != text:
        raise StrictError(f"{field or 'the value'} is not canonical base64url", field,
                          "base64")
    return raw
