"""The checks of a verified read, without I/O (shared by ``LedgerReader`` and
``AsyncLedgerReader``; the steps in order: docs/reader.md#verification-steps).

* :func:`judge_checkpoint`: a served checkpoint against the trusted state -- its
  signatures (trusted ledger keys, the witness quorum), its origin, and its size and root:
  smaller than trusted is ``rolled_back``, the same size with another root ``forked``,
  larger needs a consistency proof.
* :func:`verify_consistency`: that proof (``GET /v1/proofs/consistency``), from the
  *trusted* root to the new one: a history that was rewritten and signed again with the
  ledger key fails here (``forked`` when the server's old checkpoint of the trusted size
  has another root, else ``consistency_invalid``).
* :func:`verify_entry`: an entry answer with its proof to the trusted size.  With the
  auditor's ``ledger-inclusion-proof/1`` bundle the entry is checked by
  ``ledger.core.readcheck.check_entry`` (the server's own rules) from the bytes received,
  every value served is compared with what the envelope and checked payloads prove, and
  the bundle is verified by ``ledger.verify.proof``; the path must lead to the trusted
  root.  With a developer's or agent's ``ledger-inclusion-path/1`` only the entry hash is
  proven (its values are the server's word, ``values_checked`` false).

Every check is done here, whatever the server's ``integrity`` verdict says; a verdict
that flags the entry is still honoured (``reported_by: server``).
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Generator
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

from ledger.client.reader_http import (
    CHECKPOINT_PATH,
    CONSISTENCY_PATH,
    consistency_params,
    entry_params,
    entry_path,
    refusal,
)
from ledger.client.trust_state import TrustedState
from ledger.clock import format_us
from ledger.core.entry import FORMAT_V2, hash_hex, parse_hash_hex, payload_map
from ledger.core.merkle import leaf_hash, verify_inclusion
from ledger.core.merkle import verify_consistency as merkle_consistency
from ledger.core.note import Checkpoint
from ledger.core.readcheck import (
    COLUMN_MISMATCH,
    ENTRY_HASH_MISMATCH,
    ENVELOPE_HASH_MISMATCH,
    ENVELOPE_UNREADABLE,
    FOREIGN_ENVELOPE,
    INDEXED_COLUMNS,
    PAYLOAD_DIGEST_MISMATCH,
    CheckedEntry,
    Problem,
    check_entry,
)
from ledger.core.tenant import DEFAULT_TENANT
from ledger.crypto.cosign import check_cosignatures
from ledger.errors import (
    CheckpointRejected,
    EntryUnverified,
    Forked,
    NotFound,
    ProofError,
    ProofRejected,
    RolledBack,
)
from ledger.verify.proof import (
    CONSISTENCY_FORMAT,
    INCLUSION_FORMAT,
    open_signed_checkpoint,
    verify_consistency_bundle,
    verify_inclusion_bundle,
)

PATH_FORMAT = "ledger-inclusion-path/1"
SERVED_MISMATCH = "served_value_mismatch"  # a value served differs from what is proven
# ledger.verify.proof codes -> the reader's error and code
_ENTRY_CODES = {"payload_digest_mismatch": PAYLOAD_DIGEST_MISMATCH,
                "payload_set_mismatch": PAYLOAD_DIGEST_MISMATCH,
                "body_hash_mismatch": ENVELOPE_HASH_MISMATCH,
                "entry_hash_mismatch": ENTRY_HASH_MISMATCH,
                "envelope_malformed": ENVELOPE_UNREADABLE,
                "ledger_id_mismatch": FOREIGN_ENVELOPE}
_CHECKPOINT_CODES = ("checkpoint_signature_invalid", "checkpoint_malformed", "origin_mismatch")
_PROOF_CODES = {"tree_size_mismatch": "wrong_tree_size", "leaf_index_mismatch": "wrong_entry",
                "inclusion_invalid": "inclusion_invalid"}


@dataclass(frozen=True)
class VerifiedEntry:
    """One entry read and verified: ``entry`` as served (its values compared with what
    was proven when ``values_checked``), proven in the checkpoint of ``tree_size`` with
    ``root_hash`` (the trusted state's)."""

    seq: int
    layer: str
    entry: dict[str, Any]
    entry_hash: str
    tree_size: int
    root_hash: bytes
    values_checked: bool
    redacted: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"seq": self.seq, "layer": self.layer, "verified": {
            "entry_hash": self.entry_hash, "tree_size": self.tree_size,
            "root_hash": self.root_hash.hex(), "values_checked": self.values_checked,
            "redacted": self.redacted}, "entry": self.entry}


