"""The reader client against a real ``ledger serve``: clean reads (sync and async), and a
server whose database was tampered with raw SQL -- a payload, a column, a rollback, a
history rewritten and signed again with the ledger key (same size and larger), a proof to
the wrong size, a checkpoint under a key the reader does not trust: each its own error."""

from __future__ import annotations

import asyncio
import json
import random
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import text

from ledger.client import (
    AsyncLedgerReader,
    CheckpointRejected,
    EntryUnverified,
    Forked,
    LedgerReader,
    ProofRejected,
    RolledBack,
    TrustStateInvalid,
)
from ledger.client.trust_state import STATE_FORMAT, load_state
from ledger.core.entry import SLOTS
from ledger.core.note import Checkpoint, format_checkpoint_body
from ledger.crypto.keys import Keyring
from ledger.crypto.note_sign import sign_note
from ledger.demo.samples import math_verified
from ledger.facade import Ledger
from ledger.ops.checkpoint import tree_root
from tests.api.server import ROOT
from tests.client.server import LedgerServer
from tests.conftest import ENGINES
from tests.conftest import engine_url as fresh_db_url
from tests.merkle_tamper import connection, unguarded, wipe_tree
from tests.tamper import rechain, unlocked, update_entry


@pytest.fixture(scope="module", params=ENGINES)
def shared(request: pytest.FixtureRequest,
           tmp_path_factory: pytest.TempPathFactory) -> Iterator[LedgerServer]:
    """One server per engine for the tests that tamper only their own entries."""
    srv = _new_server(request, tmp_path_factory, request.param, "shared")
    yield srv
    srv.stop()


@pytest.fixture(params=ENGINES)
def own(request: pytest.FixtureRequest,
        tmp_path_factory: pytest.TempPathFactory) -> Iterator[LedgerServer]:
    """A server of its own, for the tests that rewrite the whole history."""
    srv = _new_server(request, tmp_path_factory, request.param, "own")
    yield srv
    srv.stop()


def _new_server(request: pytest.FixtureRequest, factory: pytest.TempPathFactory, kind: str,
                what: str) -> LedgerServer:
    tmp = factory.mktemp(f"reader-{what}-{kind}")
    srv = LedgerServer(fresh_db_url(kind, request, tmp), tmp, f"test.example/reader-{kind}")
    return srv.start()


def _seed(srv: LedgerServer, n: int) -> list[int]:
    seqs = []
    with httpx.Client(base_url=srv.url, timeout=30,
                      headers={"Authorization": f"Bearer {srv.token()}"}) as c:
        for _ in range(n):
            r = c.post("/v1/entries", json=math_verified(random.randrange(10**6),
                                                         random.Random()))
            assert r.status_code == 201, r.text
            seqs.append(int(r.json()["seq"]))
    return seqs


def _sign(srv: LedgerServer) -> int:
    """A checkpoint of the whole ledger, as ``ledger checkpoint`` makes it."""
    with Ledger.open(srv.db_url) as ledger:
        ledger.checkpoint(Keyring.load(srv.keys))
        latest = ledger.latest_checkpoint()
        assert latest is not None
        return latest.size


def _jwks(srv: LedgerServer) -> dict[str, Any]:
    return httpx.get(srv.url + "/.well-known/jwks.json").json()  # type: ignore[no-any-return]


def _reader(srv: LedgerServer, state: Path, role: str = "auditor") -> LedgerReader:
    return LedgerReader(srv.url, srv.token(role, f"r-{role}"), state, keys=_jwks(srv))


# -- clean reads ----------------------------------------------------------------------------
def test_an_untampered_ledger_reads_clean_and_the_state_advances(shared: LedgerServer,
                                                                  tmp_path: Path):
    seqs = _seed(shared, 4)
    size = _sign(shared)
    state = tmp_path / "state.json"
    with _reader(shared, state) as reader:
        for seq in seqs:
            got = reader.get(seq)
            assert got.values_checked and got.tree_size == size and got.seq == seq
            assert got.entry["status"] == "VERIFIED" and got.entry["integrity"]["verified"]
        assert load_state(state).tree_size == size  # type: ignore[union-attr]
        more = _seed(shared, 3)
        bigger = _sign(shared)
        got = reader.get(more[-1])  # beyond the trusted size: consistency proof first
        assert got.tree_size == bigger and got.values_checked
    doc = json.loads(state.read_text())
    assert doc["format"] == STATE_FORMAT and doc["tree_size"] == bigger
    assert doc["origin"] == shared.origin and doc["ledger_id"]
    assert load_state(state).root_hash.hex() == doc["root_hash"]  # type: ignore[union-attr]


