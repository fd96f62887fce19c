"""The reader's trusted state: the last checkpoint it verified, kept in a local JSON file.

Format ``ledger-reader-state/1`` (docs/reader.md#the-state-file)::

    {"format": "ledger-reader-state/1",
     "origin": "example.org/ledger",        the log's origin line
     "ledger_id": "3f0c...",                learnt from the first verified entry (or null)
     "tree_size": 12,                       the verified checkpoint's size (0: none yet)
     "root_hash": "<64 hex>",               its root (the empty tree's before the first)
     "checkpoint": "<signed note>",         the checkpoint itself (null before the first)
     "keys": {"keys": [<Ed25519 OKP JWK>]}, the ledger keys that may sign checkpoints
     "witnesses": ["<vkey>", ...],          witness verifier keys (C2SP note vkeys)
     "quorum": 0,                           valid witness cosignatures a new one needs
     "updated_at": "2026-...Z"}

The file is replaced atomically (a temporary file in the same directory, fsynced, then
``os.replace``), so a crash leaves the old state or the new one, never a torn one.  On
load the stored checkpoint is verified again with the stored keys and must say what the
other keys say: a hand-edited root or size is refused, not trusted.

This module and the other reader modules (``reader_core``, ``reader``, ``reader_aio``)
are the client's documented exception to its layer rule: they verify with the ledger's
own code (``ledger.core``, ``ledger.crypto``, ``ledger.verify``) instead of a copy.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ledger.core.cosignature import VerifierKey, parse_vkey
from ledger.core.note import Checkpoint
from ledger.crypto.keys import PublicKeyRef, jwks_public_keys
from ledger.errors import KeyringError, NoteError, ProofError, TrustStateInvalid
from ledger.verify.proof import open_signed_checkpoint

STATE_FORMAT = "ledger-reader-state/1"
STATE_KEYS = ("format", "origin", "ledger_id", "tree_size", "root_hash", "checkpoint", "keys",
              "witnesses", "quorum", "updated_at")
EMPTY_ROOT = hashlib.sha256(b"").digest()  # RFC 9162: the root of the empty tree


@dataclass(frozen=True)
class TrustedState:
    """What the reader trusts (see the module docstring); immutable, replaced on advance."""

    origin: str | None
    tree_size: int
    root_hash: bytes
    checkpoint: str | None
    jwks: dict[str, Any]
    ledger_id: str | None = None
    witnesses: tuple[str, ...] = ()
    quorum: int = 0
    updated_at: str | None = None
    keys: list[PublicKeyRef] = field(default_factory=list, compare=False, repr=False)
    witness_keys: list[VerifierKey] = field(default_factory=list, compare=False, repr=False)

    @classmethod
    def anchor(cls, jwks: dict[str, Any], *, origin: str | None = None,
               witnesses: tuple[str, ...] = (), quorum: int = 0) -> TrustedState:
        """The state before the first checkpoint: only the keys (and the witness policy)
        to trust.  Raises TrustStateInvalid for unusable keys or policy."""
        return _validated(cls(origin, 0, EMPTY_ROOT, None, jwks, None, tuple(witnesses),
                              quorum))

    def advanced(self, cp: Checkpoint, note: str) -> TrustedState:
        """This state moved to the verified checkpoint ``cp`` (its signed ``note``)."""
        return replace(self, origin=cp.origin, tree_size=cp.size, root_hash=cp.root_hash,
                       checkpoint=note, updated_at=_now())

    def with_ledger_id(self, ledger_id: str) -> TrustedState:
        return replace(self, ledger_id=ledger_id, updated_at=_now())

    def to_json(self) -> dict[str, Any]:
        return {"format": STATE_FORMAT, "origin": self.origin, "ledger_id": self.ledger_id,
                "tree_size": self.tree_size, "root_hash": self.root_hash.hex(),
                "checkpoint": self.checkpoint, "keys": self.jwks,
                "witnesses": list(self.witnesses), "quorum": self.quorum,
                "updated_at": self.updated_at}


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _bad(message: str, key: str) -> TrustStateInvalid:
    return TrustStateInvalid(f"trusted state: {message}", field=key)


def _validated(state: TrustedState) -> TrustedState:
    try:
        keys = jwks_public_keys(state.jwks)
    except KeyringError as exc:
        raise _bad(exc.message, "keys") from exc
    if not keys:
        raise _bad("keys holds no Ed25519 key", "keys")
    try:
        witness_keys = [parse_vkey(v) for v in state.witnesses]
    except NoteError as exc:
        raise _bad(f"a witness key does not parse: {exc.message}", "witnesses") from exc
    if not 0 <= state.quorum <= len(witness_keys):
        raise _bad(f"quorum {state.quorum} is not between 0 and the {len(witness_keys)}"
                   " witness keys", "quorum")
    state = replace(state, keys=keys, witness_keys=witness_keys)
    if state.checkpoint is None:
        if state.tree_size != 0 or state.root_hash != EMPTY_ROOT:
            raise _bad("tree_size and root_hash need the checkpoint they come from",
                       "checkpoint")
        return state
    try:
        cp, _ = open_signed_checkpoint(state.checkpoint, keys)
    except ProofError as exc:
        raise _bad(f"the stored checkpoint does not verify with the stored keys:"
                   f" {exc.message}", "checkpoint") from exc
    if (cp.origin, cp.size, cp.root_hash) != (state.origin, state.tree_size, state.root_hash):
        raise _bad("origin, tree_size or root_hash differ from the stored checkpoint",
                   "checkpoint")
    return state


def _field(doc: dict[str, Any], key: str, kinds: tuple[type, ...]) -> Any:
    value = doc.get(key)
    if not isinstance(value, kinds) or isinstance(value, bool) and bool not in kinds:
        raise _bad(f"{key} is missing or has the wrong type", key)
    return value


def parse_state(doc: Any) -> TrustedState:
    """A state from its JSON document.  Raises TrustStateInvalid naming the key."""
    if not isinstance(doc, dict):
        raise _bad("not a JSON object", "format")
    if doc.get("format") != STATE_FORMAT:
        raise _bad(f"format is not {STATE_FORMAT!r}", "format")
    unknown = sorted(set(doc) - set(STATE_KEYS))
    if unknown:
        raise _bad(f"unknown key {unknown[0]!r}", unknown[0])
    size = _field(doc, "tree_size", (int,))
    if size < 0:
        raise _bad("tree_size is negative", "tree_size")
    root_hex = _field(doc, "root_hash", (str,))
    if len(root_hex) != 64 or any(c not in "0123456789abcdef" for c in root_hex):
        raise _bad("root_hash is not 64 lowercase hex digits", "root_hash")
    witnesses = _field(doc, "witnesses", (list,))
    if not all(isinstance(w, str) for w in witnesses):
        raise _bad("witnesses holds a value that is not a string", "witnesses")
    return _validated(TrustedState(
        origin=_field(doc, "origin", (str, type(None))), tree_size=size,
        root_hash=bytes.fromhex(root_hex),
        checkpoint=_field(doc, "checkpoint", (str, type(None))),
        jwks=_field(doc, "keys", (dict,)),
        ledger_id=_field(doc, "ledger_id", (str, type(None))), witnesses=tuple(witnesses),
        quorum=_field(doc, "quorum", (int,)),
        updated_at=_field(doc, "updated_at", (str, type(None)))))


def load_state(path: str | os.PathLike[str]) -> TrustedState | None:
    """The state in ``path``; None when the file does not exist.  Raises
    TrustStateInvalid (unreadable, not JSON, or not a valid state)."""
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise _bad(f"cannot read {path}: {exc.strerror}", "state") from exc
    try:
        doc = json.loads(data)
    except ValueError as exc:
        raise _bad(f"{path} is not JSON", "state") from exc
    return parse_state(doc)


def save_state(path: str | os.PathLike[str], state: TrustedState) -> None:
    """Write ``state`` to ``path`` atomically (temporary file, fsync, rename, and the
    directory fsynced so the rename survives a crash)."""
    target = Path(path)
    directory = target.parent if str(target.parent) else Path(".")
    data = (json.dumps(state.to_json(), indent=1, sort_keys=True) + "\n").encode("utf-8")
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", dir=directory)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    try:
        dir_fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
