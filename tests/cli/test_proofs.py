"""``ledger prove`` and ``ledger verify-proof`` at the edges of their arguments: a proof read
from stdin, a withheld payload named in the summary, an OLD that is neither file nor size."""

from __future__ import annotations

import json

from click.testing import CliRunner

from ledger import Ledger
from ledger.cli.main import cli
from ledger.clock import FixedClock
from ledger.crypto.keys import Keyring
from ledger.demo.samples import realistic
from ledger.ops.checkpoint import inclusion_bundle

ORIGIN = "test.ledger/proofs"
T0 = 1_790_000_000_000_000


def test_verify_proof_reads_stdin_and_names_withheld_payloads(sqlite_url, tmp_path):
    ring = Keyring.load(tmp_path / "keys")
    ring.generate(ORIGIN, T0)
    with Ledger.init(sqlite_url, origin=ORIGIN, clock=FixedClock(T0, 1000)) as L:
        L.append_many(realistic(3))
        bundle = inclusion_bundle(L, 1, keyring=ring)
    bundle["entry"]["payloads"]["result"]["data_b64"] = None
    res = CliRunner().invoke(cli, ["verify-proof", "-", "--key", str(ring.path / "jwks.json"),
                                   "--format", "json"], input=json.dumps(bundle))
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["valid"] is True and out["seq"] == 1
    assert "result" in out["payloads_withheld"]


def test_an_old_checkpoint_that_is_neither_a_file_nor_a_size_exits_2(sqlite_url):
    Ledger.init(sqlite_url, origin=ORIGIN).close()
    res = CliRunner().invoke(cli, ["--db", sqlite_url, "prove", "--consistency", "abc", "5"])
    assert res.exit_code == 2 and "neither a file nor a checkpoint size" in res.stderr
