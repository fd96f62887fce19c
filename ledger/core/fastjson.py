"""``json.loads`` at the speed of orjson, with exactly ``json.loads``'s result.

The audit parses two JSON documents per row (the envelope and the result document); the
standard library's parser is a third of the audit's time.  :func:`loads` parses with
orjson and falls back to :func:`json.loads` whenever orjson refuses the input, so the
result (value or ``ValueError``) is always the one ``json.loads`` gives:

* on valid RFC 8259 JSON both return equal values: a duplicate key keeps the last value
  in both, numbers become ``int`` (arbitrary precision) or the correctly rounded
  ``float``, strings are the same code points;
* what orjson refuses and ``json.loads`` takes (``NaN``/``Infinity``, lone surrogate
  escapes, UTF-16/32 input) goes to ``json.loads``, which then decides;
* orjson reads an integer beyond 64 bits as a ``float`` (``json.loads`` keeps it an
  exact ``int``), so any input with a run of 19 or more digits (every integer that may
  not fit 64 bits has one) goes to ``json.loads`` without trying orjson, and so does
  ``str`` input (the audit hands bytes).

``tests/core/test_fastjson.py`` checks the agreement property-wise and on edge inputs.
This is only for reading stored bytes whose hashes are checked separately; producers'
submissions and artifacts handed to verifiers keep their strict readers
(``ledger.core.submission``, ``ledger.core.strict``).
"""

from __future__ import annotations

import json
from typing import Any

import orjson

__all__ = ["loads", "orjson_loads"]

_orjson_loads = orjson_loads = orjson.loads
_JSONDecodeError = orjson.JSONDecodeError
_json_loads = json.loads
# digits -> "0", every other byte -> " ": a run of 19 digits becomes 19 zeros, found
# with bytes' own substring search (a regular expression is ten times slower here).
_DIGITS = bytes(0x30 if 0x30 <= b <= 0x39 else 0x20 for b in range(256))
_RUN = b"0" * 19


def loads(data: bytes | str) -> Any:
    """The value ``json.loads(data)`` returns (raising ``ValueError`` where it does)."""
    if not isinstance(data, bytes) or _RUN in data.translate(_DIGITS):
        return _json_loads(data)
    try:
        return _orjson_loads(data)
    except _JSONDecodeError:
        return _json_loads(data)


def loads_text(raw: bytes) -> Any:
    """The value ``json.loads(raw.decode("utf-8"))`` returns (raising ``ValueError`` --
    ``UnicodeDecodeError`` included -- where it does).

    orjson reads exactly UTF-8 (it refuses a byte-order mark and invalid UTF-8, which
    ``raw.decode("utf-8")`` either refuses too or keeps as a character that
    ``json.loads`` refuses), so wherever it fails the standard path decides.
    """
    if _RUN not in raw.translate(_DIGITS):
        try:
            return _orjson_loads(raw)
        except _JSONDecodeError:
            pass
    return _json_loads(raw.decode("utf-8"))


_SORTED_LINE = orjson.OPT_SORT_KEYS | orjson.OPT_APPEND_NEWLINE


def loads_line(raw: bytes) -> tuple[Any, bool]:
    """(the value :func:`loads_text` returns, True when ``raw`` is certainly its canonical
    line -- :func:`is_canonical_line` -- else False: the caller then decides).  Raises
    ``ValueError`` where :func:`loads_text` does.

    A bundle line is mostly base64 and hex text, in which :func:`loads_text`'s scan for long
    digit runs costs a third of the parse.  orjson parses first here: when its value holds no
    float at all, no integer was read beyond 64 bits (the one way orjson's value differs from
    ``json.loads``'s on input both accept), so the value is exact; and when orjson also
    writes it back as ``raw``, ``raw`` is canonical.  Anything else goes the guarded way.
    """
    try:
        obj = _orjson_loads(raw)
    except _JSONDecodeError:
        pass
    else:
        if dumps_line(obj) == raw and _float_free(obj):
            return obj, True
    return loads_text(raw), False


def _float_free(v: Any) -> bool:
    """No float (or any type but str, int, bool, None, dict and list) anywhere in ``v``."""
    stack = [v]
    pop, push_all = stack.pop, stack.extend
    while stack:
        x = pop()
        t = type(x)
        if t is dict:
            push_all(x.values())
        elif t is list:
            push_all(x)
        elif not (t is str or t is int or t is bool or x is None):
            return False  # a float (or anything else): the standard encoder decides
    return True


def is_canonical_line(obj: Any, raw: bytes) -> bool | None:
    """True when ``raw`` is the canonical JSON Lines form of ``obj``
    (``ledger.core.bundle.dump_line``: sorted keys, no spaces, raw UTF-8, a final LF),
    decided by orjson; None when it cannot decide (a float in ``obj``, an integer
    beyond 64 bits, or orjson's bytes differ) -- then the caller compares with the
    standard encoder.

    For values without floats orjson's sorted compact output is byte-identical to
    ``json.dumps(..., ensure_ascii=False, separators=(",", ":"), sort_keys=True)``
    (the same escapes for every code point, keys in code-point order);
    ``tests/core/test_fastjson.py`` checks that property-wise.
    """
    if dumps_line(obj) != raw:
        return None
    return True if _float_free(obj) else None


def dumps_line(obj: Any) -> bytes | None:
    """``ledger.core.bundle.dump_line(obj)`` by orjson, for an ``obj`` of strings,
    integers, booleans, null, objects and arrays only (a record the caller built); None
    when orjson cannot write it (a lone surrogate, an integer beyond 64 bits) -- then the
    caller uses the standard encoder.  The caller guarantees there is no float."""
    try:
        return orjson.dumps(obj, option=_SORTED_LINE)
    except orjson.JSONEncodeError:
        return None