def proof_error(exc: ProofError) -> Exception:
    """The reader's error for a failed ``ledger.verify.proof`` check."""
    if exc.code in _ENTRY_CODES:
        code = _ENTRY_CODES[exc.code]
        return EntryUnverified(exc.message, code=code, field=exc.field, detail={
            "codes": [code], "problems": [{"code": code, "field": exc.field}],
            "reported_by": "reader"})
    if exc.code in _CHECKPOINT_CODES:
        return CheckpointRejected(exc.message, code=exc.code, field=exc.field)
    if exc.code == "consistency_invalid":
        return Forked(exc.message, code="consistency_invalid", field=exc.field)
    return ProofRejected(exc.message, code=_PROOF_CODES.get(exc.code, "proof_malformed"),
                         field=exc.field)


# -- checkpoints ------------------------------------------------------------------------
def open_checkpoint(state: TrustedState, note: Any) -> Checkpoint:
    """A served checkpoint note verified with the trusted keys, for the trusted origin,
    with the witness quorum.  Raises CheckpointRejected."""
    try:
        cp, _ = open_signed_checkpoint(note, state.keys)
    except ProofError as exc:
        raise proof_error(exc) from exc
    if state.origin is not None and cp.origin != state.origin:
        raise CheckpointRejected(f"the checkpoint is for {cp.origin!r}, not {state.origin!r}",
                                 code="origin_mismatch", field="checkpoint")
    if state.quorum:
        valid = check_cosignatures(note, state.witness_keys).valid
        if len(valid) < state.quorum:
            raise CheckpointRejected(
                f"the checkpoint of size {cp.size} has {len(valid)} valid witness"
                f" cosignatures, the state needs {state.quorum}",
                code="witness_quorum_not_met", field="checkpoint")
    return cp


def judge_checkpoint(state: TrustedState, note: Any) -> Checkpoint | None:
    """The served latest checkpoint ``note`` if it is newer than the trusted one (then a
    consistency proof must follow), None if it is the trusted one.  Raises
    CheckpointRejected, RolledBack, Forked."""
    cp = open_checkpoint(state, note)
    if cp.size < state.tree_size:
        raise RolledBack(f"the ledger serves a checkpoint of size {cp.size}, smaller than"
                         f" the verified size {state.tree_size}", field="tree_size",
                         detail={"served_size": cp.size, "trusted_size": state.tree_size})
    if cp.size == state.tree_size:
        if cp.root_hash != state.root_hash:
            raise _forked(state, cp)
        return None
    return cp


def _forked(state: TrustedState, cp: Checkpoint) -> Forked:
    return Forked(f"the ledger signed two checkpoints of size {cp.size} with different"
                  f" roots: trusted {state.root_hash.hex()}, served {cp.root_hash.hex()}",
                  field="root_hash", detail={"tree_size": cp.size,
                                             "trusted_root": state.root_hash.hex(),
                                             "served_root": cp.root_hash.hex()})


def verify_consistency(state: TrustedState, new: Checkpoint, bundle: Any) -> None:
    """The consistency answer from the trusted size to ``new`` (already verified by
    :func:`judge_checkpoint`).  Raises Forked, CheckpointRejected, ProofRejected."""
    if not isinstance(bundle, dict) or bundle.get("format") != CONSISTENCY_FORMAT:
        raise ProofRejected("the consistency answer is not a ledger-consistency-proof/1",
                            code="proof_malformed", field="format")
    try:
        got = verify_consistency_bundle(bundle, state.keys)
        old = open_checkpoint(state, bundle.get("old"))
        served_new = open_checkpoint(state, bundle.get("new"))
    except ProofError as exc:
        raise proof_error(exc) from exc
    if old.size != state.tree_size or served_new.size != new.size or got.old_size != old.size:
        raise ProofRejected(f"the consistency proof is from {old.size} to {served_new.size},"
                            f" not {state.tree_size} to {new.size}", code="wrong_tree_size",
                            field="tree_size")
    if old.root_hash != state.root_hash:
        raise _forked(state, old)
    if served_new.root_hash != new.root_hash:
        raise Forked(f"two checkpoints of size {new.size} with different roots",
                     field="root_hash")
    try:  # from the trusted root itself, not only the server's old note
        merkle_consistency(state.tree_size, new.size,
                           [bytes.fromhex(h) for h in bundle["path"]],
                           state.root_hash, new.root_hash)
    except ProofError as exc:
        raise Forked(exc.message, code="consistency_invalid", field="path") from exc


