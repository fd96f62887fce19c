"""The witness configuration file (JSON; relative paths are relative to the file)::

    {"name": "witness.example/w1",          cosigner name (its key name)
     "key": "w1/witness.pem",               Ed25519 private key (`ledger witness keys generate`)
     "state": "w1/state.db",                its own SQLite state file
     "logs": [{"origin": "ledger.example/log",
               "vkeys": ["ledger.example/log+1a2b3c4d+AU..."],   and/or
               "key_files": ["ledger-keys/jwks.json"]}]}           PEM or JWKS files

A log is identified by its origin; its checkpoints must carry a valid signature by
one of its keys.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ledger.core.cosignature import ED25519_TYPE, parse_vkey
from ledger.core.note import check_key_name
from ledger.crypto.cosign import (
    CosignerKey,
    cosigner_vkey,
    generate_cosigner,
    known_log_keys,
    load_cosigner,
)
from ledger.crypto.keys import known_keys, load_public_keys
from ledger.crypto.note_sign import KnownKeys
from ledger.errors import LedgerError, NoteError, UsageError


@dataclass(frozen=True)
class WitnessConfig:
    """A loaded configuration: cosigner ``name`` and ``key``, ``state`` path, log keys."""

    name: str
    key: CosignerKey
    state: Path
    logs: dict[str, KnownKeys]

    @property
    def vkey(self) -> str:
        return cosigner_vkey(self.name, self.key)


def _fail(path: Path, message: str) -> UsageError:
    return UsageError(f"witness config {path}: {message}", code="bad_witness_config",
                      field="config")


def _log_keys(path: Path, log: dict[str, Any]) -> tuple[str, KnownKeys]:
    origin = log.get("origin")
    if not isinstance(origin, str) or not origin:
        raise _fail(path, "every log needs an origin")
    keys: dict[Any, Any] = {}
    try:
        vkeys = [parse_vkey(v) for v in log.get("vkeys", [])]
    except NoteError as exc:
        raise _fail(path, f"log {origin}: {exc.message}") from None
    if any(v.type != ED25519_TYPE for v in vkeys):
        raise _fail(path, f"log {origin}: only Ed25519 (type 0x01) log keys are supported")
    keys.update(known_log_keys(vkeys))
    for name in log.get("key_files", []):
        keys.update(known_keys(load_public_keys(path.parent / name), origin))
    if not keys:
        raise _fail(path, f"log {origin} has no key (vkeys or key_files)")
    return origin, keys


def load_config(path: str | Path) -> WitnessConfig:
    """Read and check the file.  Raises UsageError (bad file, key or log entry)."""
    path = Path(path)
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise _fail(path, f"cannot read it: {exc}") from None
    if not isinstance(doc, dict):
        raise _fail(path, "not a JSON object")
    name, key, state = doc.get("name"), doc.get("key"), doc.get("state")
    if not (isinstance(name, str) and name and isinstance(key, str) and key
            and isinstance(state, str) and state):
        raise _fail(path, "needs name, key and state")
    try:
        check_key_name(name)
        logs = dict(_log_keys(path, log) for log in doc.get("logs", [])
                    if isinstance(log, dict))
    except LedgerError as exc:
        raise _fail(path, exc.message) from None
    return WitnessConfig(name, load_cosigner(path.parent / key), path.parent / state, logs)


def generate_witness_key(directory: str | Path, name: str) -> tuple[Path, str]:
    """``ledger witness keys generate``: (private key path, vkey).  Raises UsageError."""
    try:
        return generate_cosigner(directory, name)
    except NoteError as exc:
        raise UsageError(f"bad witness name: {exc.message}", code="bad_witness_name",
                         field="name") from None
