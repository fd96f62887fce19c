"""C2SP tlog-cosignature (``cosignature/v1``, Ed25519) and tlog-witness text formats.

Pure: parse and format only; signing and verifying live in :mod:`ledger.crypto.cosign`.

A cosignature is a signed-note signature line on a checkpoint::

    key ID     = SHA-256(<name> || 0x0A || 0x04 || 32-byte Ed25519 public key)[:4]
    signature  = u64 timestamp (big-endian, POSIX seconds, <= 2**63 - 1) || Ed25519 sig (64)
    message    = "cosignature/v1\\n" "time " <timestamp, ASCII decimal> "\\n" <note body>

The note body is the whole checkpoint text (origin, size, root and any extension
lines, with its final newline) without signature lines.

Verifier keys (c2sp.org/signed-note "vkeys") name a key in one line::

    <name>+<key ID, 8 lowercase hex>+<base64(signature type || public key)>

Witness ``add-checkpoint`` request body (c2sp.org/tlog-witness)::

    "old " <size> "\\n"  then 0..63 lines of base64 consistency-proof hashes, "\\n",
    then the signed checkpoint note

A ``409 Conflict`` answer carries ``<size>\\n`` (``text/x.tlog.size``).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from dataclasses import dataclass

from ledger.core.note import (
    HASH_SIZE,
    KEY_ID_SIZE,
    MAX_TREE_SIZE,
    NoteSignature,
    check_key_name,
    check_note_text,
)
from ledger.errors import NoteError

COSIGNATURE_TYPE = 0x04           # signed-note signature type of Ed25519 cosignature/v1
ED25519_TYPE = 0x01               # plain Ed25519 note signatures (the log's own key)
COSIGNATURE_HEADER = "cosignature/v1\n"
TIMESTAMP_SIZE = 8
ED25519_SIGNATURE_SIZE = 64
ED25519_KEY_SIZE = 32
COSIGNATURE_SIZE = TIMESTAMP_SIZE + ED25519_SIGNATURE_SIZE
MAX_TIMESTAMP = 2**63 - 1
MAX_PROOF_LINES = 63
SIZE_CONTENT_TYPE = "text/x.tlog.size"


@dataclass(frozen=True)
class Cosignature:
    """A decoded cosignature line: cosigner ``name``, 4-byte ``key_id``, the POSIX
    ``timestamp`` it claims and the 64-byte Ed25519 ``signature``."""

    name: str
    key_id: bytes
    timestamp: int
    signature: bytes


@dataclass(frozen=True)
class VerifierKey:
    """A parsed vkey: ``name``, 4-byte ``key_id``, signature ``type`` and raw ``public_key``."""

    name: str
    key_id: bytes
    type: int
    public_key: bytes


def note_key_id(name: str, sig_type: int, public_key: bytes) -> bytes:
    """``SHA-256(name || 0x0A || type || public key)[:4]``.  Raises NoteError on a bad name."""
    check_key_name(name)
    data = name.encode("utf-8") + b"\n" + bytes([sig_type]) + public_key
    return hashlib.sha256(data).digest()[:KEY_ID_SIZE]


def cosigner_key_id(name: str, public_key: bytes) -> bytes:
    """Key ID of an Ed25519 ``cosignature/v1`` key (signature type 0x04)."""
    if len(public_key) != ED25519_KEY_SIZE:
        raise NoteError(f"an Ed25519 public key is {ED25519_KEY_SIZE} bytes", field="key")
    return note_key_id(name, COSIGNATURE_TYPE, public_key)


def cosigned_message(body: str, timestamp: int) -> bytes:
    """The bytes a ``cosignature/v1`` signs for checkpoint text ``body`` at ``timestamp``."""
    check_note_text(body)
    _check_timestamp(timestamp)
    return (COSIGNATURE_HEADER + f"time {timestamp}\n" + body).encode("utf-8")


def _check_timestamp(timestamp: int) -> None:
    if type(timestamp) is not int or not 0 <= timestamp <= MAX_TIMESTAMP:
        raise NoteError(f"cosignature timestamp must be an integer in 0..{MAX_TIMESTAMP}",
                        field="timestamp")


def encode_cosignature(cosig: Cosignature) -> NoteSignature:
    """The signed-note signature of ``cosig`` (timestamp || signature after the key ID)."""
    _check_timestamp(cosig.timestamp)
    if len(cosig.signature) != ED25519_SIGNATURE_SIZE:
        raise NoteError(f"an Ed25519 signature is {ED25519_SIGNATURE_SIZE} bytes",
                        field="signature")
    blob = cosig.timestamp.to_bytes(TIMESTAMP_SIZE, "big") + cosig.signature
    return NoteSignature(cosig.name, cosig.key_id, blob)


def decode_cosignature(sig: NoteSignature) -> Cosignature:
    """Read a note signature as a ``cosignature/v1``.  Raises NoteError if its length is
    not 8 + 64 bytes or the timestamp exceeds 2**63 - 1 (the key ID is not checked)."""
    if len(sig.signature) != COSIGNATURE_SIZE:
        raise NoteError(f"cosignature by {sig.name} is {len(sig.signature)} bytes after the"
                        f" key ID, want {COSIGNATURE_SIZE}", field="signature")
    timestamp = int.from_bytes(sig.signature[:TIMESTAMP_SIZE], "big")
    if timestamp > MAX_TIMESTAMP:
        raise NoteError(f"cosignature by {sig.name} has a timestamp above 2**63 - 1",
                        field="timestamp")
    return Cosignature(sig.name, sig.key_id, timestamp, sig.signature[TIMESTAMP_SIZE:])


# --- verifier keys -----------------------------------------------------------------------

def format_vkey(name: str, sig_type: int, public_key: bytes) -> str:
    """``<name>+<key id hex>+<base64(type || key)>``."""
    key_id = note_key_id(name, sig_type, public_key)
    blob = base64.b64encode(bytes([sig_type]) + public_key).decode("ascii")
    return f"{name}+{key_id.hex()}+{blob}"


def parse_vkey(text: str) -> VerifierKey:
    """Parse a vkey line.  Raises NoteError: wrong shape, bad base64, a key ID that does
    not match, or an Ed25519 type (0x01, 0x04) with a key that is not 32 bytes."""
    text = text.strip()
    name, sep, rest = text.partition("+")
    hex_id, sep2, blob = rest.partition("+")
    if not (sep and sep2):
        raise NoteError(f"verifier key {text[:40]!r} is not <name>+<key id>+<key>",
                        field="vkey")
    check_key_name(name)
    if len(hex_id) != 2 * KEY_ID_SIZE or any(c not in "0123456789abcdef" for c in hex_id):
        raise NoteError(f"verifier key {name}: key ID is not 8 lowercase hex digits",
                        field="vkey")
    try:
        raw = base64.b64decode(blob, validate=True)
    except (binascii.Error, ValueError):
        raise NoteError(f"verifier key {name}: key is not valid base64", field="vkey") from None
    if len(raw) < 2:
        raise NoteError(f"verifier key {name}: key is empty", field="vkey")
    sig_type, public_key = raw[0], raw[1:]
    if sig_type in (ED25519_TYPE, COSIGNATURE_TYPE) and len(public_key) != ED25519_KEY_SIZE:
        raise NoteError(f"verifier key {name}: Ed25519 key is {len(public_key)} bytes, want"
                        f" {ED25519_KEY_SIZE}", field="vkey")
    if note_key_id(name, sig_type, public_key).hex() != hex_id:
        raise NoteError(f"verifier key {name}: key ID does not match the key", field="vkey")
    return VerifierKey(name, bytes.fromhex(hex_id), sig_type, public_key)


# --- tlog-witness request and answers ------------------------------------------------------

@dataclass(frozen=True)
class AddCheckpoint:
    """An ``add-checkpoint`` request: ``old_size``, the consistency ``proof`` hashes and the
    unverified signed checkpoint ``note``."""

    old_size: int
    proof: tuple[bytes, ...]
    note: str


def format_add_checkpoint(old_size: int, proof: list[bytes] | tuple[bytes, ...],
                          note: str) -> str:
    """The request body.  Raises NoteError on more than 63 proof hashes or bad sizes."""
    if type(old_size) is not int or not 0 <= old_size <= MAX_TREE_SIZE:
        raise NoteError("old size out of range", field="old")
    if len(proof) > MAX_PROOF_LINES:
        raise NoteError(f"consistency proof has {len(proof)} hashes, at most"
                        f" {MAX_PROOF_LINES} allowed", field="proof")
    lines = [f"old {old_size}"] + [base64.b64encode(h).decode("ascii") for h in proof]
    return "".join(line + "\n" for line in lines) + "\n" + note


def parse_add_checkpoint(data: bytes) -> AddCheckpoint:
    """Parse a request body.  Raises NoteError naming the first defect (the note itself is
    only split off here, not parsed)."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise NoteError("request body is not UTF-8") from None
    head, sep, note = text.partition("\n\n")
    if not sep:
        raise NoteError("request has no blank line before the checkpoint")
    first, *proof_lines = head.split("\n")
    if not first.startswith("old "):
        raise NoteError("request does not start with an 'old <size>' line", field="old")
    old_size = parse_size_text(first[4:], "old size")
    if len(proof_lines) > MAX_PROOF_LINES:
        raise NoteError(f"request has {len(proof_lines)} proof lines, at most"
                        f" {MAX_PROOF_LINES} allowed", field="proof")
    proof = []
    for n, line in enumerate(proof_lines, 1):
        try:
            raw = base64.b64decode(line, validate=True)
        except (binascii.Error, ValueError):
            raw = b""
        if len(raw) != HASH_SIZE or base64.b64encode(raw).decode("ascii") != line:
            raise NoteError(f"proof line {n} is not the base64 of a 32-byte hash",
                            field="proof")
        proof.append(raw)
    return AddCheckpoint(old_size, tuple(proof), note)


def parse_size_text(text: str, what: str = "size") -> int:
    """ASCII decimal, no sign, no leading zeros, at most 2**63 - 1.  Raises NoteError."""
    if not text or not text.isascii() or not text.isdigit() or (len(text) > 1 and
                                                                  text[0] == "0"):
        raise NoteError(f"{what} {text[:24]!r} is not a decimal without leading zeros",
                        field="size")
    if len(text) > 19 or int(text) > MAX_TREE_SIZE:
        raise NoteError(f"{what} exceeds {MAX_TREE_SIZE}", field="size")
    return int(text)
