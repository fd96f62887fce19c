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
from ledger.demo.samples import realistic
from ledger.ops.checkpoint import consistency_proof, make_checkpoint
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
    assert witness.post(_req(6, [], same_size))[0] == 422   # same size, other root
    refused = WitnessState(witness.folder / "state.db").refusals()
    assert [s for _, s, _ in refused] == [422, 422]


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


def _signed(keyring, size, root, junk=""):
    """A checkpoint note of ``size`` and ``root`` signed with the log key (``junk``:
    signature lines by keys nobody knows, appended after the log's own)."""
    from ledger.core.note import Checkpoint, format_checkpoint_body

    body = format_checkpoint_body(Checkpoint(ORIGIN, size, root))
    return body + "\n" + "".join(sign_note(body, n, k) for n, k in keyring.signers(ORIGIN)) \
        + junk


def _junk_lines(n, length):
    import base64
    return "".join(f"\u2014 junk.example/k{i} "
                   + base64.b64encode(bytes([i % 256]) * length).decode() + "\n"
                   for i in range(n))


def test_an_empty_checkpoint_must_have_the_empty_root(keyring, witness):
    import hashlib
    bad = _signed(keyring, 0, b"\x01" * 32)
    status, _, text = witness.post(_req(0, [], bad))
    assert status == 422 and "empty" in text
    good = _signed(keyring, 0, hashlib.sha256(b"").digest())
    status, _, answer = witness.post(_req(0, [], good))  # nothing of the bad one was kept
    assert status == 200 and _cosigned(witness, good, answer)
    assert witness.post(_req(0, [], good))[0] == 200
    assert [s for _, s, _ in WitnessState(witness.folder / "state.db").refusals()] == [422]


def test_the_same_size_with_another_root_or_a_proof_is_422(ledger, keyring, witness):
    note = _grow(ledger, keyring, 4)
    assert witness.post(_req(0, [], note))[0] == 200
    other = _signed(keyring, 4, b"\x02" * 32)
    status, ctype, text = witness.post(_req(4, [], other))
    assert status == 422 and "another root" in text and not ctype.startswith(SIZE_CONTENT_TYPE)
    assert witness.post(_req(4, [b"\0" * 32], note))[0] == 422
    assert witness.post(_req(4, [], note))[0] == 200


def test_monitors_read_the_latest_cosigned_checkpoint(ledger, keyring, witness):
    import hashlib
    import urllib.error
    import urllib.request

    from ledger.crypto.note_sign import verify_note

    path = f"{witness.url}/{hashlib.sha256(ORIGIN.encode()).hexdigest()}/checkpoint"

    def get(url):
        try:
            with urllib.request.urlopen(url, timeout=10) as resp:
                return resp.status, resp.read().decode()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode()

    assert get(path)[0] == 404                      # never cosigned one
    assert get(f"{witness.url}/{'0' * 64}/checkpoint")[0] == 404
    note = _grow(ledger, keyring, 3)
    padded = note + _junk_lines(3, 68)              # anyone may add lines by unknown keys
    status, _, answer = witness.post(_req(0, [], padded))
    assert status == 200
    status, served = get(path)
    assert status == 200 and "junk.example" not in served
    text = parse_note(note).text
    assert served == note + answer                  # the log's lines, then the cosignature
    assert parse_note(served).text == text and _cosigned(witness, note, answer)
    verify_note(served, keyring_known(keyring))


def keyring_known(keyring):
    from ledger.crypto.keys import known_keys, load_public_keys
    return known_keys(load_public_keys(keyring.path / "jwks.json"), ORIGIN)


