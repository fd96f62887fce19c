"""Proof bundles verified offline (``ledger.verify.proof``), and every mutation failing with
its own reason.  Building them from a real ledger is in tests/ops/test_prove.py.

``example_bundle()`` builds the worked example of docs/format-checkpoint.md
from the core alone (fixed ledger id, times and key); it is kept in
tests/vectors/proof_bundle.json (set LEDGER_REGEN_VECTORS=1 to rewrite it).
"""

from __future__ import annotations

import ast
import base64
import copy
import json
import os
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from ledger.core.entry import build_envelope, digest_text, genesis_hash, hash_hex, link
from ledger.core.merkle import MemoryTree
from ledger.core.note import Checkpoint
from ledger.crypto.keys import PublicKeyRef, raw_public
from ledger.crypto.note_sign import sign_checkpoint
from ledger.errors import ProofError
from ledger.verify.proof import INCLUSION_FORMAT, verify_bundle

REPO = Path(__file__).resolve().parents[2]
VECTOR = REPO / "tests" / "vectors" / "proof_bundle.json"
ORIGIN = "ledger.example/log"
LEDGER_ID = "00000000-0000-4000-8000-000000000001"
T0 = 1_790_000_000_000_000
SEED = bytes(range(1, 33))


def example_bundle() -> dict:
    """13 entries with one payload each; the inclusion proof of seq 6 at size 13."""
    key = Ed25519PrivateKey.from_private_bytes(SEED)
    prev, tree, linked, payloads = genesis_hash(LEDGER_ID), MemoryTree(), [], []
    for seq in range(13):
        data = b'{"n":%d}' % seq
        env = build_envelope(LEDGER_ID, "result", {"status": "VERIFIED", "subject": f"s-{seq}"},
                             {"result": digest_text(data)})
        e = link(prev, seq, T0 + 1000 * seq, env)
        tree.append(e.entry_hash)
        linked.append(e), payloads.append(data)
        prev = e.entry_hash
    note = sign_checkpoint(Checkpoint(ORIGIN, 13, tree.root()), ORIGIN, key)
    e, data = linked[6], payloads[6]
    return {"format": INCLUSION_FORMAT, "origin": ORIGIN, "ledger_id": LEDGER_ID, "seq": 6,
            "tree_size": 13, "leaf_index": 6,
            "entry": {"envelope": e.envelope.decode(), "recorded_at_us": e.recorded_at_us,
                      "prev_hash": hash_hex(e.prev_hash), "body_hash": hash_hex(e.body_hash),
                      "entry_hash": hash_hex(e.entry_hash),
                      "payloads": {"result": {"digest": digest_text(data),
                                              "data_b64": base64.b64encode(data).decode()}}},
            "inclusion_path": [h.hex() for h in tree.inclusion_proof(6, 13)],
            "checkpoint": note}


KEYS = [PublicKeyRef(None, raw_public(Ed25519PrivateKey.from_private_bytes(SEED)))]


def test_example_vector_is_current_and_documented():
    bundle = example_bundle()
    text = json.dumps(bundle, indent=2, ensure_ascii=False) + "\n"
    if os.environ.get("LEDGER_REGEN_VECTORS"):
        VECTOR.write_text(text, encoding="utf-8")
    assert VECTOR.read_text(encoding="utf-8") == text
    docs = (REPO / "docs" / "format-checkpoint.md").read_text(encoding="utf-8")
    assert text.strip() in docs  # the worked example is this exact file
    result = verify_bundle(text, KEYS)
    assert (result.kind, result.seq, result.tree_size, result.signers) == \
        ("inclusion", 6, 13, [ORIGIN])


# -- every mutation has its own reason ---------------------------------------------------------

def flip_hex(h: str) -> str:
    return h[:-1] + ("0" if h[-1] != "0" else "1")


def _flip_sha(h: str) -> str:
    return "sha256:" + flip_hex(h[7:])


def flip_signature(note: str) -> str:
    body, sep, line = note.rpartition("\n\n")
    prefix, blob = line.rstrip("\n").rsplit(" ", 1)
    raw = bytearray(base64.b64decode(blob))
    raw[-1] ^= 1
    return f"{body}{sep}{prefix} {base64.b64encode(bytes(raw)).decode()}\n"


def _set(path, value):
    def mutate(b):
        obj = b
        for k in path[:-1]:
            obj = obj[k]
        obj[path[-1]] = value(obj[path[-1]]) if callable(value) else value
    return mutate


def _drop(path):
    def mutate(b):
        obj = b
        for k in path[:-1]:
            obj = obj[k]
        del obj[path[-1]]
    return mutate