def test_the_async_reader_reads_clean(shared: LedgerServer, tmp_path: Path):
    seqs = _seed(shared, 3)
    size = _sign(shared)

    async def read() -> list[Any]:
        async with AsyncLedgerReader(shared.url, shared.token("auditor", "a"),
                                     tmp_path / "state.json", keys=_jwks(shared)) as reader:
            return [await reader.get(s) for s in seqs]

    got = asyncio.run(read())
    assert [g.seq for g in got] == seqs and all(g.values_checked for g in got)
    assert {g.tree_size for g in got} == {size}


def test_a_developer_reader_proves_the_entry_hash_only(shared: LedgerServer, tmp_path: Path):
    seq = _seed(shared, 1)[0]
    _sign(shared)
    with _reader(shared, tmp_path / "state.json", "developer") as reader:
        got = reader.get(seq)
    assert got.layer == "developer" and not got.values_checked
    assert got.entry_hash.startswith("sha256:")


# -- tampered entries -------------------------------------------------------------------------
def test_a_tampered_payload_is_payload_digest_mismatch(shared: LedgerServer, tmp_path: Path):
    seq = _seed(shared, 1)[0]
    _sign(shared)
    with _reader(shared, tmp_path / "state.json") as reader:
        reader.get(seq)  # clean first
        with unlocked(shared.db_url) as conn:
            conn.execute(text("UPDATE payloads SET codec = 0, data = :d WHERE pid = :p"),
                         {"d": b'{"forged": true}', "p": seq * 8 + SLOTS["preimage"]})
        with pytest.raises(EntryUnverified) as err:
            reader.get(seq)
    assert err.value.code == "payload_digest_mismatch" and err.value.exit_code == 1
    assert err.value.detail["reported_by"] == "reader"
    assert "payload_digest_mismatch" in err.value.detail["codes"]


def test_async_a_tampered_column_is_column_mismatch(shared: LedgerServer, tmp_path: Path):
    seq = _seed(shared, 1)[0]
    _sign(shared)
    with unlocked(shared.db_url) as conn:
        update_entry(conn, seq, engine="forged-engine")

    async def read() -> None:
        async with AsyncLedgerReader(shared.url, shared.token("auditor", "a"),
                                     tmp_path / "state.json", keys=_jwks(shared)) as reader:
            await reader.get(seq)

    with pytest.raises(EntryUnverified) as err:
        asyncio.run(read())
    assert err.value.code == "column_mismatch" and err.value.field == "engine"
    problem = err.value.detail["problems"][0]
    assert problem["actual"] == "forged-engine" and problem["expected"] == "math"


def test_a_checkpoint_under_another_key_is_refused(shared: LedgerServer, tmp_path: Path):
    _seed(shared, 1)
    _sign(shared)
    other = Keyring.load(tmp_path / "other-keys")
    other.generate(shared.origin, 1)
    jwks = {"keys": other.jwks}
    with LedgerReader(shared.url, shared.token("auditor", "a"), tmp_path / "state.json",
                      keys=jwks) as reader, pytest.raises(CheckpointRejected) as err:
        reader.get(0)
    assert err.value.code == "checkpoint_signature_invalid"
    assert not (tmp_path / "state.json").exists()  # nothing trusted


def test_no_state_and_no_anchor_is_a_usage_error(shared: LedgerServer, tmp_path: Path):
    with pytest.raises(TrustStateInvalid) as err:
        LedgerReader(shared.url, shared.token("auditor", "a"), tmp_path / "state.json")
    assert err.value.exit_code == 2 and err.value.field == "key"
    with LedgerReader(shared.url, shared.token("auditor", "a"), tmp_path / "state.json",
                      trust_on_first_use=True) as reader:
        _seed(shared, 1)
        _sign(shared)
        assert reader.get(0).values_checked


def test_a_hand_edited_state_is_refused(shared: LedgerServer, tmp_path: Path):
    _seed(shared, 1)
    _sign(shared)
    state = tmp_path / "state.json"
    with _reader(shared, state) as reader:
        reader.get(0)
    doc = json.loads(state.read_text())
    doc["root_hash"] = "00" * 32
    state.write_text(json.dumps(doc))
    with pytest.raises(TrustStateInvalid) as err:
        _reader(shared, state)
    assert err.value.field == "checkpoint"


@pytest.mark.slow  # a server of its own (or CLI subprocesses): seconds each
def test_a_proof_to_the_wrong_size_is_refused(own: LedgerServer, tmp_path: Path):
    """The stored checkpoint row of the trusted size serves another size's note (on a
    server of its own: the ledger then refuses to sign after that row)."""
    shared = own
    _seed(shared, 2)
    small = _sign(shared)
    _seed(shared, 2)
    big = _sign(shared)
    with _reader(shared, tmp_path / "state.json") as reader:
        reader.get(big - 1)
        with connection(shared.db_url) as conn, unguarded(conn, "checkpoints"):
            note = conn.execute(text("SELECT note FROM checkpoints WHERE size = :s"),
                                {"s": small}).scalar_one()
            conn.execute(text("UPDATE checkpoints SET note = :n WHERE size = :s"),
                         {"n": note, "s": big})
        with pytest.raises(ProofRejected) as err:
            reader.get(0)
    assert err.value.code == "wrong_tree_size"
    assert err.value.detail == {"served_size": small, "trusted_size": big}