def test_refusals_keep_neither_a_strangers_padding_nor_every_replay(ledger, keyring,
                                                                   witness):
    from ledger.witness.service import MAX_REQUEST_BYTES

    small = _grow(ledger, keyring, 2)
    assert witness.post(_req(0, [], _grow(ledger, keyring, 3, start=2)))[0] == 200
    state = WitnessState(witness.folder / "state.db")
    huge = small + _junk_lines(90, 9000)            # ~1 MB of junk after a valid signature
    answer = _post_unread(witness, _req(0, [], huge))
    assert answer.startswith(b"HTTP/1.1 413 ") or answer == b"", answer[:100]
    assert state.refusal_rows() == []               # refused unread, nothing kept
    padded = small + _junk_lines(90, 500)           # ~60 KB, under the request cap
    assert len(_req(0, [], padded)) < MAX_REQUEST_BYTES
    for old in range(40):                           # a replayed public checkpoint
        assert witness.post(_req(old % 2, [], padded))[0] == 409
    (row,) = state.refusal_rows()
    assert (row.status, row.count) == (409, 40)
    assert row.body == _req(0, [], small)           # the first request, without the junk
    assert len(row.body) < 1000


def _post_unread(witness, body):
    """The raw answer to a request the witness refuses without reading its body: the 413,
    or nothing when the reset of the unread bytes overtakes it (both are refusals)."""
    import socket

    s = socket.create_connection(("127.0.0.1", witness.port), timeout=10)
    try:
        try:
            s.sendall(b"POST /add-checkpoint HTTP/1.1\r\nHost: x\r\nContent-Length: "
                      + str(len(body)).encode() + b"\r\n\r\n" + body)
        except OSError:
            pass  # closed while we were still sending
        got = b""
        try:
            while data := s.recv(65536):
                got += data
        except OSError:
            pass
        return got
    finally:
        s.close()


def test_refusals_per_origin_are_capped_and_counted(tmp_path):
    state = WitnessState(tmp_path / "s.db", max_refusals_per_origin=3)
    for i in range(5):
        state.record_refusal(ORIGIN, 422, "r", b"body", 100 + i, bytes([i]) * 32)
    state.record_refusal(ORIGIN, 422, "r", b"body", 200, bytes([0]) * 32)  # a kept one again
    rows = state.refusal_rows()
    assert [r.count for r in rows] == [2, 1, 1] and rows[0].last_at == 200
    assert state.dropped_refusals(ORIGIN) == 2


def test_a_state_file_from_before_bounded_refusals_opens(tmp_path):
    import sqlite3
    path = tmp_path / "old.db"
    with sqlite3.connect(path) as conn:
        conn.executescript(
            "CREATE TABLE logs (origin TEXT PRIMARY KEY, size INTEGER NOT NULL, root_hash"
            " BLOB NOT NULL, note TEXT NOT NULL, updated_at INTEGER NOT NULL);"
            "CREATE TABLE refusals (id INTEGER PRIMARY KEY AUTOINCREMENT, received_at INTEGER"
            " NOT NULL, origin TEXT, status INTEGER NOT NULL, reason TEXT NOT NULL,"
            " body BLOB NOT NULL);"
            "INSERT INTO refusals (received_at, origin, status, reason, body)"
            f" VALUES (5, '{ORIGIN}', 409, 'old', x'00');")
    state = WitnessState(path)
    assert [(r.status, r.count, r.last_at) for r in state.refusal_rows()] == [(409, 1, 5)]
    state.record_refusal(ORIGIN, 409, "new", b"b", 6, b"\1" * 32)
    assert len(state.refusal_rows()) == 2


@pytest.mark.slow
def test_a_slow_head_is_cut_off_by_the_witness(witness):
    """``ledger witness serve`` runs the service's guarded protocol (head timeout 10 s)."""
    import socket
    import time

    s = socket.create_connection(("127.0.0.1", witness.port), timeout=15)
    start = time.monotonic()
    try:
        s.sendall(b"POST /add-checkpoint HTTP/1.1\r\nHost: x\r\n")
        answer = s.recv(65536)
    finally:
        s.close()
    assert answer.startswith(b"HTTP/1.1 408 ") and 9 < time.monotonic() - start < 14
