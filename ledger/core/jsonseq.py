"""Splitting a byte stream into submission documents, without re-serializing them.

``split_array``: the exact source text of each element of one JSON array (the HTTP batch
body).  ``documents``: what ``ledger append`` reads from a file: one JSON object, a JSON
array of objects, or JSON Lines.  Each piece is validated later as sent (duplicate keys and
limits included).  Pure: stdlib only.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator

from ledger.errors import SubmissionError, SubmissionTooLarge

_WS = re.compile(r"[ \t\n\r]*")
# Scans a value without building it (the elements are parsed again, one by one, later).
_SCAN = json.JSONDecoder(object_pairs_hook=lambda _: None, parse_float=lambda _: None,
                         parse_int=lambda _: None, parse_constant=lambda _: None)


def _skip(text: str, pos: int) -> int:
    return _WS.match(text, pos).end()  # type: ignore[union-attr]


def split_array(body: bytes, max_items: int | None = None) -> list[bytes]:
    """The exact text of each element of the JSON array ``body`` (cheap scan).

    Raises SubmissionError (``invalid_json``: not UTF-8 or malformed; ``not_an_array``;
    ``too_deep``) or SubmissionTooLarge (``batch_too_large``: more than ``max_items``).
    """
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SubmissionError(f"body is not UTF-8 (byte {exc.start})", code="invalid_json"
                              ) from None
    pos = _skip(text, 0)
    if text[pos:pos + 1] != "[":
        raise SubmissionError("a batch is a JSON array of submissions", code="not_an_array")
    pos = _skip(text, pos + 1)
    items: list[bytes] = []
    if text[pos:pos + 1] == "]":
        pos += 1
    else:
        while True:
            try:
                _, end = _SCAN.raw_decode(text, pos)
            except RecursionError:
                raise SubmissionError("batch nested too deeply", code="too_deep") from None
            except ValueError as exc:
                raise SubmissionError(f"batch is not valid JSON: {exc}", code="invalid_json"
                                      ) from None
            items.append(text[pos:end].encode("utf-8"))
            if max_items is not None and len(items) > max_items:
                raise SubmissionTooLarge(f"a batch holds at most {max_items} submissions",
                                         code="batch_too_large")
            pos = _skip(text, end)
            sep = text[pos:pos + 1]
            pos = _skip(text, pos + 1)
            if sep == "]":
                break
            if sep != ",":
                raise SubmissionError("batch is not valid JSON: expected ',' or ']' at "
                                      f"character {pos}", code="invalid_json")
    if _skip(text, pos) != len(text):
        raise SubmissionError("batch is not valid JSON: data after the array",
                              code="invalid_json")
    return items


def documents(data: bytes) -> Iterator[bytes]:
    """One JSON object, a JSON array of objects, or JSON Lines, as each document's text.

    A text that is not a well-formed array or a single object is read as JSON Lines (each
    non-blank line one document, invalid ones included: validation rejects them).
    """
    stripped = data.strip()
    if not stripped:
        return
    if stripped[:1] == b"[":
        try:
            yield from split_array(stripped)
            return
        except SubmissionError:
            pass  # not one array: JSON Lines
    if stripped[:1] == b"{" and b"\n" not in stripped.rstrip():
        yield stripped
        return
    try:
        json.loads(stripped)
        whole = stripped[:1] == b"{"
    except (ValueError, RecursionError):
        whole = False
    if whole:
        yield stripped
        return
    for line in data.splitlines():
        if line.strip():
            yield line.strip()
