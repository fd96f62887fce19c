"""Spool segment framing: length-prefixed, checksummed records (pure, no I/O).

A segment file is ``SEGMENT_MAGIC`` followed by records::

    record = length (u32 big-endian) || crc32 (u32 big-endian) || kind (1 byte) || body
             length = len(body); crc32 = zlib.crc32(kind || body)

``kind`` is ``A`` (a spooled submission) or ``D`` (an item is done: acknowledged by the
ledger, or rejected by it).  ``body`` is UTF-8 JSON.  A record is written with one
``write`` and made durable with ``fsync`` before the spool says it holds it, so after
a crash only the *last* record of the *last* segment can be incomplete ("torn"):
:func:`scan` stops at the first record that is short or fails its checksum and says
where the good prefix ends.
"""

from __future__ import annotations

import json
import struct
import zlib
from dataclasses import dataclass
from typing import Any

SEGMENT_MAGIC = b"ledger-spool/1\n"
HEAD = struct.Struct(">IIc")
KIND_APPEND = b"A"
KIND_DONE = b"D"
KINDS = (KIND_APPEND, KIND_DONE)
MAX_BODY = 16 * 1024 * 1024  # larger length fields are garbage, not records


@dataclass(frozen=True)
class Record:
    """One decoded record and where its bytes are in the segment."""

    kind: bytes
    body: dict[str, Any]
    offset: int
    size: int  # header + body bytes


@dataclass(frozen=True)
class Scan:
    """What :func:`scan` found: the good records, where the good prefix ends, and
    why it ended early (None when every byte was a good record)."""

    records: list[Record]
    good_end: int
    problem: str | None


def encode(kind: bytes, body: dict[str, Any]) -> bytes:
    """The bytes of one record."""
    if kind not in KINDS:
        raise ValueError(f"unknown record kind {kind!r}")
    data = json.dumps(body, ensure_ascii=False, sort_keys=True,
                      separators=(",", ":")).encode("utf-8")
    if len(data) > MAX_BODY:
        raise ValueError(f"record body of {len(data)} bytes is over {MAX_BODY}")
    return HEAD.pack(len(data), zlib.crc32(kind + data), kind) + data


def scan(data: bytes) -> Scan:
    """Decode a whole segment (``SEGMENT_MAGIC`` included)."""
    if not data.startswith(SEGMENT_MAGIC):
        if SEGMENT_MAGIC.startswith(data):
            return Scan([], 0, "torn segment header" if data else None)
        return Scan([], 0, "not a spool segment (bad magic)")
    pos, records = len(SEGMENT_MAGIC), []
    while pos < len(data):
        if len(data) - pos < HEAD.size:
            return Scan(records, pos, "torn record header")
        length, crc, kind = HEAD.unpack_from(data, pos)
        if kind not in KINDS or length > MAX_BODY:
            return Scan(records, pos, "corrupt record header")
        start, end = pos + HEAD.size, pos + HEAD.size + length
        if end > len(data):
            return Scan(records, pos, "torn record body")
        body_bytes = data[start:end]
        if zlib.crc32(kind + body_bytes) != crc:
            return Scan(records, pos, "record checksum mismatch")
        try:
            body = json.loads(body_bytes.decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            return Scan(records, pos, "record body is not JSON")
        if not isinstance(body, dict):
            return Scan(records, pos, "record body is not an object")
        records.append(Record(kind, body, pos, end - pos))
        pos = end
    return Scan(records, pos, None)


def decode_one(data: bytes) -> dict[str, Any]:
    """The body of the single record ``data`` (re-read from a segment: checked again)."""
    result = scan(SEGMENT_MAGIC + data)
    if result.problem is not None or len(result.records) != 1:
        raise ValueError(f"spool record does not decode: {result.problem}")
    return result.records[0].body
