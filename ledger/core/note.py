"""C2SP signed-note (c2sp.org/signed-note) and tlog-checkpoint text formats.

Parse and format only; signing lives in :mod:`ledger.crypto.note_sign`.

Checkpoint body (the note text)::

    <origin>\\n                      non-empty
    <tree size>\\n                   ASCII decimal, no sign, no leading zeros ("0" ok)
    <base64 root hash>\\n            standard base64 (RFC 4648 §4) of 32 bytes
    [<extension line>\\n ...]        optional, each non-empty

Signed note: ``<text ending in \\n>`` ``\\n`` then one or more lines
``— <key name> <base64(4-byte key ID || signature)>\\n`` (U+2014 EM DASH, space).
The text is split from the signatures at the *last* blank line.  Notes are
UTF-8 with no control characters below U+0020 other than newline.  Key names
are non-empty with no Unicode spaces and no '+'.  Base64 must be canonical
(re-encoding gives the same text); this is stricter than Go's sumdb/note.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterable
from dataclasses import dataclass

from ledger.errors import NoteError, UsageError

EM_DASH = "\u2014"
SIGNATURE_PREFIX = EM_DASH + " "
HASH_SIZE = 32
KEY_ID_SIZE = 4
MIN_SIGNATURE_BYTES = KEY_ID_SIZE + 1
MAX_TREE_SIZE = 2**63 - 1          # stored as a signed 64-bit integer
MAX_EXTENSION_LINES = 16
MAX_SIGNATURES = 100               # Go sumdb/note's cap; the spec requires accepting >= 16
MAX_NOTE_BYTES = 1 << 20
MAX_ORIGIN_CHARS = 255            # the ledger_meta.origin column
_DECIMAL = frozenset("0123456789")


def _check_text(text: str, what: str) -> None:
    """Raise NoteError unless ``text`` is encodable UTF-8 without control chars but '\\n'."""
    try:
        size = len(text.encode("utf-8"))
    except UnicodeEncodeError:
        raise NoteError(f"{what} is not valid UTF-8 (contains a lone surrogate)") from None
    if size > MAX_NOTE_BYTES:
        raise NoteError(f"{what} is {size} bytes, at most {MAX_NOTE_BYTES} allowed")
    for offset, ch in enumerate(text):
        if ch < " " and ch != "\n":
            raise NoteError(f"{what} contains control character U+{ord(ch):04X}"
                            f" at offset {offset}")


def check_key_name(name: str) -> None:
    """Raise NoteError unless ``name`` is a valid key name (non-empty, no spaces, no '+')."""
    if not isinstance(name, str) or not name:
        raise NoteError("key name is empty", field="name")
    if any(ch.isspace() or ch == "+" for ch in name):
        raise NoteError(f"key name {name!r} contains a space or '+'", field="name")
    _check_text(name, "key name")


def check_origin(origin: str) -> None:
    """Raise UsageError (code ``bad_origin``, field ``origin``) unless ``origin`` can name a
    ledger: its checkpoints are signed with keys named after it, so it must be a valid key
    name (non-empty, no Unicode spaces, no '+', no control characters), of at most
    ``MAX_ORIGIN_CHARS`` characters."""
    if not isinstance(origin, str) or len(origin) > MAX_ORIGIN_CHARS:
        raise UsageError(f"origin must be text of at most {MAX_ORIGIN_CHARS} characters (it is "
                         "stored as such and names the ledger's signing keys: a key name)",
                         code="bad_origin", field="origin")
    try:
        check_key_name(origin)
    except NoteError as exc:
        raise UsageError(f"origin {_show(origin)} cannot name the ledger's signing keys: a "
                         "key name is non-empty, with no spaces, no '+' and no control "
                         f"characters ({exc.message})", code="bad_origin", field="origin"
                         ) from None


def _b64decode(text: str, what: str, field: str) -> bytes:
    if not text:
        raise NoteError(f"{what} is empty", field=field)
    try:
        raw = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise NoteError(f"{what} is not valid base64", field=field) from None
    if base64.b64encode(raw).decode("ascii") != text:
        raise NoteError(f"{what} is not canonical base64", field=field)
    return raw


def _show(text: str) -> str:
    return repr(text if len(text) <= 40 else text[:40] + "…")


# --- checkpoint body ---------------------------------------------------------------------

@dataclass(frozen=True)
class Checkpoint:
    """A tree head: ``origin`` log identity, ``size`` leaves, RFC 6962 ``root_hash``.

    Construction validates every field and raises NoteError.
    """

    origin: str
    size: int
    root_hash: bytes
    extensions: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "extensions", tuple(self.extensions))
        if not isinstance(self.origin, str) or not self.origin:
            raise NoteError("checkpoint origin is empty", field="origin")
        if "\n" in self.origin:
            raise NoteError("checkpoint origin contains a newline", field="origin")
        _check_text(self.origin, "checkpoint origin")
        if type(self.size) is not int or not 0 <= self.size <= MAX_TREE_SIZE:
            raise NoteError(f"tree size must be an integer in 0..{MAX_TREE_SIZE}", field="size")
        if not isinstance(self.root_hash, bytes) or len(self.root_hash) != HASH_SIZE:
            raise NoteError(f"root hash must be {HASH_SIZE} bytes", field="root_hash")
        if len(self.extensions) > MAX_EXTENSION_LINES:
            raise NoteError(f"checkpoint has {len(self.extensions)} extension lines,"
                            f" at most {MAX_EXTENSION_LINES} allowed", field="extensions")
        for n, line in enumerate(self.extensions, 1):
            if not isinstance(line, str) or not line:
                raise NoteError(f"checkpoint extension line {n} is empty", field="extensions")
            if "\n" in line:
                raise NoteError(f"checkpoint extension line {n} contains a newline",
                                field="extensions")
            _check_text(line, f"checkpoint extension line {n}")


def format_checkpoint_body(cp: Checkpoint) -> str:
    """The note text for ``cp`` (already validated by construction)."""
    root = base64.b64encode(cp.root_hash).decode("ascii")
    return "".join(line + "\n" for line in (cp.origin, str(cp.size), root, *cp.extensions))


def _parse_size(text: str) -> int:
    if not text:
        raise NoteError("tree size line is empty", field="size")
    if text[0] in "+-":
        raise NoteError(f"tree size {_show(text)} has a sign", field="size")
    if not set(text) <= _DECIMAL:
        raise NoteError(f"tree size {_show(text)} is not ASCII decimal", field="size")
    if len(text) > 1 and text[0] == "0":
        raise NoteError(f"tree size {_show(text)} has leading zeros", field="size")
    if len(text) > len(str(MAX_TREE_SIZE)) or int(text) > MAX_TREE_SIZE:
        raise NoteError(f"tree size {_show(text)} exceeds {MAX_TREE_SIZE}", field="size")
    return int(text)


def parse_checkpoint_body(text: str) -> Checkpoint:
    """Parse a checkpoint note text.  Raises NoteError naming the first defect."""
    if not isinstance(text, str):
        raise NoteError("checkpoint body must be text")
    if not text:
        raise NoteError("checkpoint body is empty")
    _check_text(text, "checkpoint body")
    if not text.endswith("\n"):
        raise NoteError("checkpoint body does not end with a newline")
    lines = text[:-1].split("\n")
    if len(lines) < 3:
        raise NoteError(f"checkpoint body has {len(lines)} lines,"
                        " need at least 3 (origin, tree size, root hash)")
    if len(lines) > 3 + MAX_EXTENSION_LINES:
        raise NoteError(f"checkpoint body has {len(lines)} lines,"
                        f" at most {3 + MAX_EXTENSION_LINES} allowed")
    origin, size_text, root_text, *extensions = lines
    if not origin:
        raise NoteError("checkpoint origin is empty", field="origin")
    size = _parse_size(size_text)
    root = _b64decode(root_text, "root hash", "root_hash")
    if len(root) != HASH_SIZE:
        raise NoteError(f"root hash is {len(root)} bytes, want {HASH_SIZE}", field="root_hash")
    return Checkpoint(origin, size, root, tuple(extensions))


# --- signed note -------------------------------------------------------------------------

@dataclass(frozen=True)
class NoteSignature:
    """One signature line: key ``name``, 4-byte ``key_id`` and the raw ``signature``."""

    name: str
    key_id: bytes
    signature: bytes


@dataclass(frozen=True)
class Note:
    """Note ``text`` (ending in newline, without the blank separator line) and signatures."""

    text: str
    signatures: tuple[NoteSignature, ...]


def format_signature_line(sig: NoteSignature) -> str:
    """``— <name> <base64(key_id || signature)>\\n``.  Raises NoteError on bad fields."""
    check_key_name(sig.name)
    if not isinstance(sig.key_id, bytes) or len(sig.key_id) != KEY_ID_SIZE:
        raise NoteError(f"key ID must be {KEY_ID_SIZE} bytes", field="key_id")
    if not isinstance(sig.signature, bytes) or not sig.signature:
        raise NoteError("signature is empty", field="signature")
    blob = base64.b64encode(sig.key_id + sig.signature).decode("ascii")
    return f"{SIGNATURE_PREFIX}{sig.name} {blob}\n"


def check_note_text(text: str) -> None:
    """Raise NoteError unless ``text`` can be the text of a signed note."""
    if not isinstance(text, str) or not text:
        raise NoteError("note text is empty")
    _check_text(text, "note text")
    if not text.endswith("\n"):
        raise NoteError("note text does not end with a newline")


def format_note(body: str, sigs: Iterable[NoteSignature]) -> str:
    """Body, blank line, signature lines.  Raises NoteError on bad input or no signatures."""
    check_note_text(body)
    lines = [format_signature_line(s) for s in sigs]
    if not lines:
        raise NoteError("a signed note needs at least one signature")
    if len(lines) > MAX_SIGNATURES:
        raise NoteError(f"note has {len(lines)} signatures, at most {MAX_SIGNATURES} allowed")
    return body + "\n" + "".join(lines)


def _parse_signature_line(line: str, n: int) -> NoteSignature:
    where = f"signature line {n}"
    if not line.startswith(SIGNATURE_PREFIX):
        raise NoteError(f"{where} does not start with an em dash (U+2014) and a space",
                        field="signature")
    name, sep, blob = line[len(SIGNATURE_PREFIX):].partition(" ")
    if not sep:
        raise NoteError(f"{where} has no space between key name and signature",
                        field="signature")
    if not name:
        raise NoteError(f"{where} has an empty key name", field="signature")
    if any(ch.isspace() or ch == "+" for ch in name):
        raise NoteError(f"{where} key name {name!r} contains a space or '+'", field="signature")
    raw = _b64decode(blob, f"{where} signature", "signature")
    if len(raw) < MIN_SIGNATURE_BYTES:
        raise NoteError(f"{where} signature is {len(raw)} bytes, need at least"
                        f" {MIN_SIGNATURE_BYTES} (4-byte key ID + signature)", field="signature")
    return NoteSignature(name, raw[:KEY_ID_SIZE], raw[KEY_ID_SIZE:])


def parse_note(data: str | bytes) -> Note:
    """Split a signed note into text and signatures (no verification).

    Raises NoteError: not UTF-8, too large, control characters, no final
    newline, no blank separator line, no / too many signature lines, or a
    malformed signature line (each with its own message).
    """
    if isinstance(data, bytes):
        if len(data) > MAX_NOTE_BYTES:
            raise NoteError(f"note is {len(data)} bytes, at most {MAX_NOTE_BYTES} allowed")
        try:
            data = data.decode("utf-8")
        except UnicodeDecodeError:
            raise NoteError("note is not valid UTF-8") from None
    if not isinstance(data, str):
        raise NoteError("note must be text or bytes")
    _check_text(data, "note")
    if not data.endswith("\n"):
        raise NoteError("note does not end with a newline")
    split = data.rfind("\n\n")
    if split < 0:
        raise NoteError("note has no blank line between text and signatures")
    text, block = data[: split + 1], data[split + 2:]
    if not block:
        raise NoteError("note has no signature lines after the blank line")
    lines = block[:-1].split("\n")
    if len(lines) > MAX_SIGNATURES:
        raise NoteError(f"note has {len(lines)} signature lines, at most {MAX_SIGNATURES}"
                        " allowed")
    return Note(text, tuple(_parse_signature_line(line, n) for n, line in enumerate(lines, 1)))
