"""Offline verification of proof bundles (docs/format-checkpoint.md); no database.

An inclusion bundle (``ledger-inclusion-proof/1``) is checked link by link, each
failure a ProofError with its own ``code``:

    payload bytes  --SHA-256-->  payload digests  ==  the envelope's "payloads"
                   (format v2 results: SHA-256(PAYLOAD_TAG || salt || bytes), salt_b64 sent)
    envelope       --body hash-->  body_hash
    prev_hash, seq, recorded_at_us, body_hash  --entry hash-->  entry_hash
                   (an entry of a tenant other than the default one: the tenant link,
                    which also binds the entry's tenant and tseq, sent beside it)
    entry_hash  --leaf hash + inclusion_path-->  root  ==  checkpoint root
    checkpoint  --Ed25519-->  a key the verifier trusts; origin, size match the bundle

A consistency bundle (``ledger-consistency-proof/1``) holds two signed
checkpoints of one origin and the RFC 9162 proof between them (``0 < old size``: a
size-0 checkpoint needs no proof).

Both are read strictly (:mod:`ledger.core.strict`): UTF-8 JSON, no duplicate keys, no
keys the format does not define, canonical base64 for payload bytes; a breach is
``proof_malformed`` naming the field.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from ledger.core.entry import (
    FORMAT_V2,
    SALT_SIZE,
    body_hash,
    commitment,
    entry_hash,
    parse_hash_hex,
)
from ledger.core.merkle import HASH_SIZE, leaf_hash, verify_consistency, verify_inclusion
from ledger.core.note import Checkpoint, parse_checkpoint_body, parse_note
from ledger.core.strict import StrictError, b64decode, closed, loads
from ledger.core.tenant import DEFAULT_TENANT, is_tenant, tenant_entry_hash
from ledger.crypto.keys import PublicKeyRef, known_keys
from ledger.crypto.note_sign import verify_note
from ledger.errors import NoteError, NoteSignatureError, ProofError

INCLUSION_FORMAT = "ledger-inclusion-proof/1"
CONSISTENCY_FORMAT = "ledger-consistency-proof/1"
# The closed key sets of the two formats ("timestamps": the optional RFC 3161 tokens of the
# checkpoint, judged by ledger.verify.proof_anchor; docs/anchoring.md).
INCLUSION_KEYS = frozenset({"format", "origin", "ledger_id", "seq", "tree_size", "leaf_index",
                            "entry", "inclusion_path", "checkpoint", "timestamps"})
ENTRY_KEYS = frozenset({"envelope", "recorded_at_us", "prev_hash", "body_hash", "entry_hash",
                        "payloads"})
# the entry of a tenant other than the default one also carries both of these (a
# default-tenant entry neither: its object is the one version 1 always had)
TENANT_ENTRY_KEYS = frozenset({"tenant", "tseq"})
PAYLOAD_KEYS = frozenset({"digest", "data_b64", "salt_b64"})  # salt_b64: v2 results only
CONSISTENCY_KEYS = frozenset({"format", "origin", "old", "new", "path", "timestamps"})
_T = TypeVar("_T")


@dataclass(frozen=True)
class VerifiedProof:
    """What a valid bundle established."""

    kind: str                      # "inclusion" | "consistency"
    origin: str
    tree_size: int
    root_hash: bytes
    signers: list[str]
    seq: int | None = None
    entry_hash: bytes | None = None
    old_size: int | None = None
    withheld: list[str] = field(default_factory=list)  # payload names sent without bytes
    tenant: str = DEFAULT_TENANT   # the entry's tenant (inclusion), and its place in its chain
    tseq: int | None = None        # (None for the default tenant: not in the bundle)


def _fail(code: str, message: str, field_: str | None = None) -> ProofError:
    return ProofError(message, code=code, field=field_)


def _get(doc: object, key: str, kind: type[_T], where: str = "") -> _T:
    if not isinstance(doc, dict) or key not in doc:
        raise _fail("proof_malformed", f"missing field {where}{key}", where + key)
    value = doc[key]
    if not isinstance(value, kind) or isinstance(value, bool) and kind is int:
        raise _fail("proof_malformed", f"field {where}{key} has the wrong type", where + key)
    if isinstance(value, int) and kind is int and value < 0:
        raise _fail("proof_malformed", f"field {where}{key} is negative", where + key)
    return value


def _sha256_field(doc: Any, key: str, where: str) -> bytes:
    try:
        return parse_hash_hex(_get(doc, key, str, where))
    except ValueError as exc:
        raise _fail("proof_malformed", f"{where}{key} is not 'sha256:' + 64 hex digits",
                     where + key) from exc


def _path(items: Any, key: str) -> list[bytes]:
    if not isinstance(items, list):
        raise _fail("proof_malformed", f"{key} is not a list", key)
    out = []
    for n, text in enumerate(items):
        raw = bytes.fromhex(text) if isinstance(text, str) and _is_hex(text) else b""
        if len(raw) != HASH_SIZE:
            raise _fail("proof_malformed", f"{key}[{n}] is not 64 lowercase hex digits", key)
        out.append(raw)
    return out


def _is_hex(text: str) -> bool:
    return len(text) == 2 * HASH_SIZE and all(c in "0123456789abcdef" for c in text)


def _load(data: str | bytes | dict[str, Any]) -> dict[str, Any]:
    if isinstance(data, dict):
        return data
    try:
        doc = loads(data)
    except StrictError as exc:
        raise _fail("proof_malformed", _why("the proof", exc), exc.field) from exc
    if not isinstance(doc, dict):
        raise _fail("proof_malformed", "the proof is not a JSON object")
    return doc


def _why(what: str, exc: StrictError) -> str:
    return f"{what} is not valid JSON" if exc.rule == "syntax" else f"{what}: {exc.message}"


def _closed(doc: dict[str, Any], allowed: frozenset[str], where: str = "") -> None:
    try:
        closed(doc, allowed, where)
    except StrictError as exc:
        raise _fail("proof_malformed", exc.message, exc.field) from exc


def open_signed_checkpoint(note: object, keys: Sequence[PublicKeyRef], what: str = "checkpoint"
                           ) -> tuple[Checkpoint, list[str]]:
    """Parse a signed checkpoint and verify it with ``keys`` (unnamed keys are taken
    as named after the checkpoint origin).  Raises ProofError."""
    if not isinstance(note, str):
        raise _fail("proof_malformed", f"{what} is not text", what)
    try:
        cp = parse_checkpoint_body(parse_note(note).text)
    except NoteError as exc:
        raise _fail("checkpoint_malformed", f"{what} is malformed: {exc.message}", what) from exc
    try:
        signers = verify_note(note, known_keys(list(keys), cp.origin))
    except NoteSignatureError as exc:
        raise _fail("checkpoint_signature_invalid", f"{what}: {exc.message}", what) from exc
    return cp, signers


def _verify_payloads(entry: dict[str, Any], envelope: dict[str, Any]) -> list[str]:
    sent = _get(entry, "payloads", dict, "entry.")
    for name, p in sent.items():
        _get(sent, name, dict, "entry.payloads.")
        _closed(p, PAYLOAD_KEYS, f"entry.payloads.{name}.")
    committed = envelope.get("payloads")
    if not isinstance(committed, dict):
        raise _fail("envelope_malformed", "the envelope has no payloads object", "entry.envelope")
    committed = {k: v for k, v in committed.items() if v is not None}
    digests = {name: _get(p, "digest", str, f"entry.payloads.{name}.") for name, p in sent.items()}
    if digests != committed:
        raise _fail("payload_set_mismatch", "the payload digests differ from those the envelope"
                    f" commits to (sent {sorted(digests)}, envelope {sorted(committed)})",
                    "entry.payloads")
    withheld = []
    for name, p in sent.items():
        data = p.get("data_b64")
        if data is None:
            withheld.append(name)
            continue
        try:
            raw = b64decode(data, f"entry.payloads.{name}.data_b64")
        except StrictError as exc:
            raise _fail("proof_malformed", f"payload {name}: {exc.message}",
                        f"entry.payloads.{name}") from exc
        if _payload_digest(envelope, name, p, raw) != digests[name]:
            raise _fail("payload_digest_mismatch", f"payload {name} bytes do not hash to its"
                        " digest", f"entry.payloads.{name}")
    return withheld


def _payload_digest(envelope: dict[str, Any], name: str, p: dict[str, Any], raw: bytes,
                    ) -> str | None:
    """What ``raw`` hashes to under the envelope's format: the salted commitment of a v2
    result payload (its ``salt_b64``), else the plain ``sha256:`` digest."""
    if envelope.get("v") == FORMAT_V2 and envelope.get("kind") == "result":
        text = p.get("salt_b64")
        if not isinstance(text, str):
            return None
        try:
            salt = b64decode(text, f"entry.payloads.{name}.salt_b64")
        except StrictError as exc:
            raise _fail("proof_malformed", f"payload {name}: {exc.message}",
                        f"entry.payloads.{name}") from exc
        return commitment(salt, raw) if len(salt) == SALT_SIZE else None
    return "sha256:" + hashlib.sha256(raw).hexdigest()


def verify_inclusion_bundle(data: str | bytes | dict[str, Any],
                            keys: Sequence[PublicKeyRef]) -> VerifiedProof:
    """Verify a ``ledger-inclusion-proof/1`` bundle.  Raises ProofError (``code`` says which
    link failed)."""
    doc = _load(data)
    if doc.get("format") != INCLUSION_FORMAT:
        raise _fail("proof_format_unknown", f"format is not {INCLUSION_FORMAT!r}", "format")
    _closed(doc, INCLUSION_KEYS)
    origin, ledger_id = _get(doc, "origin", str), _get(doc, "ledger_id", str)
    seq, size, index = _get(doc, "seq", int), _get(doc, "tree_size", int), \
        _get(doc, "leaf_index", int)
    entry = _get(doc, "entry", dict)
    _closed(entry, ENTRY_KEYS | TENANT_ENTRY_KEYS, "entry.")
    tenant, tseq = _tenant_fields(entry)
    text = _get(entry, "envelope", str, "entry.")
    t = _get(entry, "recorded_at_us", int, "entry.")
    prev, body, ehash = (_sha256_field(entry, k, "entry.")
                         for k in ("prev_hash", "body_hash", "entry_hash"))
    path = _path(doc.get("inclusion_path"), "inclusion_path")
    try:
        envelope = loads(text)
    except StrictError as exc:
        raise _fail("envelope_malformed", _why("the envelope", exc), "entry.envelope") from exc
    if not isinstance(envelope, dict):
        raise _fail("envelope_malformed", "the envelope is not a JSON object", "entry.envelope")
    if envelope.get("ledger") != ledger_id:
        raise _fail("ledger_id_mismatch", "the envelope is not for ledger " + ledger_id,
                    "entry.envelope")
    withheld = _verify_payloads(entry, envelope)
    if body_hash(text.encode("utf-8")) != body:
        raise _fail("body_hash_mismatch", "the envelope does not hash to body_hash",
                    "entry.body_hash")
    if index != seq:
        raise _fail("leaf_index_mismatch", f"leaf_index {index} is not seq {seq}", "leaf_index")
    if tseq is None and entry_hash(prev, seq, t, body) != ehash:
        raise _fail("entry_hash_mismatch", "prev_hash, seq, recorded_at_us and body_hash do"
                    " not hash to entry_hash", "entry.entry_hash")
    if tseq is not None and _tenant_link(tenant, prev, seq, tseq, t, body) != ehash:
        raise _fail("entry_hash_mismatch", "tenant, prev_hash, seq, tseq, recorded_at_us and"
                    " body_hash do not hash to entry_hash", "entry.entry_hash")
    cp, signers = open_signed_checkpoint(doc.get("checkpoint"), keys)
    if cp.origin != origin:
        raise _fail("origin_mismatch", f"the checkpoint is for {cp.origin!r}, the proof for"
                    f" {origin!r}", "origin")
    if cp.size != size:
        raise _fail("tree_size_mismatch", f"tree_size {size} is not the checkpoint's size"
                    f" {cp.size}", "tree_size")
    try:
        verify_inclusion(index, size, leaf_hash(ehash), path, cp.root_hash)
    except ProofError as exc:
        raise _fail("inclusion_invalid", exc.message, "inclusion_path") from exc
    return VerifiedProof("inclusion", origin, size, cp.root_hash, signers, seq=seq,
                         entry_hash=ehash, withheld=withheld, tenant=tenant, tseq=tseq)


def _tenant_fields(entry: dict[str, Any]) -> tuple[str, int | None]:
    """(tenant, tseq) of the bundle's entry: (``default``, None) when it carries neither
    key; both or neither, a tenant id other than ``default`` and a non-negative tseq."""
    if not TENANT_ENTRY_KEYS & entry.keys():
        return DEFAULT_TENANT, None
    tenant, tseq = _get(entry, "tenant", str, "entry."), _get(entry, "tseq", int, "entry.")
    if not is_tenant(tenant) or tenant == DEFAULT_TENANT:
        raise _fail("proof_malformed", "entry.tenant is not the id of a tenant other than"
                    " 'default'", "entry.tenant")
    return tenant, tseq


def _tenant_link(tenant: str, prev: bytes, seq: int, tseq: int, t: int, body: bytes,
                 ) -> bytes | None:
    try:
        return tenant_entry_hash(tenant, prev, seq, tseq, t, body)
    except ValueError:  # a seq, tseq or time beyond 2**63-1: nothing hashes to it
        return None


def verify_consistency_bundle(data: str | bytes | dict[str, Any],
                              keys: Sequence[PublicKeyRef]) -> VerifiedProof:
    """Verify a ``ledger-consistency-proof/1`` bundle.  Raises ProofError."""
    doc = _load(data)
    if doc.get("format") != CONSISTENCY_FORMAT:
        raise _fail("proof_format_unknown", f"format is not {CONSISTENCY_FORMAT!r}", "format")
    _closed(doc, CONSISTENCY_KEYS)
    origin = _get(doc, "origin", str)
    path = _path(doc.get("path"), "path")
    old, _ = open_signed_checkpoint(doc.get("old"), keys, "old")
    new, signers = open_signed_checkpoint(doc.get("new"), keys, "new")
    for name, cp in (("old", old), ("new", new)):
        if cp.origin != origin:
            raise _fail("origin_mismatch", f"{name} checkpoint is for {cp.origin!r}, the proof"
                        f" for {origin!r}", name)
    if old.size == 0:
        raise _fail("proof_malformed", "the old checkpoint is empty (size 0): RFC 9162 defines"
                    " consistency proofs only from a non-empty tree", "old")
    try:
        verify_consistency(old.size, new.size, path, old.root_hash, new.root_hash)
    except ProofError as exc:
        raise _fail("consistency_invalid", exc.message, "path") from exc
    return VerifiedProof("consistency", origin, new.size, new.root_hash, signers,
                         old_size=old.size)


def verify_bundle(data: str | bytes | dict[str, Any],
                  keys: Sequence[PublicKeyRef]) -> VerifiedProof:
    """Verify either bundle kind, chosen by its ``format``.  Raises ProofError."""
    doc = _load(data)
    if doc.get("format") == CONSISTENCY_FORMAT:
        return verify_consistency_bundle(doc, keys)
    if doc.get("format") == INCLUSION_FORMAT:
        return verify_inclusion_bundle(doc, keys)
    raise _fail("proof_format_unknown", f"unknown proof format {doc.get('format')!r}", "format")