MUTATIONS = [
    ("envelope byte", _set(["entry", "envelope"], lambda t: t.replace("s-6", "s-7")),
     "body_hash_mismatch"),
    ("envelope other ledger",
     _set(["entry", "envelope"], lambda t: t.replace(LEDGER_ID[:8], "1" * 8)),
     "ledger_id_mismatch"),
    ("envelope not JSON", _set(["entry", "envelope"], lambda t: t[:-1]), "envelope_malformed"),
    ("envelope not an object", _set(["entry", "envelope"], "[1]"), "envelope_malformed"),
    ("payload bytes", _set(["entry", "payloads", "result", "data_b64"],
                           base64.b64encode(b'{"n":7}').decode()), "payload_digest_mismatch"),
    ("payload not base64", _set(["entry", "payloads", "result", "data_b64"], "!!"),
     "proof_malformed"),
    ("payload digest", _set(["entry", "payloads", "result", "digest"], _flip_sha),
     "payload_set_mismatch"),
    ("payload missing", _set(["entry", "payloads"], {}), "payload_set_mismatch"),
    ("payload extra", _set(["entry", "payloads", "meta"],
                           {"digest": digest_text(b"x"), "data_b64": "eA=="}),
     "payload_set_mismatch"),
    ("body hash", _set(["entry", "body_hash"], _flip_sha), "body_hash_mismatch"),
    ("prev hash", _set(["entry", "prev_hash"], _flip_sha), "entry_hash_mismatch"),
    ("entry hash", _set(["entry", "entry_hash"], _flip_sha), "entry_hash_mismatch"),
    ("recorded_at", _set(["entry", "recorded_at_us"], lambda t: t + 1), "entry_hash_mismatch"),
    ("wrong seq", _set(["seq"], 7), "leaf_index_mismatch"),
    ("wrong seq and leaf index", lambda b: b.update(seq=7, leaf_index=7),
     "entry_hash_mismatch"),
    ("tree size", _set(["tree_size"], 14), "tree_size_mismatch"),
    ("origin", _set(["origin"], "other.example/log"), "origin_mismatch"),
    ("ledger id", _set(["ledger_id"], "other"), "ledger_id_mismatch"),
    ("path hash", _set(["inclusion_path", 1], flip_hex), "inclusion_invalid"),
    ("path extra hash", _set(["inclusion_path"], lambda p: p + [p[0]]), "inclusion_invalid"),
    ("path short", _set(["inclusion_path"], lambda p: p[:-1]), "inclusion_invalid"),
    ("path not hex", _set(["inclusion_path", 0], "zz" * 32), "proof_malformed"),
    ("path uppercase", _set(["inclusion_path", 0], str.upper), "proof_malformed"),
    ("checkpoint signature", _set(["checkpoint"], flip_signature),
     "checkpoint_signature_invalid"),
    ("checkpoint root", _set(["checkpoint"], lambda n: n.replace("\n13\n", "\n12\n", 1)),
     "checkpoint_signature_invalid"),
    ("checkpoint garbage", _set(["checkpoint"], "hello\n"), "checkpoint_malformed"),
    ("checkpoint missing", _drop(["checkpoint"]), "proof_malformed"),
    ("format", _set(["format"], "ledger-inclusion-proof/2"), "proof_format_unknown"),
    ("entry missing", _drop(["entry"]), "proof_malformed"),
    ("seq as text", _set(["seq"], "6"), "proof_malformed"),
    ("seq as bool", _set(["seq"], True), "proof_malformed"),
    ("negative time", _set(["entry", "recorded_at_us"], -1), "proof_malformed"),
    ("bad hash text", _set(["entry", "prev_hash"], lambda h: h[7:]), "proof_malformed"),
]


@pytest.mark.parametrize("desc,mutate,code", MUTATIONS, ids=[m[0] for m in MUTATIONS])
def test_every_mutation_fails_with_its_reason(desc, mutate, code):
    bundle = copy.deepcopy(example_bundle())
    mutate(bundle)
    with pytest.raises(ProofError) as err:
        verify_bundle(json.dumps(bundle), KEYS)
    assert err.value.code == code, err.value


def test_not_json_and_unknown_key_fail():
    text = json.dumps(example_bundle())
    with pytest.raises(ProofError) as err:
        verify_bundle(text + "x", KEYS)
    assert err.value.code == "proof_malformed"
    stranger = [PublicKeyRef(None, raw_public(Ed25519PrivateKey.generate()))]
    with pytest.raises(ProofError, match="no signature from a known key") as err:
        verify_bundle(text, stranger)
    assert err.value.code == "checkpoint_signature_invalid"


def test_withheld_payload_still_verifies_and_is_reported():
    bundle = example_bundle()
    bundle["entry"]["payloads"]["result"]["data_b64"] = None
    assert verify_bundle(bundle, KEYS).withheld == ["result"]


def test_verifier_imports_no_database_code():
    tree = ast.parse((REPO / "ledger" / "verify" / "proof.py").read_text())
    names = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    names |= {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    assert not {m for m in names if m.startswith(("ledger.store", "ledger.ops", "sqlalchemy",
                                                   "ledger.facade"))}