# -- entries ------------------------------------------------------------------------------
def verify_entry(state: TrustedState, seq: int, answer: Any) -> VerifiedEntry:
    """An answer of ``GET /v1/entries/{seq}?proof=true&tree_size=<trusted size>``.
    Raises EntryUnverified, ProofRejected, CheckpointRejected, Forked."""
    if not isinstance(answer, dict) or not isinstance(answer.get("entry"), dict) \
            or not isinstance(answer.get("proof"), dict):
        raise ProofRejected("the answer has no entry and proof", code="proof_malformed",
                            field="proof")
    entry, proof, layer = answer["entry"], answer["proof"], str(answer.get("layer"))
    if proof.get("format") == INCLUSION_FORMAT:
        return _verify_bundle(state, seq, layer, entry, proof)
    if proof.get("format") == PATH_FORMAT:
        return _verify_path(state, seq, layer, entry, proof)
    raise ProofRejected(f"unknown proof format {proof.get('format')!r}",
                        code="proof_malformed", field="proof.format")


def _leads_to_trusted(state: TrustedState, seq: int, got_seq: Any, size: int,
                      root: bytes) -> None:
    if got_seq != seq:
        raise ProofRejected(f"the proof is for seq {got_seq}, not {seq}", code="wrong_entry",
                            field="seq")
    if size != state.tree_size:
        raise ProofRejected(f"the proof is to tree size {size}, not the trusted"
                            f" {state.tree_size}", code="wrong_tree_size", field="tree_size",
                            detail={"served_size": size, "trusted_size": state.tree_size})
    if root != state.root_hash:
        raise _forked(state, Checkpoint(state.origin or "", size, root))


def _verify_path(state: TrustedState, seq: int, layer: str, entry: dict[str, Any],
                 proof: dict[str, Any]) -> VerifiedEntry:
    cp = open_checkpoint(state, proof.get("checkpoint"))
    try:
        ehash = parse_hash_hex(proof.get("entry_hash"))  # type: ignore[arg-type]
        path = [bytes.fromhex(h) for h in proof["inclusion_path"]]
        index, size = int(proof["leaf_index"]), int(proof["tree_size"])
    except (TypeError, ValueError, KeyError) as exc:
        raise ProofRejected("the inclusion path is malformed", code="proof_malformed",
                            field="proof") from exc
    if size != cp.size:
        raise ProofRejected(f"tree_size {size} is not the checkpoint's {cp.size}",
                            code="wrong_tree_size", field="tree_size")
    _leads_to_trusted(state, seq, proof.get("seq") if index == seq else index, cp.size,
                      cp.root_hash)
    try:
        verify_inclusion(index, size, leaf_hash(ehash), path, cp.root_hash)
    except ProofError as exc:
        raise ProofRejected(exc.message, code="inclusion_invalid",
                            field="inclusion_path") from exc
    _server_verdict(entry)
    return VerifiedEntry(seq, layer, entry, hash_hex(ehash), size, cp.root_hash, False,
                         list((entry.get("integrity") or {}).get("redacted") or []))


def _server_verdict(entry: dict[str, Any]) -> None:
    """The server flags the entry: honoured, whatever the reader could check."""
    integrity = entry.get("integrity")
    if isinstance(integrity, dict) and integrity.get("verified") is False:
        codes = [str(c) for c in integrity.get("codes") or []] or ["entry_unverified"]
        raise EntryUnverified(f"the ledger reports entry {entry.get('seq')} as not verified:"
                              f" {', '.join(codes)}", code=codes[0], detail={
                                  "codes": codes, "problems": integrity.get("problems", []),
                                  "reported_by": "server"})


def _b64(value: Any, where: str) -> bytes | None:
    if value is None:
        return None
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, TypeError, ValueError) as exc:
        raise ProofRejected(f"{where} is not base64", code="proof_malformed",
                            field=where) from exc


