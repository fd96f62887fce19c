"""Canonical JSON (RFC 8785, JCS) for the small documents the ledger hashes.

The ledger only canonicalizes documents it builds itself (envelopes, manifests),
and restricts them to the subset where JCS is easy to get exactly right:

* objects with ASCII keys (so UTF-16 and code-point key order agree),
* strings that are valid Unicode (no lone surrogates),
* integers with ``|n| <= 2**53 - 1``, ``true``/``false``/``null``,
* **no floats** (their JCS spelling is the hard part, and nothing hashed needs them).

Within that subset ``json.dumps(sort_keys=True, separators=(",", ":"),
ensure_ascii=False)`` produces the JCS bytes: it escapes ``"``, ``\\`` and
control characters (``\\b \\t \\n \\f \\r`` short forms, others as lowercase
``\\u00xx``), and writes everything else as UTF-8.  Property tests compare it
with the ``rfc8785`` package.
"""

from __future__ import annotations

import json
from typing import Any

from ledger.errors import CanonicalizationError

MAX_SAFE_INTEGER = 2**53 - 1

_encoder = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                            allow_nan=False, check_circular=False)


def _check(value: Any, path: str) -> None:
    if value is None or isinstance(value, bool):
        return
    if isinstance(value, int):
        if abs(value) > MAX_SAFE_INTEGER:
            raise CanonicalizationError(f"{path}: integer {value} is outside ±(2**53-1)")
        return
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise CanonicalizationError(f"{path}: string is not valid Unicode") from exc
        return
    if isinstance(value, float):
        raise CanonicalizationError(f"{path}: floats are not allowed in hashed documents")
    if isinstance(value, dict):
        for k, v in value.items():
            if not isinstance(k, str) or not k.isascii():
                raise CanonicalizationError(f"{path}: keys must be ASCII strings, got {k!r}")
            _check(v, f"{path}.{k}")
        return
    if isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            _check(v, f"{path}[{i}]")
        return
    raise CanonicalizationError(f"{path}: type {type(value).__name__} cannot be canonicalized")


_SCALARS = frozenset({str, bool, int, type(None)})


def _flat_ok(value: dict[Any, Any], nested: bool) -> bool:
    """Fast path (C-level passes): ASCII string keys, scalar values, at most one
    level of nested dicts.  Strings are checked by the final UTF-8 encode."""
    if set(map(type, value)) - {str} or not all(map(str.isascii, value)):
        return False
    vals = value.values()
    types = set(map(type, vals))
    if not types <= (_SCALARS | {dict} if nested else _SCALARS):
        return False
    if int in types and any(type(v) is int and not -MAX_SAFE_INTEGER <= v <= MAX_SAFE_INTEGER
                            for v in vals):
        return False
    return dict not in types or all(_flat_ok(v, False) for v in vals if type(v) is dict)


def canonical_json(value: Any) -> bytes:
    """The RFC 8785 bytes of ``value``; raises CanonicalizationError outside the subset."""
    flat = type(value) is dict and _flat_ok(value, True)
    if not flat:
        _check(value, "$")
    try:
        return _encoder.encode(value).encode("utf-8")
    except UnicodeEncodeError:
        _check(value, "$")  # names the offending path
        raise
