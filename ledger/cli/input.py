"""Reading ``ledger append`` input with bounded memory.

JSON Lines are streamed: one line is read at a time, and a line longer than the limit of
one submission (1 MiB) is never held whole -- its first bytes stand for it
(:class:`Oversized`, rejected ``too_large`` naming the line) and the rest is skipped.  A
JSON array (or one object written over several lines) is read whole, at most
``MAX_WHOLE_BYTES`` (64 MiB): it must be parsed as one value before its items are known.

Which one an input is, is decided by its first non-blank line: a line that is one complete
JSON value starts JSON Lines (unless it is an array and nothing follows); any other input
of at most 64 MiB is read whole exactly as ``ledger.core.jsonseq.documents`` reads it; a
longer one is JSON Lines, or refused when it starts with ``[``.
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import BinaryIO, Protocol

from ledger.core.jsonseq import documents, split_array
from ledger.core.submission import MAX_SUBMISSION_BYTES
from ledger.errors import SubmissionError, SubmissionTooLarge

MAX_WHOLE_BYTES = 64 * 1024 * 1024  # a JSON array (or multi-line object) input
LINE_LIMIT = MAX_SUBMISSION_BYTES + 2  # one submission and its line break (CRLF)
_SCAN = json.JSONDecoder(object_pairs_hook=lambda _: None, parse_float=lambda _: None,
                         parse_int=lambda _: None, parse_constant=lambda _: None)


@dataclass(frozen=True)
class Oversized:
    """A JSON Lines line longer than one submission may be: its number and first bytes
    (more than the limit, so that validation rejects it as ``too_large``)."""

    line: int
    prefix: bytes


class _Lines(Protocol):
    def readline(self, size: int = -1, /) -> bytes: ...


class _Prefixed:
    """``prefix`` (already read) followed by the rest of ``fh``, line by line."""

    def __init__(self, prefix: bytes, fh: _Lines) -> None:
        self.buf, self.fh = io.BytesIO(prefix), fh

    def readline(self, size: int = -1, /) -> bytes:
        line = self.buf.readline(size)
        if line.endswith(b"\n") or (size >= 0 and len(line) >= size):
            return line
        return line + self.fh.readline(-1 if size < 0 else size - len(line))


def _complete(text: bytes) -> bool:
    """Whether ``text`` is exactly one JSON value (scanned, not built)."""
    try:
        s = text.decode("utf-8")
        _, end = _SCAN.raw_decode(s)
    except (ValueError, RecursionError):
        return False
    return end == len(s)


def read_documents(fh: BinaryIO | _Lines, name: str = "input",
                   max_whole: int = MAX_WHOLE_BYTES) -> Iterator[bytes | Oversized]:
    """The submissions of one input, as each one's text (see the module docstring).

    Raises SubmissionTooLarge when an input over ``max_whole`` bytes starts as a JSON array.
    """
    no, first = 0, b""
    while not first.strip():
        first = fh.readline(max_whole + 1)
        if not first:
            return
        no += 1
    if len(first) <= LINE_LIMIT and _complete(first.strip()):
        if first.lstrip()[:1] == b"[":
            nxt = _next_nonblank(fh)
            if nxt is None:
                yield from _array_or_line(first.strip())
                return
            fh = _Prefixed(nxt, fh)
        yield from _jsonl(_Prefixed(first, fh), no - 1)
        return
    whole = first + _read_up_to(fh, max_whole + 1 - len(first))
    if len(whole) <= max_whole:
        yield from documents(whole)
        return
    if whole.lstrip()[:1] == b"[":
        raise SubmissionTooLarge(
            f"{name}: a JSON array input is read whole and holds at most {max_whole} "
            "bytes; write JSON Lines (one submission per line) for more", code="too_large")
    yield from _jsonl(_Prefixed(whole, fh), no - 1)


def _array_or_line(text: bytes) -> Iterator[bytes]:
    try:
        yield from split_array(text)
    except SubmissionError:
        yield text  # one line that is not an array of submissions: rejected as sent


def _next_nonblank(fh: _Lines) -> bytes | None:
    """The lines read up to and including the next non-blank one (kept, so that line
    numbers stay right), or None when only blank lines are left."""
    seen = []
    while True:
        line = fh.readline(LINE_LIMIT + 1)
        if not line:
            return None
        seen.append(line)
        if line.strip():
            return b"".join(seen)


def _read_up_to(fh: _Lines, size: int) -> bytes:
    parts, got = [], 0
    while got < size:
        line = fh.readline(size - got)
        if not line:
            break
        parts.append(line)
        got += len(line)
    return b"".join(parts)


def _jsonl(fh: _Lines, start: int) -> Iterator[bytes | Oversized]:
    """Non-blank lines, stripped, numbered from ``start + 1``; an over-long line is an
    :class:`Oversized` and the rest of it is skipped unread into memory."""
    no = start
    while True:
        line = fh.readline(LINE_LIMIT + 1)
        if not line:
            return
        no += 1
        if len(line) > LINE_LIMIT:
            prefix = line[:MAX_SUBMISSION_BYTES + 1]
            while line and not line.endswith(b"\n"):
                line = fh.readline(LINE_LIMIT)
            yield Oversized(no, prefix)
            continue
        text = line.strip()
        if text:
            yield text
