"""Ed25519 signatures on C2SP signed notes (c2sp.org/signed-note, type 0x01).

    key ID    = SHA-256(key name || 0x0A || 0x01 || 32-byte public key)[:4]
    signature = Ed25519(private key, note text)   -- text includes its final newline
    line      = "— " key name " " base64(key ID || signature) "\\n"

Verifiers are configured with ``{(name, key_id): public_key}``; signatures by
other keys are ignored, a known key whose signature fails rejects the whole
note, and a note with no verified known signature is rejected.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from ledger.core.note import (
    KEY_ID_SIZE,
    Checkpoint,
    NoteSignature,
    check_key_name,
    check_note_text,
    format_checkpoint_body,
    format_signature_line,
    parse_checkpoint_body,
    parse_note,
)
from ledger.errors import NoteSignatureError

ED25519_SIGNATURE_TYPE = b"\x01"
ED25519_PUBLIC_KEY_SIZE = 32

PublicKeyLike = Ed25519PublicKey | bytes
KnownKeys = Mapping[tuple[str, bytes], PublicKeyLike]


def _public_bytes(key: PublicKeyLike) -> bytes:
    if isinstance(key, Ed25519PublicKey):
        return key.public_bytes(Encoding.Raw, PublicFormat.Raw)
    if isinstance(key, bytes) and len(key) == ED25519_PUBLIC_KEY_SIZE:
        return key
    raise ValueError(f"expected an Ed25519 public key or {ED25519_PUBLIC_KEY_SIZE} raw bytes")


def ed25519_key_id(name: str, public_key: PublicKeyLike) -> bytes:
    """4-byte key ID of an Ed25519 key.  Raises NoteError on a bad name, ValueError on a bad key."""
    check_key_name(name)
    data = name.encode("utf-8") + b"\n" + ED25519_SIGNATURE_TYPE + _public_bytes(public_key)
    return hashlib.sha256(data).digest()[:KEY_ID_SIZE]


def known_key(name: str, public_key: PublicKeyLike) -> tuple[tuple[str, bytes], Ed25519PublicKey]:
    """A ``((name, key_id), key)`` item for the ``known_keys`` mapping of :func:`verify_note`."""
    raw = _public_bytes(public_key)
    return (name, ed25519_key_id(name, raw)), Ed25519PublicKey.from_public_bytes(raw)


def sign_note(body: str, name: str, private_key: Ed25519PrivateKey) -> str:
    """Signature line (with trailing newline) for note text ``body`` under key ``name``.

    Raises NoteError if ``body`` is not valid note text or ``name`` is not a valid key name.
    """
    check_note_text(body)
    key_id = ed25519_key_id(name, private_key.public_key())
    signature = private_key.sign(body.encode("utf-8"))
    return format_signature_line(NoteSignature(name, key_id, signature))


def verify_note(note_text: str | bytes, known_keys: KnownKeys) -> list[str]:
    """Names of the known keys whose signatures verify, in note order.

    Raises NoteError if the note is malformed, NoteSignatureError if a known
    key's signature fails or no known key signed it.
    """
    note = parse_note(note_text)
    message = note.text.encode("utf-8")
    verified: list[str] = []
    for sig in note.signatures:
        key = known_keys.get((sig.name, sig.key_id))
        if key is None:
            continue  # unknown key: ignored, as the spec requires
        try:
            Ed25519PublicKey.from_public_bytes(_public_bytes(key)).verify(sig.signature, message)
        except InvalidSignature:
            raise NoteSignatureError(f"signature by {sig.name} (key ID {sig.key_id.hex()})"
                                     " does not verify", field="signature") from None
        if sig.name not in verified:
            verified.append(sig.name)
    if not verified:
        raise NoteSignatureError("note has no signature from a known key", field="signature")
    return verified


def sign_checkpoint(cp: Checkpoint, name: str, private_key: Ed25519PrivateKey) -> str:
    """Complete signed checkpoint note: body, blank line, one signature line."""
    body = format_checkpoint_body(cp)
    line = sign_note(body, name, private_key)
    return body + "\n" + line


def open_checkpoint(note_text: str | bytes, known_keys: KnownKeys) -> tuple[Checkpoint, list[str]]:
    """Verify a signed checkpoint, then parse its body.  Raises NoteError/NoteSignatureError."""
    names = verify_note(note_text, known_keys)
    return parse_checkpoint_body(parse_note(note_text).text), names

