"""The demo's anchoring part: cosigned and time-stamped, a rewrite refused by both witnesses
and reported by the audit with the quorum."""

from __future__ import annotations

from click.testing import CliRunner

from ledger.cli.main import cli


def test_demo_shows_witnesses_and_timestamp(tmp_path):
    res = CliRunner().invoke(cli, ["demo", "--dir", str(tmp_path / "d")])
    assert res.exit_code == 0, res.output
    out = res.output
    assert "cosigned by witness.demo.local/w1, witness.demo.local/w2; time-stamped: 20" in out
    assert out.count("refused it: witness answered 422") == 2
    assert "--quorum 2: audit complete" in out
    assert "rewritten checkpoint_inconsistent" in out
    assert "timestamp_missing" not in out and "witness_quorum_not_met" not in out
    assert (tmp_path / "d" / "anchoring" / "witnessed-checkpoint.txt.tsr").is_file()
