"""Spool segment framing: length-prefixed, checksummed records (pure, no I/O).

A segment file is ``SEGMENT_MAGIC`` followed by records::

    record = length (u32 big-endian) || crc32 (u32 big-endian) || kind (1 byte) || body
             length = len(body); crc32 = zlib.crc32(kind || body)

``kind`` is ``A`` (a spooled submission) or ``D`` (an item is done: acknowledged by the
ledger, or rejected by it).  ``body`` is a UTF-8 JSON object: an ``A`` body is
``{"id": int >= 1, "key": non-empty string, "t": int >= 0, "body": string}``, a ``D``
body has at least ``{"id": int >= 1}`` (:func:`record_problem`).  A record is written with
one ``write`` and made durable with ``fsync`` before the spool says it holds it, so
after a crash only the *last* record of the *last* segment can be incomplete ("torn").

:func:`scan` reads every record it can: at a bad record it looks for the next offset
where a whole record with a good checksum starts and goes on from there, so a bad record
in the middle costs only its own bytes.  Each bad stretch is a :class:`Damage`; only a
stretch that runs to the end of the data, with no good record after it, and that a crash
mid-write can leave (short, or failing its checksum), is a torn tail
(:attr:`Scan.torn_tail`).  A record whose checksum is right but whose body breaks the
rules above was written that way: it is never a torn tail.
"""

from __future__ import annotations

import json
import re
import struct
import zlib
from dataclasses import dataclass
from typing import Any, TypeGuard

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
class Damage:
    """Bytes ``[offset, end)`` that are no record: why, and whether a crash mid-write
    can explain them (``tearable``: short, or a checksum that does not match)."""

    offset: int
    end: int
    problem: str
    tearable: bool


@dataclass(frozen=True)
class Scan:
    """What :func:`scan` found: every readable record (also those after a bad stretch),
    where the good prefix ends, why it ended early (None when every byte was a good
    record), and each bad stretch."""

    records: list[Record]
    good_end: int
    problem: str | None
    damage: tuple[Damage, ...] = ()
    size: int = 0

    @property
    def torn_tail(self) -> bool:
        """True when the only damage is a tail a crash can leave: it runs to the end and
        no readable record follows it."""
        return (len(self.damage) == 1 and self.damage[0].tearable
                and self.damage[0].end == self.size)


def encode(kind: bytes, body: dict[str, Any]) -> bytes:
    """The bytes of one record."""
    if kind not in KINDS:
        raise ValueError(f"unknown record kind {kind!r}")
    data = json.dumps(body, ensure_ascii=False, sort_keys=True,
                      separators=(",", ":")).encode("utf-8")
    if len(data) > MAX_BODY:
        raise ValueError(f"record body of {len(data)} bytes is over {MAX_BODY}")
    return HEAD.pack(len(data), zlib.crc32(kind + data), kind) + data


def record_problem(kind: bytes, body: Any) -> str | None:
    """What is wrong with a decoded record body (None when it follows the rules)."""
    if not isinstance(body, dict):
        return "record body is not an object"
    rid = body.get("id")
    if "id" not in body:
        return "record has no id"
    if not _is_int(rid) or not 1 <= rid < 2 ** 63:
        return f"record id {_short(rid)} is not an integer from 1 to 2^63-1"
    if kind == KIND_APPEND:
        key, t = body.get("key"), body.get("t")
        if not isinstance(key, str) or not key:
            return f"record {rid} has no key (a non-empty string)"
        if not _is_int(t) or t < 0:
            return f"record {rid} time t {_short(t)} is not a non-negative integer"
        if not isinstance(body.get("body"), str):
            return f"record {rid} body is not a string (the exact request text)"
    return None


def _is_int(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _short(value: Any) -> str:
    text = json.dumps(value)[:40] if value is not None else "missing"
    return text


def _record_at(data: bytes, pos: int) -> tuple[str | None, bool, int, Record | None]:
    """Decode the record at ``pos``: (problem, tearable, end, record)."""
    if len(data) - pos < HEAD.size:
        return "torn record header", True, len(data), None
    length, crc, kind = HEAD.unpack_from(data, pos)
    if kind not in KINDS or length > MAX_BODY:
        return "corrupt record header", True, len(data), None
    start, end = pos + HEAD.size, pos + HEAD.size + length
    if end > len(data):
        return "torn record body", True, len(data), None
    body_bytes = data[start:end]
    if zlib.crc32(kind + body_bytes) != crc:
        return "record checksum mismatch", True, end, None
    try:
        body = json.loads(body_bytes.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return "record body is not JSON", False, end, None
    problem = record_problem(kind, body)
    if problem is not None:
        return problem, False, end, None
    return None, False, end, Record(kind, body, pos, end - pos)


_KIND_AT = re.compile(rb"[AD]")


def _resync(data: bytes, pos: int) -> int:
    """The first offset after ``pos`` where a whole record with a good checksum starts
    (``len(data)`` when there is none).  Cheap: only offsets whose kind byte is A or D
    and whose length fits are checksummed."""
    for m in _KIND_AT.finditer(data, pos + HEAD.size):
        at = m.start() - (HEAD.size - 1)
        length, crc, _ = HEAD.unpack_from(data, at)
        end = at + HEAD.size + length
        if length <= MAX_BODY and end <= len(data) \
                and zlib.crc32(data[at + HEAD.size - 1:end]) == crc:
            return at
    return len(data)


def scan(data: bytes) -> Scan:
    """Decode a whole segment (``SEGMENT_MAGIC`` included): every readable record,
    and each bad stretch between them."""
    if not data.startswith(SEGMENT_MAGIC):
        if SEGMENT_MAGIC.startswith(data):
            return Scan([], 0, "torn segment header" if data else None,
                        (Damage(0, len(data), "torn segment header", True),) if data else (),
                        len(data))
        return Scan([], 0, "not a spool segment (bad magic)",
                    (Damage(0, len(data), "not a spool segment (bad magic)", False),),
                    len(data))
    pos, records, damage = len(SEGMENT_MAGIC), [], []
    good_end: int | None = None
    while pos < len(data):
        problem, tearable, end, record = _record_at(data, pos)
        if record is not None:
            records.append(record)
            pos = end
            continue
        if good_end is None:
            good_end = pos
        if tearable:  # the length field may be what is damaged: find the next record
            end = _resync(data, pos)
        damage.append(Damage(pos, end, problem or "bad record", tearable))
        pos = end
    first = damage[0].problem if damage else None
    return Scan(records, pos if good_end is None else good_end, first, tuple(damage),
                len(data))


def decode_one(data: bytes) -> dict[str, Any]:
    """The body of the single record ``data`` (re-read from a segment: checked again)."""
    result = scan(SEGMENT_MAGIC + data)
    if result.problem is not None or len(result.records) != 1:
        raise ValueError(f"spool record does not decode: {result.problem}")
    return result.records[0].body
