"""Ledger signing keys: an Ed25519 keyring directory published as a JWKS.

A keyring directory (``--keys DIR``, default ``$LEDGER_KEYS_DIR`` or ``./ledger-keys``)::

    <name>-<note key id hex>.pem       PKCS#8 private key, file mode 0600 (directory 0700)
    <name>-<note key id hex>.pub.pem   SubjectPublicKeyInfo public key
    jwks.json                          {"keys": [JWK, ...]} -- every key ever generated

``<name>`` is the key name (the ledger origin) with every character outside
``[A-Za-z0-9._-]`` replaced by ``_``.  Each JWK is an RFC 8037 OKP key::

    {"kty": "OKP", "crv": "Ed25519", "x": b64url(public key), "alg": "EdDSA", "use": "sig",
     "kid": RFC 7638 thumbprint = b64url(SHA-256('{"crv":"Ed25519","kty":"OKP","x":"<x>"}')),
     "key_name": <origin>, "note_key_id": hex(C2SP note key ID, 4 bytes),
     "status": "active" | "retired", "created": RFC 3339, "retired": RFC 3339 (if retired)}

Rotation: generate a new key (both keys sign while both are active), then
retire the old one; a retired key never signs again but stays in jwks.json
forever, so old checkpoints remain verifiable.  Key ids are hints for finding
a key, never proof of anything (verification is by signature only).
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# Ed25519PrivateKey is re-exported: ops name the key type through this module (only crypto
# imports cryptography)
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey as Ed25519PrivateKey
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from cryptography.hazmat.primitives.asymmetric.types import PublicKeyTypes
from cryptography.hazmat.primitives.serialization import (
    Encoding,
    NoEncryption,
    PrivateFormat,
    PublicFormat,
    load_pem_private_key,
    load_pem_public_key,
)

from ledger.clock import format_us
from ledger.core.note import check_key_name
from ledger.crypto.note_sign import ed25519_key_id
from ledger.errors import KeyringError, UsageError

DEFAULT_KEYS_DIR = "ledger-keys"
JWKS_FILE = "jwks.json"
ACTIVE, RETIRED = "active", "retired"


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def b64url_decode(text: str) -> bytes:
    """base64url without padding (JWS/JWK), as bytes."""
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def raw_public(key: Ed25519PublicKey | Ed25519PrivateKey) -> bytes:
    pub = key.public_key() if isinstance(key, Ed25519PrivateKey) else key
    return pub.public_bytes(Encoding.Raw, PublicFormat.Raw)


def jwk_thumbprint(public_raw: bytes) -> str:
    """RFC 7638 thumbprint of an Ed25519 OKP key: b64url(SHA-256(required members, sorted))."""
    members = '{"crv":"Ed25519","kty":"OKP","x":"' + b64url(public_raw) + '"}'
    return b64url(hashlib.sha256(members.encode("ascii")).digest())


def public_jwk(name: str, public_raw: bytes, created: str) -> dict[str, Any]:
    return {"kty": "OKP", "crv": "Ed25519", "x": b64url(public_raw), "alg": "EdDSA",
            "use": "sig", "kid": jwk_thumbprint(public_raw), "key_name": name,
            "note_key_id": ed25519_key_id(name, public_raw).hex(), "status": ACTIVE,
            "created": created}


def file_stem(name: str, note_key_id_hex: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]", "_", name) + "-" + note_key_id_hex


@dataclass(frozen=True)
class PublicKeyRef:
    """A verification key; ``name`` is None when the file does not say (PEM)."""

    name: str | None
    public_raw: bytes


def _check_owned(file: Path, what: str, mode: int, uid: int, forbidden: int,
                 fix: str) -> None:
    """Refuse a key file (or the directory) that is not this user's or has a
    ``forbidden`` permission bit.  Raises KeyringError."""
    if mode & forbidden:
        may = "write" if forbidden == 0o022 else "read or write"
        raise KeyringError(f"{what} {file} has mode {stat.S_IMODE(mode):o}: others than its"
                           f" owner may {may} it; {fix} it", code="key_file_mode")
    if uid != os.geteuid():
        raise KeyringError(f"{what} {file} belongs to uid {uid}, not to this user"
                           f" (uid {os.geteuid()})", code="key_file_owner")


class Keyring:
    """The keys in one directory; loading never needs the private keys."""

    def __init__(self, path: str | os.PathLike[str], jwks: list[dict[str, Any]]) -> None:
        self.path = Path(path)
        self.jwks = jwks

    @classmethod
    def load(cls, path: str | os.PathLike[str] | None = None) -> Keyring:
        """Read ``jwks.json`` (an absent directory is an empty keyring).  Raises KeyringError."""
        path = Path(path or os.environ.get("LEDGER_KEYS_DIR") or DEFAULT_KEYS_DIR)
        file = path / JWKS_FILE
        if not file.exists():
            return cls(path, [])
        try:
            doc = json.loads(file.read_text("utf-8"))
        except (OSError, ValueError) as exc:
            raise KeyringError(f"{file} is not a readable JWKS", code="bad_jwks") from exc
        keys = doc.get("keys") if isinstance(doc, dict) else None
        if not isinstance(keys, list) or not all(isinstance(k, dict) for k in keys):
            raise KeyringError(f"{file} has no \"keys\" list of JWKs", code="bad_jwks")
        return cls(path, keys)

    def _save(self) -> None:
        self.path.mkdir(mode=0o700, parents=True, exist_ok=True)
        tmp = self.path / (JWKS_FILE + ".tmp")
        tmp.unlink(missing_ok=True)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            os.fchmod(fh.fileno(), 0o644)  # whatever the umask: writable by its owner only
            fh.write(json.dumps({"keys": self.jwks}, indent=2) + "\n")
        os.replace(tmp, self.path / JWKS_FILE)

    def check_trusted_files(self) -> None:
        """The key directory and ``jwks.json`` decide which keys are trusted (a key added
        there as ``retired`` verifies tokens), so, like the private keys, they must belong
        to this user and be writable by nobody else.  Raises KeyringError
        (``key_file_mode``, ``key_file_owner``)."""
        for file, what in ((self.path, "key directory"), (self.path / JWKS_FILE, "JWKS")):
            try:
                st = file.stat()
            except FileNotFoundError:
                continue
            except OSError as exc:
                raise KeyringError(f"cannot read {what} {file}", code="bad_key_file") from exc
            _check_owned(file, what, st.st_mode, st.st_uid, 0o022, "chmod go-w")

    def generate(self, name: str, now_us: int,
                 private_key: Ed25519PrivateKey | None = None) -> dict[str, Any]:
        """Create an active key named ``name`` (PEM 0600 + public PEM + JWKS entry)."""
        check_key_name(name)
        key = private_key or Ed25519PrivateKey.generate()
        jwk = public_jwk(name, raw_public(key), format_us(now_us))
        stem = self.path / file_stem(name, jwk["note_key_id"])
        self.path.mkdir(mode=0o700, parents=True, exist_ok=True)
        pem = key.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, NoEncryption())
        try:
            fd = os.open(f"{stem}.pem", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError as exc:
            raise KeyringError(f"{stem}.pem already exists", code="key_exists") from exc
        with os.fdopen(fd, "wb") as fh:
            os.fchmod(fh.fileno(), 0o600)
            fh.write(pem)
        Path(f"{stem}.pub.pem").write_bytes(
            key.public_key().public_bytes(Encoding.PEM, PublicFormat.SubjectPublicKeyInfo))
        self.jwks.append(jwk)
        self._save()
        return jwk

    def find(self, ref: str) -> dict[str, Any]:
        """The key whose ``kid`` or ``note_key_id`` is ``ref``.  Raises KeyringError."""
        hits = [k for k in self.jwks if ref in (k.get("kid"), k.get("note_key_id"))]
        if len(hits) != 1:
            raise KeyringError(f"{'no' if not hits else 'more than one'} key {ref!r} in"
                               f" {self.path}", code="key_not_found")
        return hits[0]

    def retire(self, ref: str, now_us: int) -> dict[str, Any]:
        """Mark a key retired: it stops signing, its public key stays published."""
        jwk = self.find(ref)
        if jwk.get("status") != RETIRED:
            jwk["status"], jwk["retired"] = RETIRED, format_us(now_us)
            self._save()
        return jwk

    def active(self, name: str) -> list[dict[str, Any]]:
        return [k for k in self.jwks if k.get("status") == ACTIVE and k.get("key_name") == name]

    def signers(self, name: str) -> list[tuple[str, Ed25519PrivateKey]]:
        """(name, private key) of every active key named ``name``, oldest first.

        Raises KeyringError if there is none, a private key file is missing,
        readable by group/others, or does not match its published public key.
        """
        self.check_trusted_files()
        out = []
        for jwk in self.active(name):
            file = self.path / (file_stem(name, jwk["note_key_id"]) + ".pem")
            try:
                st = file.stat()
                key = load_pem_private_key(file.read_bytes(), password=None)
            except (OSError, ValueError) as exc:
                raise KeyringError(f"cannot read private key {file}", code="bad_key_file"
                                   ) from exc
            if st.st_mode & 0o077:
                raise KeyringError(f"private key {file} is accessible by others"
                                   f" (mode {st.st_mode & 0o777:o}); chmod 600 it",
                                   code="key_file_mode")
            _check_owned(file, "private key", st.st_mode, st.st_uid, 0o077, "chmod 600")
            if not isinstance(key, Ed25519PrivateKey) or b64url(raw_public(key)) != jwk["x"]:
                raise KeyringError(f"{file} does not hold the key published as"
                                   f" {jwk['kid']}", code="key_mismatch")
            out.append((name, key))
        if not out:
            raise KeyringError(f"no active signing key named {name!r} in {self.path};"
                               " run `ledger keys generate`", code="no_signing_key")
        return out

    def public_keys(self) -> list[PublicKeyRef]:
        """Every key ever generated, active or retired."""
        return [_jwk_ref(k) for k in self.jwks]


def _jwk_ref(jwk: dict[str, Any]) -> PublicKeyRef:
    if jwk.get("kty") != "OKP" or jwk.get("crv") != "Ed25519" or not isinstance(jwk.get("x"),
                                                                                 str):
        raise KeyringError(f"JWK {jwk.get('kid')!r} is not an Ed25519 OKP key", code="bad_jwks")
    try:
        raw = b64url_decode(jwk["x"])
    except ValueError:  # binascii.Error is a ValueError
        raw = b""
    if len(raw) != 32:
        raise KeyringError(f"JWK {jwk.get('kid')!r} has a bad x", code="bad_jwks")
    return PublicKeyRef(jwk.get("key_name"), raw)


def load_private_pem(path: str | os.PathLike[str]) -> Ed25519PrivateKey:
    """The Ed25519 private key in the PEM file ``path``.  Raises UsageError
    (``bad_key_file``) for an unreadable file or another kind of key."""
    try:
        key = load_pem_private_key(Path(path).read_bytes(), password=None)
    except (OSError, ValueError, TypeError) as exc:
        raise UsageError(f"cannot read the private key {path}: {exc}", code="bad_key_file",
                         field="key") from None
    if not isinstance(key, Ed25519PrivateKey):
        raise UsageError(f"{path} is not an Ed25519 private key", code="bad_key_file",
                         field="key")
    return key


def load_public_keys(path: str | os.PathLike[str]) -> list[PublicKeyRef]:
    """Verification keys from a PEM public (or private) key file or a JWKS file.

    Raises KeyringError on an unreadable file or a key that is not Ed25519.
    """
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise KeyringError(f"cannot read key file {path}: {exc.strerror}",
                           code="bad_key_file") from exc
    if data.lstrip().startswith(b"{"):
        try:
            doc = json.loads(data)
        except ValueError as exc:
            raise KeyringError(f"{path} is not valid JSON", code="bad_jwks") from exc
        return jwks_public_keys(doc)
    try:
        key: PublicKeyTypes = load_pem_public_key(data)
    except ValueError:
        try:
            key = load_pem_private_key(data, password=None).public_key()
        except (ValueError, TypeError) as exc:
            raise KeyringError(f"{path} is neither a PEM key nor a JWKS",
                               code="bad_key_file") from exc
    if not isinstance(key, Ed25519PublicKey):
        raise KeyringError(f"{path} is not an Ed25519 key", code="bad_key_file")
    return [PublicKeyRef(None, raw_public(key))]


def jwks_public_keys(doc: Any) -> list[PublicKeyRef]:
    """Verification keys of a JWKS document (``{"keys": [...]}``) or of a single JWK.
    Raises KeyringError for a key that is not an Ed25519 OKP key."""
    keys = doc.get("keys") if isinstance(doc, dict) else None
    if not isinstance(keys, list):
        keys = [doc]  # a single JWK
    return [_jwk_ref(k) for k in keys if isinstance(k, dict)]


def known_keys(refs: list[PublicKeyRef], default_name: str,
               ) -> dict[tuple[str, bytes], Ed25519PublicKey]:
    """The ``{(name, note key id): public key}`` map for note verification; keys
    without a name (PEM) are taken as named ``default_name`` (the origin)."""
    out: dict[tuple[str, bytes], Ed25519PublicKey] = {}
    for ref in refs:
        name = ref.name or default_name
        out[(name, ed25519_key_id(name, ref.public_raw))] = \
            Ed25519PublicKey.from_public_bytes(ref.public_raw)
    return out
