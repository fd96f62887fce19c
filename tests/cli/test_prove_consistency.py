"""``ledger prove --consistency OLD NEW`` refuses an empty OLD checkpoint: RFC 9162 defines
consistency proofs only for ``0 < old size``, and every tree extends the empty one."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from ledger import Ledger
from ledger.cli.main import cli
from ledger.clock import FixedClock
from ledger.crypto.keys import Keyring
from ledger.demo.samples import realistic
from ledger.errors import UsageError
from ledger.ops.checkpoint import consistency_bundle, make_checkpoint

ORIGIN = "test.ledger/prove"
T0 = 1_790_000_000_000_000


@pytest.fixture
def notes(sqlite_url, tmp_path):
    ring = Keyring.load(tmp_path / "keys")
    ring.generate(ORIGIN, T0)
    with Ledger.init(sqlite_url, origin=ORIGIN, clock=FixedClock(T0, 1000)) as led:
        empty = make_checkpoint(led, ring)
        led.append_many(realistic(5))
        five = make_checkpoint(led, ring)
        with pytest.raises(UsageError) as err:
            consistency_bundle(led, empty, five)
        assert (err.value.code, err.value.field) == ("size_out_of_range", "old")
        assert consistency_bundle(led, five, five)["path"] == []  # 0 < old <= new is fine
    (tmp_path / "empty.txt").write_text(empty, "utf-8")
    return {"url": sqlite_url, "empty": tmp_path / "empty.txt", "keys": ring.path}


@pytest.mark.parametrize("old", ["0", "file"])
def test_a_proof_from_the_empty_tree_is_refused_with_exit_2(notes, old):
    arg = str(notes["empty"]) if old == "file" else old
    r = CliRunner().invoke(cli, ["--db", notes["url"], "prove", "--consistency", arg, "5"])
    assert r.exit_code == 2, r.output
    assert "size 0" in r.stderr and "needs no proof" in r.stderr
    assert "Traceback" not in r.output and r.stdout == ""