def _stored_row(entry: dict[str, Any], bundle_entry: dict[str, Any], seq: int, kind: Any,
                v: Any) -> SimpleNamespace:
    """The stored row as the server describes it: hashes, envelope, tenant and tseq from the
    bundle; the indexed columns as served, except where the server reports the stored column differs
    (its ``column_mismatch`` problems: the value actually stored).  A v2 result's subject
    is a payload, never a column."""
    columns = {col: entry.get(col) for col in INDEXED_COLUMNS}
    if kind == "result" and v == FORMAT_V2:
        columns["subject"] = None
    for p in (entry.get("integrity") or {}).get("problems") or []:
        if isinstance(p, dict) and p.get("code") == COLUMN_MISMATCH and p.get("field") in columns:
            columns[p["field"]] = p.get("actual")
    try:
        hashes = {k: parse_hash_hex(bundle_entry[k])
                  for k in ("prev_hash", "body_hash", "entry_hash")}
        envelope = str(bundle_entry["envelope"]).encode("utf-8")
        recorded_at = bundle_entry["recorded_at_us"]
    except (KeyError, TypeError, ValueError) as exc:
        raise ProofRejected("the bundle's entry is malformed", code="proof_malformed",
                            field="proof.entry") from exc
    # an entry of a tenant other than the default one: its tenant and tseq, which its tenant
    # link binds, from the bundle (docs/format-checkpoint.md); without them: the default
    # tenant's v1 link
    tenant = bundle_entry.get("tenant", DEFAULT_TENANT)
    return SimpleNamespace(seq=seq, kind=kind, recorded_at=recorded_at, envelope=envelope,
                           tenant=tenant, tseq=bundle_entry.get("tseq"), **hashes, **columns)


def _verify_bundle(state: TrustedState, seq: int, layer: str, entry: dict[str, Any],
                   bundle: dict[str, Any]) -> VerifiedEntry:
    bentry = bundle.get("entry")
    if not isinstance(bentry, dict):
        raise ProofRejected("the bundle has no entry", code="proof_malformed",
                            field="proof.entry")
    try:
        env = json.loads(str(bentry.get("envelope")))
    except ValueError:
        env = {}
    env = env if isinstance(env, dict) else {}
    kind, v = env.get("kind"), env.get("v")
    row = _stored_row(entry, bentry, seq, kind, v)
    try:
        slots = payload_map(str(kind), v if v == FORMAT_V2 else 1)
    except KeyError:
        slots = {}
    blobs: dict[int, tuple[bytes | None, bytes]] = {}
    for name, p in (bentry.get("payloads") or {}).items():
        data = _b64(p.get("data_b64") if isinstance(p, dict) else None, f"payloads.{name}")
        if data is not None and name in slots:
            blobs[slots[name]] = (_b64(p.get("salt_b64"), f"payloads.{name}.salt_b64"), data)
    redacted = [str(n) for n in (entry.get("integrity") or {}).get("redacted") or []]
    ledger_id = state.ledger_id or bundle.get("ledger_id")
    checked = check_entry(row, blobs, str(ledger_id),
                          redactions={(seq, n): seq + 1 for n in redacted})
    problems = list(checked.integrity.problems) + _served_mismatches(entry, checked, bentry)
    if problems:
        codes = list(dict.fromkeys(p.code for p in problems))
        raise EntryUnverified(f"entry {seq} does not check: {', '.join(codes)}",
                              code=codes[0], field=problems[0].field,
                              detail={"codes": codes, "reported_by": "reader",
                                      "problems": [p.to_dict() for p in problems]})
    _server_verdict(entry)
    try:
        got = verify_inclusion_bundle(bundle, state.keys)
    except ProofError as exc:
        raise proof_error(exc) from exc
    _leads_to_trusted(state, seq, got.seq, got.tree_size, got.root_hash)
    if state.origin is not None and got.origin != state.origin:
        raise CheckpointRejected(f"the proof is for {got.origin!r}", code="origin_mismatch",
                                 field="origin")
    return VerifiedEntry(seq, layer, entry, hash_hex(got.entry_hash or b""), got.tree_size,
                         got.root_hash, True, list(checked.integrity.redacted))


def _text(data: bytes | None) -> str | None:
    return None if data is None else data.decode("utf-8", "replace")


def _served_mismatches(entry: dict[str, Any], c: CheckedEntry,
                       bentry: dict[str, Any]) -> list[Problem]:
    """The served values that ``check_entry`` does not compare (it compares the indexed
    columns) against what the envelope and the checked payloads prove."""
    doc = c.document
    result = doc if c.kind == "result" else None

    def meta() -> Any:
        data = c.texts.get("meta")
        try:
            return None if data is None else json.loads(data)
        except ValueError:
            return None

    proven: dict[str, Any] = {
        "seq": c.seq, "kind": c.kind, "recorded_at": format_us(c.recorded_at),
        "agent_message": result.get("agent_message") if result else None,
        "developer_fields": result.get("developer_fields") if result else None,
        "preimage": _text(c.texts.get("preimage")),
        "attestation": _text(c.texts.get("attestation")), "query": _text(c.texts.get("query")),
        "meta": meta(), "document": doc if result is None else None,
        "payloads": c.commitments, "envelope": bentry.get("envelope"),
        "body_hash": bentry.get("body_hash"), "prev_hash": bentry.get("prev_hash"),
        "entry_hash": bentry.get("entry_hash"), "tenant": c.tenant,
        **{col: c.values[col] for col in INDEXED_COLUMNS}}
    return [Problem(SERVED_MISMATCH, key, value, entry.get(key))
            for key, value in proven.items() if key in entry and entry[key] != value]


