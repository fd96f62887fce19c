"""``ledger witness keys generate`` and ``ledger witness serve`` usage errors; two
concurrent requests for one origin never roll the witness back."""

from __future__ import annotations

import json
import threading

from click.testing import CliRunner

from ledger import Ledger
from ledger.core.cosignature import format_add_checkpoint, parse_vkey
from ledger.crypto.cosign import load_vkeys
from ledger.demo.samples import realistic
from ledger.ops.checkpoint import make_checkpoint
from ledger.store.witness_state import WitnessState
from tests.witness.conftest import ORIGIN
from tests.witness.procs import WitnessProcess


def cli(*args):
    from ledger.cli.main import cli as group

    return CliRunner().invoke(group, [*map(str, args)])


def test_keys_generate_prints_the_vkey(tmp_path):
    res = cli("witness", "keys", "generate", "--name", "w.example/1", "--out", tmp_path / "k",
              "--format", "json")
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert parse_vkey(out["vkey"]).name == "w.example/1"
    assert load_vkeys(tmp_path / "k" / "witness.vkey")[0].public_key == \
        parse_vkey(out["vkey"]).public_key
    assert cli("witness", "keys", "generate", "--name", "w.example/1", "--out",
               tmp_path / "k").exit_code == 2  # never overwrites
    assert cli("witness", "keys", "generate", "--name", "bad name", "--out",
               tmp_path / "k2").exit_code == 2


def test_serve_refuses_a_bad_config(tmp_path):
    bad = tmp_path / "w.json"
    bad.write_text(json.dumps({"name": "w.example/1", "key": "missing.pem", "state": "s.db"}))
    res = cli("witness", "serve", "--config", bad)
    assert res.exit_code == 2 and "cannot load witness key" in res.output
    bad.write_text("[]")
    assert cli("witness", "serve", "--config", bad).exit_code == 2


def test_concurrent_requests_never_roll_back(sqlite_url, keyring, tmp_path):
    w = WitnessProcess(tmp_path / "w", "witness.example/race", ORIGIN,
                       [keyring.path / "jwks.json"]).start()
    try:
        notes = []
        with Ledger.init(sqlite_url, origin=ORIGIN) as ledger:
            for i in range(6):
                ledger.append_many(realistic(2, start=2 * i))
                notes.append(make_checkpoint(ledger.ctx, keyring))
        results: list[int] = []
        threads = [threading.Thread(target=lambda n=n: results.append(
            w.post(format_add_checkpoint(0, [], n).encode())[0])) for n in notes]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        assert results.count(200) == 1 and results.count(409) == 5
        held = WitnessState(w.folder / "state.db").get(ORIGIN)
        assert held is not None and held.size in {2 * (i + 1) for i in range(6)}
    finally:
        w.stop()
