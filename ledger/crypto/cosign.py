"""Ed25519 ``cosignature/v1`` signatures on checkpoints (c2sp.org/tlog-cosignature).

The formats are in :mod:`ledger.core.cosignature`; this module signs and verifies.
Witness public keys are C2SP verifier keys (``<name>+<key id>+<base64(0x04 || key)>``),
one per line in a key file; ``#`` starts a comment.  Checking a note's cosignatures
never raises for bad data: signature lines by keys the verifier does not know are
ignored (as the spec requires), a known key whose signature fails is reported.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.serialization import (
    Encoding,
    NoEncryption,
    PrivateFormat,
    PublicFormat,
    load_pem_private_key,
)

from ledger.core.cosignature import (
    COSIGNATURE_TYPE,
    ED25519_TYPE,
    Cosignature,
    VerifierKey,
    cosigned_message,
    cosigner_key_id,
    decode_cosignature,
    encode_cosignature,
    format_vkey,
    parse_vkey,
)
from ledger.core.note import format_signature_line, parse_note
from ledger.crypto.note_sign import KnownKeys, known_key
from ledger.errors import CosignatureError, NoteError, UsageError

CosignerKey = Ed25519PrivateKey  # what signs cosignatures (for callers that only hold one)


def raw_public_key(key: Ed25519PrivateKey | Ed25519PublicKey) -> bytes:
    pub = key.public_key() if isinstance(key, Ed25519PrivateKey) else key
    return pub.public_bytes(Encoding.Raw, PublicFormat.Raw)


def cosigner_vkey(name: str, key: Ed25519PrivateKey | Ed25519PublicKey) -> str:
    """The verifier key line of a witness key (signature type 0x04)."""
    return format_vkey(name, COSIGNATURE_TYPE, raw_public_key(key))


def log_vkey(name: str, key: Ed25519PrivateKey | Ed25519PublicKey) -> str:
    """The verifier key line of a log's own note key (signature type 0x01)."""
    return format_vkey(name, ED25519_TYPE, raw_public_key(key))


def cosign(body: str, name: str, private_key: Ed25519PrivateKey, timestamp: int) -> str:
    """A ``cosignature/v1`` signature line (with its newline) over checkpoint text ``body``.
    Raises NoteError on bad text, name or timestamp."""
    signature = private_key.sign(cosigned_message(body, timestamp))
    key_id = cosigner_key_id(name, raw_public_key(private_key))
    return format_signature_line(encode_cosignature(Cosignature(name, key_id, timestamp,
                                                                 signature)))


def verify_cosignature(body: str, cosig: Cosignature, key: VerifierKey) -> bool:
    """True if ``cosig`` is ``key``'s valid cosignature over ``body`` (name and key ID must
    match ``key``)."""
    if (cosig.name, cosig.key_id) != (key.name, key.key_id) or key.type != COSIGNATURE_TYPE:
        return False
    try:
        Ed25519PublicKey.from_public_bytes(key.public_key).verify(
            cosig.signature, cosigned_message(body, cosig.timestamp))
    except (InvalidSignature, NoteError):
        return False
    return True


@dataclass
class CosignatureCheck:
    """Cosignatures of one note: ``valid`` ``{name: timestamp}``, ``invalid`` ``{name: why}``."""

    valid: dict[str, int] = field(default_factory=dict)
    invalid: dict[str, str] = field(default_factory=dict)


def check_cosignatures(note_text: str | bytes, keys: Sequence[VerifierKey]) -> CosignatureCheck:
    """Which of ``keys`` validly cosigned the note.  Never raises: a malformed note has no
    valid cosignature and every key is reported invalid with the reason."""
    out = CosignatureCheck()
    try:
        note = parse_note(note_text)
    except NoteError as exc:
        out.invalid = {k.name: f"note is malformed: {exc.message}" for k in keys}
        return out
    by_id = {(k.name, k.key_id): k for k in keys if k.type == COSIGNATURE_TYPE}
    for sig in note.signatures:
        key = by_id.get((sig.name, sig.key_id))
        if key is None:
            continue
        try:
            cosig = decode_cosignature(sig)
        except NoteError as exc:
            out.invalid.setdefault(key.name, exc.message)
            continue
        if verify_cosignature(note.text, cosig, key):
            out.valid[key.name] = max(cosig.timestamp, out.valid.get(key.name, 0))
            out.invalid.pop(key.name, None)
        elif key.name not in out.valid:
            out.invalid[key.name] = f"cosignature by {key.name} does not verify"
    return out


def accept_cosignatures(body: str, answer: str, key: VerifierKey) -> list[str]:
    """The signature lines of a witness ``answer`` that are valid cosignatures of ``body``
    by ``key`` (lines by other keys are ignored).  Raises CosignatureError if none is."""
    try:
        note = parse_note(body + "\n" + answer)
    except NoteError as exc:
        raise CosignatureError(f"witness {key.name} answered malformed signature lines:"
                               f" {exc.message}") from exc
    good = []
    for sig in note.signatures:
        if (sig.name, sig.key_id) != (key.name, key.key_id):
            continue
        try:
            if verify_cosignature(body, decode_cosignature(sig), key):
                good.append(format_signature_line(sig))
        except NoteError:
            continue
    if not good:
        raise CosignatureError(f"witness {key.name} answered no valid cosignature")
    return good


# --- key files ---------------------------------------------------------------------------

def load_vkeys(path: str | os.PathLike[str]) -> list[VerifierKey]:
    """Verifier keys from a file (one per line, blank lines and ``#`` comments ignored).
    Raises UsageError if unreadable or a line does not parse."""
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"cannot read verifier keys {path}: {exc}", code="bad_vkey",
                         field="witness_key") from None
    keys = []
    for line in lines:
        if line.strip() and not line.lstrip().startswith("#"):
            try:
                keys.append(parse_vkey(line))
            except NoteError as exc:
                raise UsageError(f"{path}: {exc.message}", code="bad_vkey",
                                 field="witness_key") from None
    return keys


def known_log_keys(vkeys: Sequence[VerifierKey]) -> KnownKeys:
    """A ``known_keys`` mapping (for ``verify_note``) of the Ed25519 (0x01) log keys."""
    return dict(known_key(k.name, k.public_key) for k in vkeys if k.type == ED25519_TYPE)


def generate_cosigner(directory: str | os.PathLike[str], name: str) -> tuple[Path, str]:
    """Write a new witness key ``witness.pem`` (mode 0600) and ``witness.vkey`` in
    ``directory``; returns (private key path, vkey).  Refuses to overwrite a key."""
    folder = Path(directory)
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    pem = folder / "witness.pem"
    if pem.exists():
        raise UsageError(f"{pem} exists; not overwriting a witness key", code="key_exists")
    key = Ed25519PrivateKey.generate()
    vkey = cosigner_vkey(name, key)
    fd = os.open(pem, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(key.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, NoEncryption()))
    (folder / "witness.vkey").write_text(vkey + "\n", encoding="utf-8")
    return pem, vkey


def load_cosigner(path: str | os.PathLike[str]) -> Ed25519PrivateKey:
    """An Ed25519 private key from a PEM file.  Raises UsageError."""
    try:
        key = load_pem_private_key(Path(path).read_bytes(), password=None)
    except (OSError, ValueError, TypeError) as exc:
        raise UsageError(f"cannot load witness key {path}: {exc}", code="bad_key") from None
    if not isinstance(key, Ed25519PrivateKey):
        raise UsageError(f"{path} is not an Ed25519 private key", code="bad_key")
    return key
