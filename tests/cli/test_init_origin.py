"""``ledger init --origin``: an origin no signing key can be named after is refused at init
(checkpoints are signed with keys named after the origin, and the signed-note key-name rule
forbids spaces and '+'), by the CLI (exit 2) and by ``Ledger.init`` (UsageError)."""

from __future__ import annotations

import os

import pytest
from click.testing import CliRunner

from ledger import Ledger
from ledger.cli.main import cli
from ledger.errors import UsageError

BAD_ORIGINS = ["a+b", "a b", "tab\there", "nbsp\u00a0x", "", "x" * 256, "line\nbreak",
               "ctl\x01"]


@pytest.mark.parametrize("origin", BAD_ORIGINS, ids=lambda o: repr(o[:12]))
def test_cli_init_refuses_an_origin_that_cannot_name_a_key(tmp_path, origin):
    url = f"sqlite:///{tmp_path / 'l.db'}"
    res = CliRunner().invoke(cli, ["--db", url, "init", "--origin", origin])
    assert res.exit_code == 2, res.output
    assert "error: bad_origin [origin]:" in res.stderr
    assert "key name" in res.stderr
    assert not os.path.exists(tmp_path / "l.db")  # refused before anything was created


@pytest.mark.parametrize("origin", BAD_ORIGINS, ids=lambda o: repr(o[:12]))
def test_api_init_refuses_an_origin_that_cannot_name_a_key(db_url, origin):
    with pytest.raises(UsageError) as info:
        Ledger.init(db_url, origin=origin)
    assert (info.value.code, info.value.field) == ("bad_origin", "origin")


def test_a_valid_origin_is_accepted_and_can_sign_a_checkpoint(tmp_path, sqlite_url):
    origin = "example.org/ledger-\u00e9_1~x"
    keys = str(tmp_path / "keys")
    for args in (["init", "--origin", origin], ["keys", "generate", "--keys", keys],
                 ["checkpoint", "--keys", keys]):
        res = CliRunner().invoke(cli, ["--db", sqlite_url, *args])
        assert res.exit_code == 0, res.output
    assert res.stdout.startswith(origin + "\n0\n")
    assert f"\u2014 {origin} " in res.stdout  # signed by the key named after the origin