# -- rewritten histories -----------------------------------------------------------------------
@pytest.mark.slow  # a server of its own (or CLI subprocesses): seconds each
def test_a_rolled_back_server_is_refused(own: LedgerServer, tmp_path: Path):
    _seed(own, 3)
    old = _sign(own)
    _seed(own, 3)
    new = _sign(own)
    with _reader(own, tmp_path / "state.json") as reader:
        reader.get(new - 1)
        with connection(own.db_url) as conn, unguarded(conn, "checkpoints"):  # an old backup
            conn.execute(text("DELETE FROM checkpoints WHERE size > :s"), {"s": old})
        with pytest.raises(RolledBack) as err:
            reader.get(0)
    assert err.value.code == "rolled_back" and err.value.detail["served_size"] == old


def _fork(srv: LedgerServer, keep_checkpoints: bool) -> None:
    """Rewrite entries 2.. (their times, one microsecond later) with a valid chain (raw
    SQL): every entry still checks, only the history differs.  Rebuild the tree and --
    unless ``keep_checkpoints`` -- drop the stored checkpoints so the ledger signs it."""
    with unlocked(srv.db_url) as conn:
        conn.execute(text("UPDATE entries SET recorded_at = recorded_at + 1 WHERE seq >= 2"))
        rechain(conn, 2)
    wipe_tree(srv.db_url)
    if not keep_checkpoints:
        with connection(srv.db_url) as conn, unguarded(conn, "checkpoints"):
            conn.execute(text("DELETE FROM checkpoints"))


@pytest.mark.slow  # a server of its own (or CLI subprocesses): seconds each
def test_a_history_re_signed_at_the_same_size_is_forked(own: LedgerServer, tmp_path: Path):
    _seed(own, 6)
    size = _sign(own)
    with _reader(own, tmp_path / "state.json") as reader:
        reader.get(3)
        _fork(own, keep_checkpoints=False)
        assert _sign(own) == size  # the ledger key signs the rewritten tree
        with pytest.raises(Forked) as err:
            reader.get(3)
    assert err.value.code == "forked"


@pytest.mark.slow  # a server of its own (or CLI subprocesses): seconds each
def test_a_larger_re_signed_history_fails_consistency(own: LedgerServer, tmp_path: Path):
    _seed(own, 6)
    size = _sign(own)
    with _reader(own, tmp_path / "state.json") as reader:
        reader.get(3)
        _fork(own, keep_checkpoints=True)
        _seed(own, 1)
        with Ledger.open(own.db_url) as ledger:  # the key signs a rewritten, larger tree
            root = tree_root(ledger.ctx, size + 1)
            body = format_checkpoint_body(Checkpoint(own.origin, size + 1, root))
            note = body + "\n" + "".join(sign_note(body, n, k)
                                         for n, k in Keyring.load(own.keys).signers(own.origin))
        with connection(own.db_url) as conn:
            conn.execute(text("INSERT INTO checkpoints (size, root_hash, note, created_at) "
                              "VALUES (:s, :r, :n, 1)"), {"s": size + 1, "r": root, "n": note})
        with pytest.raises(Forked) as err:
            reader.get(size)
    assert err.value.code == "consistency_invalid"


# -- ledger get ------------------------------------------------------------------------------
def _get(srv: LedgerServer, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ledger", "get", *args, "--url", srv.url,
                           "--token", srv.token("auditor", "cli")], capture_output=True,
                          text=True, timeout=60, cwd=ROOT, check=False)


@pytest.mark.slow  # a server of its own (or CLI subprocesses): seconds each
def test_ledger_get_exits_0_1_2(shared: LedgerServer, tmp_path: Path):
    seq = _seed(shared, 1)[0]
    _sign(shared)
    state = str(tmp_path / "state.json")
    r = _get(shared, str(seq), "--state", state)  # first use without an anchor
    assert r.returncode == 2 and "state_invalid" in r.stderr and "--key" in r.stderr
    jwks = tmp_path / "jwks.json"
    jwks.write_text(json.dumps(_jwks(shared)))
    r = _get(shared, str(seq), "--state", state, "--key", str(jwks))
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["seq"] == seq and out["verified"]["values_checked"]
    assert out["entry"]["status"] == "VERIFIED"
    with unlocked(shared.db_url) as conn:
        update_entry(conn, seq, status="BLOCKED")
    r = _get(shared, str(seq), "--state", state)
    assert r.returncode == 1 and "column_mismatch" in r.stderr and r.stdout == ""
    r = _get(shared, "-1", "--state", state)
    assert r.returncode == 2