# -- the read, as steps a driver performs (sync: LedgerReader; async: AsyncLedgerReader) --
@dataclass(frozen=True)
class Fetch:
    """GET ``path`` with ``params``; the driver sends back ``(status, body)`` (``body``:
    the text when ``text``, the bytes when ``raw`` -- None when there are none, e.g. a
    missing file of a tile directory --, else the parsed JSON or None)."""

    path: str
    params: dict[str, str] = field(default_factory=dict)
    text: bool = False
    raw: bool = False


@dataclass(frozen=True)
class Save:
    """Store ``state`` as the new trusted state (atomically); the driver sends back None."""

    state: TrustedState


Step = Fetch | Save
Flow = Generator[Step, Any, Any]


def _answer(reply: tuple[int, Any]) -> Any:
    status, body = reply
    exc = refusal(status, body if not isinstance(body, str) else None)
    if exc is not None:
        raise exc
    return body


def refresh_flow(state: TrustedState) -> Generator[Step, Any, TrustedState]:
    """Fetch the latest checkpoint and accept it only as a consistent extension of the
    trusted one (saved before returning).  Raises RolledBack, Forked, CheckpointRejected,
    ProofRejected, and the HTTP errors of ``reader_http.refusal``."""
    status, note = yield Fetch(CHECKPOINT_PATH, text=True)
    if status == 404 and state.tree_size > 0:
        raise RolledBack(f"the ledger serves no checkpoint; the verified size is"
                         f" {state.tree_size}", field="tree_size")
    if status >= 300:
        _answer((status, _json_or_none(note)))
    cp = judge_checkpoint(state, note)
    if cp is None:
        return state
    if state.tree_size > 0:
        status, bundle = yield Fetch(CONSISTENCY_PATH,
                                     consistency_params(state.tree_size, cp.size))
        if status == 404:
            raise ProofRejected(f"the ledger has no consistency proof from the verified size"
                                f" {state.tree_size} to {cp.size} (the checkpoint of the"
                                " verified size is withheld)", code="checkpoint_withheld",
                                field="tree_size")
        if status == 409:  # the ledger's own tree does not extend the trusted checkpoint
            raise Forked(f"the ledger cannot prove that size {cp.size} extends the verified"
                         f" size {state.tree_size}: {_error_message(bundle)}",
                         code="consistency_invalid", field="tree_size")
        verify_consistency(state, cp, _answer((status, bundle)))
    new = state.advanced(cp, note)
    yield Save(new)
    return new


def get_flow(state: TrustedState, seq: int,
             ) -> Generator[Step, Any, tuple[VerifiedEntry, TrustedState]]:
    """Read entry ``seq`` verified against the trusted state (advanced first if it does
    not cover ``seq``).  Returns the verified entry and the (possibly new) state."""
    if seq >= state.tree_size:
        state = yield from refresh_flow(state)
    if seq >= state.tree_size:
        raise NotFound(f"no checkpoint covers seq {seq} yet (latest size"
                       f" {state.tree_size})", code="not_checkpointed", field="seq")
    status, answer = yield Fetch(entry_path(seq), entry_params(state.tree_size))
    if status == 404 and _error_code(answer) == "not_checkpointed":
        yield from refresh_flow(state)  # RolledBack / Forked when that is why
        raise ProofRejected(f"the ledger withholds the checkpoint of the verified size"
                            f" {state.tree_size}", code="checkpoint_withheld",
                            field="tree_size")
    verified = verify_entry(state, seq, _answer((status, answer)))
    lid = answer["proof"].get("ledger_id")
    if state.ledger_id is None and verified.values_checked and isinstance(lid, str):
        state = state.with_ledger_id(lid)
        yield Save(state)
    return verified, state


def _json_or_none(text: Any) -> Any:
    try:
        return json.loads(text) if isinstance(text, str) else text
    except ValueError:
        return None


def _error_message(body: Any) -> str:
    err = body.get("error") if isinstance(body, dict) else None
    return str(err.get("message")) if isinstance(err, dict) else "no problem document"


def _error_code(body: Any) -> Any:
    err = body.get("error") if isinstance(body, dict) else None
    return err.get("code") if isinstance(err, dict) else None
