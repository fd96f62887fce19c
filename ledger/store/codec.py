"""How payload bytes are stored: as they are, or DEFLATE-compressed with a preset dictionary.

Storage only (docs/storage.md#payload-codecs): every reader gets the exact bytes back before
anything hashes them, and no hash, signature or export ever sees the stored form.  The
``codec`` column of ``payloads`` says which form a row holds:

* ``0`` (:data:`RAW`): the bytes themselves;
* ``1`` (:data:`DEFLATE_D1`): a raw DEFLATE stream (RFC 1951: no zlib header, no checksum)
  whose decoder starts from the preset dictionary ``payload_dict_1.bin`` (4,259 bytes of
  sample payloads, SHA-256 :data:`DICT1_SHA256`; ``scripts/gen-payload-dict`` made it).

A dictionary is part of the storage format for as long as a row uses it: it is never
changed, only a new codec number with a new file could be added.  Only v2 result payloads
(a salted commitment) of at least :data:`MIN_SIZE` bytes other than the subject are
compressed, and only when that makes them shorter; the subject payload (slot 5) stays raw
because ``ix_payloads_subject`` finds entries by its bytes, and the documents of the other
kinds stay raw because they are read by joins that want them as stored.  A row whose stream
does not decode comes back as the stored bytes, which then fail their commitment: the audit
reports the payload as changed.
"""

from __future__ import annotations

import hashlib
import os
import zlib
from importlib.resources import files

from ledger.errors import UsageError
from ledger.store.layout import SUBJECT_SLOT, slot_of

RAW = 0
DEFLATE_D1 = 1
# Below this a payload stays as it is: compressing a 50-byte query or meta document saves
# some 40 bytes and costs a reader as much time as a 700-byte result (docs/performance.md).
MIN_SIZE = 128
DICT1_SHA256 = "bc8dbdd9e15d8210b7c2a97a7f61f0da14abd4bba7bc11b274fbe2a384c5d88d"

_LEVEL = 3
_WBITS = -15  # raw DEFLATE: the decoder takes any window up to 32 KiB
# The encoder's window is 8 KiB (the dictionary and a payload fit in it) and its hash
# tables small: a compressor primed with the dictionary is then cheap to copy (~8 us a
# payload here, against ~12 us for a new one), and it compresses these payloads as well.
_ENC_WBITS = -13
_ENC_MEM_LEVEL = 5
# Fixed Huffman codes (RFC 1951 §3.2.6): a decoder then builds no code tables per stream,
# which halves the time to decode a payload of a few hundred bytes (~1.5 us against ~3)
# for some 25 % more stored bytes than dynamic codes (docs/performance.md).
_ENC_STRATEGY = zlib.Z_FIXED
# A stream may decode to at most this many bytes (no accepted payload comes near it: a
# submission is at most 1 MiB of text).  One that would decode to more -- a stream written
# behind the ledger's back to exhaust a reader's memory -- is "does not decode".
MAX_DECODED = 64 << 20
_DICT1 = b""
_BASE: list[zlib._Compress] = []  # [the compressor primed with dictionary 1], made on first use


def dictionary(codec: int = DEFLATE_D1) -> bytes:
    """The preset dictionary of ``codec``, read once and checked against its pinned
    SHA-256 (a changed file would make every stored codec-1 row unreadable)."""
    global _DICT1
    if codec != DEFLATE_D1:
        raise ValueError(f"codec {codec} has no dictionary")
    if not _DICT1:
        data = (files("ledger.store") / "payload_dict_1.bin").read_bytes()
        if hashlib.sha256(data).hexdigest() != DICT1_SHA256:
            raise RuntimeError("ledger/store/payload_dict_1.bin is not the dictionary codec 1 "
                               "was made with (SHA-256 differs)")
        _DICT1 = data
    return _DICT1


def deflate(data: bytes) -> bytes:
    """``data`` as a codec-1 stream."""
    if not _BASE:
        _BASE.append(zlib.compressobj(_LEVEL, zlib.DEFLATED, _ENC_WBITS, _ENC_MEM_LEVEL,
                                      _ENC_STRATEGY, dictionary()))
    c = _BASE[0].copy()
    return c.compress(data) + c.flush()


def write_codec() -> int:
    """The codec new rows are written with: ``LEDGER_PAYLOAD_CODEC`` = ``deflate`` (the
    default, codec 1) or ``none`` (codec 0: no compression, for an operator who would
    rather pay the disk than the CPU; docs/storage.md#payload-codecs).  Read once."""
    if not _WRITE:
        value = os.environ.get("LEDGER_PAYLOAD_CODEC", "deflate").strip().lower() or "deflate"
        if value not in ("deflate", "none"):
            raise UsageError("LEDGER_PAYLOAD_CODEC must be 'deflate' or 'none'",
                             field="LEDGER_PAYLOAD_CODEC")
        _WRITE.append(DEFLATE_D1 if value == "deflate" else RAW)
    return _WRITE[0]


_WRITE: list[int] = []


def encode(pid: int, salt: bytes | None, data: bytes) -> tuple[int, bytes]:
    """(codec, stored bytes) of the payload row ``pid`` (``ledger.store.layout``)."""
    if salt is None or slot_of(pid) == SUBJECT_SLOT or len(data) < MIN_SIZE \
            or (_WRITE[0] if _WRITE else write_codec()) == RAW:
        return RAW, data
    packed = deflate(data)
    return (DEFLATE_D1, packed) if len(packed) < len(data) else (RAW, data)


def decode(codec: int | None, stored: bytes) -> bytes:
    """The payload bytes of a row holding ``stored`` under ``codec``.  A codec-1 stream
    that does not decode as one complete stream of at most :data:`MAX_DECODED` bytes, and
    an unknown codec, give back the stored bytes (they then fail their commitment, which
    the audit reports).  Called once per stored payload by every reader (the audit's page
    reader too), hence written out in one function."""
    if codec != DEFLATE_D1:
        return stored
    d = _decompressobj(_WBITS, zdict=_DICT1 or dictionary())
    try:
        out = d.decompress(stored, MAX_DECODED)
    except zlib.error:
        return stored
    return out if d.eof and not d.unused_data and not d.unconsumed_tail else stored


_decompressobj = zlib.decompressobj
