"""``ledger serve`` and ``ledger token issue`` without a running server."""

from __future__ import annotations

import json

import jwt
from click.testing import CliRunner

from ledger import Ledger
from ledger.cli.main import cli


def test_serve_with_a_jwks_but_no_issuer_exits_2(sqlite_url, tmp_path):
    Ledger.init(sqlite_url).close()
    (tmp_path / "jwks.json").write_text('{"keys": []}')
    res = CliRunner().invoke(cli, ["--db", sqlite_url, "serve", "--jwks",
                                   str(tmp_path / "jwks.json")])
    assert res.exit_code == 2 and "--jwks needs --issuer" in res.stderr


def test_token_issue_as_json_names_the_claims(sqlite_url, tmp_path):
    origin = "test.example/token"
    Ledger.init(sqlite_url, origin=origin).close()
    keys = str(tmp_path / "keys")
    run = CliRunner().invoke
    assert run(cli, ["--db", sqlite_url, "keys", "generate", "--keys", keys]).exit_code == 0
    res = run(cli, ["--db", sqlite_url, "token", "issue", "--role", "auditor", "--subject",
                    "aud-1", "--ttl", "10m", "--keys", keys, "--format", "json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert (doc["role"], doc["sub"]) == ("auditor", "aud-1") and doc["kid"]
    claims = jwt.decode(doc["token"], options={"verify_signature": False})
    assert (claims["sub"], claims["role"], claims["exp"]) == ("aud-1", "auditor", doc["exp"])
    assert claims["iss"] == claims["aud"] == origin
