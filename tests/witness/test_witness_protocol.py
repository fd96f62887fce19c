"""A real ``ledger witness serve`` process answers c2sp.org/tlog-witness requests and
refuses every inconsistent, rolled-back or forged checkpoint."""

from __future__ import annotations

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from ledger import Ledger
from ledger.core.cosignature import SIZE_CONTENT_TYPE, format_add_checkpoint, parse_vkey
from ledger.core.note import parse_note
from ledger.crypto.cosign import accept_cosignatures
from ledger.crypto.note_sign import sign_note
from ledger.ops.checkpoint import consistency_proof, make_checkpoint
from ledger.ops.samples import realistic
from ledger.store.witness_state import WitnessState
from tests.witness.conftest import ORIGIN
from tests.witness.procs import WitnessProcess


@pytest.fixture
def ledger(sqlite_url):
    with Ledger.init(sqlite_url, origin=ORIGIN) as L:
        yield L


@pytest.fixture
def witness(tmp_path, keyring):
    w = WitnessProcess(tmp_path / "w", "witness.example/solo", ORIGIN,
                       [keyring.path / "jwks.json"]).start()
    yield w
    w.stop()


def _grow(ledger, keyring, n, start=0):
    ledger.append_many(realistic(n, start=start))
    return make_checkpoint(ledger.ctx, keyring)


def _req(old, proof, note):
    return format_add_checkpoint(old, proof, note).encode()


def _cosigned(witness, note, answer):
    return accept_cosignatures(parse_note(note).text, answer, parse_vkey(witness.vkey))


def test_cosigns_the_first_then_each_consistent_extension(ledger, keyring, witness):
    first = _grow(ledger, keyring, 5)
    status, _, answer = witness.post(_req(0, [], first))
    assert status == 200 and _cosigned(witness, first, answer)
    second = _grow(ledger, keyring, 7, start=5)
    status, _, answer = witness.post(_req(5, consistency_proof(ledger.ctx, 5, 12), second))
    assert status == 200 and _cosigned(witness, second, answer)
    same = make_checkpoint(ledger.ctx, keyring)  # same size, same root: cosigned again
    assert witness.post(_req(12, [], same))[0] == 200


def test_state_survives_a_restart(ledger, keyring, witness):
    note = _grow(ledger, keyring, 4)
    assert witness.post(_req(0, [], note))[0] == 200
    witness.stop()
    witness.start()
    status, ctype, text = witness.post(_req(0, [], note))
    assert (status, text) == (409, "4\n") and ctype.startswith(SIZE_CONTENT_TYPE)
    assert WitnessState(witness.folder / "state.db").get(ORIGIN).size == 4


def test_refuses_a_rollback(ledger, keyring, witness, tmp_path):
    small = _grow(ledger, keyring, 3)
    big = _grow(ledger, keyring, 5, start=3)
    assert witness.post(_req(0, [], big))[0] == 200
    status, ctype, text = witness.post(_req(0, [], small))  # an old size it does not hold
    assert (status, text) == (409, "8\n") and ctype.startswith(SIZE_CONTENT_TYPE)
    assert witness.post(_req(8, [], small))[0] == 400       # old size above the checkpoint


def test_refuses_a_rewritten_history_signed_with_the_log_key(ledger, keyring, witness,
                                                             tmp_path):
    assert witness.post(_req(0, [], _grow(ledger, keyring, 6)))[0] == 200
    with Ledger.init(f"sqlite:///{tmp_path / 'fork.db'}", origin=ORIGIN) as fork:
        fork.append_many(realistic(9, start=100))  # other entries, same origin, same key
        forged = make_checkpoint(fork.ctx, keyring)
        status, _, text = witness.post(_req(6, consistency_proof(fork.ctx, 6, 9), forged))
        assert status == 422 and "does not verify" in text
        same_size = make_checkpoint_at(fork, keyring, 6)
    assert witness.post(_req(6, [], same_size))[0] == 409   # same size, other root
    refused = WitnessState(witness.folder / "state.db").refusals()
    assert [s for _, s, _ in refused] == [422, 409]


def make_checkpoint_at(ledger, keyring, size):
    """A checkpoint note of the first ``size`` entries (the fork's history at that size)."""
    from ledger.core.note import Checkpoint, format_checkpoint_body
    from ledger.ops.checkpoint import tree_root

    body = format_checkpoint_body(Checkpoint(ORIGIN, size, tree_root(ledger.ctx, size)))
    return body + "\n" + "".join(sign_note(body, n, k) for n, k in keyring.signers(ORIGIN))


def test_refuses_forged_unknown_and_malformed(ledger, keyring, witness):
    note = _grow(ledger, keyring, 2)
    body = parse_note(note).text
    forged = body + "\n" + sign_note(body, ORIGIN, Ed25519PrivateKey.generate())
    assert witness.post(_req(0, [], forged))[0] == 403
    other = body.replace(ORIGIN, "other.example/log")
    unknown = other + "\n" + sign_note(other, ORIGIN, Ed25519PrivateKey.generate())
    assert witness.post(_req(0, [], unknown))[0] == 404
    assert witness.post(b"old 0\n\nnot a note")[0] == 400
    assert witness.post(b"garbage")[0] == 400
    assert witness.post(_req(0, [b"\0" * 32], note))[0] == 422  # a proof from size 0
    assert witness.post(_req(0, [], note))[0] == 200            # nothing above was kept


def test_refuses_a_bad_consistency_proof(ledger, keyring, witness):
    assert witness.post(_req(0, [], _grow(ledger, keyring, 5)))[0] == 200
    note = _grow(ledger, keyring, 6, start=5)
    proof = consistency_proof(ledger.ctx, 5, 11)
    bad = [proof[0][:-1] + bytes([proof[0][-1] ^ 1]), *proof[1:]]
    assert witness.post(_req(5, bad, note))[0] == 422
    assert witness.post(_req(5, proof[:-1], note))[0] == 422
    assert witness.post(_req(5, proof, note))[0] == 200
