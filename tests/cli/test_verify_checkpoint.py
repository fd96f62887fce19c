"""``ledger verify-checkpoint FILE --key PUB [--origin --size --root]``: a kept checkpoint
verified alone, without a database (exit 0 valid, 1 invalid, 2 usage or malformed)."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from ledger import Ledger
from ledger.cli.main import cli
from tests import tamper as T

ORIGIN = "example.org/audit-ledger"
NO_DB = "postgresql://nobody@127.0.0.1:1/none"  # nothing listens there: no database is used


def ledger_cli(*args: str, db: str = NO_DB) -> Result:
    return CliRunner().invoke(cli, ["--db", db, *args])


@pytest.fixture(scope="module")
def kept(tmp_path_factory) -> dict[str, str]:
    """A ledger of 3 entries, its signed checkpoint file, its JWKS and PEM public key, and a
    second keyring whose key signed nothing."""
    d = tmp_path_factory.mktemp("cp")
    url = f"sqlite:///{d / 'l.db'}"
    keys, other = str(d / "keys"), str(d / "other")
    assert ledger_cli("init", "--origin", ORIGIN, db=url).exit_code == 0
    assert ledger_cli("keys", "generate", "--keys", keys, db=url).exit_code == 0
    assert ledger_cli("keys", "generate", "--keys", other, "--name", ORIGIN,
                      db=url).exit_code == 0
    with Ledger.open(url) as L:
        assert all(r.ok for r in L.append_many([T.verified_sub(i) for i in range(3)]))
    res = ledger_cli("checkpoint", "--keys", keys, "--format", "json", db=url)
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    note = d / "checkpoint.txt"
    note.write_text(doc["note"], encoding="utf-8")
    (pem,) = Path(keys).glob("*.pub.pem")
    return {"file": str(note), "jwks": str(Path(keys) / "jwks.json"), "pem": str(pem),
            "other": str(Path(other) / "jwks.json"), "root": doc["root_hash"],
            "note": doc["note"], "dir": str(d)}


def verify(kept: dict[str, str], *args: str, file: str | None = None, key: str = "jwks"
           ) -> Result:
    return ledger_cli("verify-checkpoint", file or kept["file"], "--key", kept[key], *args)


@pytest.mark.parametrize("key", ["jwks", "pem"])
def test_a_kept_checkpoint_verifies_alone(kept, key):
    res = verify(kept, "--format", "json", key=key)
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out == {"valid": True, "origin": ORIGIN, "size": 3, "root_hash": kept["root"],
                   "signed_by": ORIGIN}


@pytest.mark.parametrize("root", ["hex", "sha256", "base64", "upper"])
def test_asserted_values_that_match(kept, root):
    raw = bytes.fromhex(kept["root"])
    text = {"hex": kept["root"], "sha256": "sha256:" + kept["root"],
            "base64": base64.b64encode(raw).decode(), "upper": kept["root"].upper()}[root]
    res = verify(kept, "--origin", ORIGIN, "--size", "3", "--root", text)
    assert res.exit_code == 0, res.output
    assert res.stdout.startswith("valid ")


@pytest.mark.parametrize("args,code", [
    (["--origin", "example.org/other"], "checkpoint_origin_mismatch"),
    (["--size", "4"], "checkpoint_size_mismatch"),
    (["--root", "00" * 32], "checkpoint_root_mismatch"),
])
def test_asserted_values_that_differ_are_invalid(kept, args, code):
    res = verify(kept, *args, "--format", "json")
    assert res.exit_code == 1, res.output
    assert res.stderr.startswith(f"invalid: {code}: the checkpoint's ")
    finding = json.loads(res.stdout)
    assert (finding["valid"], finding["code"]) == (False, code)
    assert set(finding["expected"]) == set(finding["actual"])


def test_a_checkpoint_signed_by_another_key_is_invalid(kept):
    res = verify(kept, key="other")
    assert res.exit_code == 1
    assert res.stderr == "invalid: checkpoint_signature_invalid: note has no signature " \
                         "from a known key\n"


def test_an_altered_checkpoint_is_invalid(kept, tmp_path):
    lines = kept["note"].split("\n")
    lines[1] = "2"  # the size, under the same signature
    forged = tmp_path / "forged.txt"
    forged.write_text("\n".join(lines), encoding="utf-8")
    res = verify(kept, file=str(forged))
    assert res.exit_code == 1
    assert res.stderr.startswith("invalid: checkpoint_signature_invalid: signature by "
                                 f"{ORIGIN} ")


@pytest.mark.parametrize("content", [b"", b"not a note\n", b"\xff\xfe\n\n",
                                     b"x" * (1 << 20) + b"\n"],
                         ids=["empty", "no_signature", "not_utf8", "too_large"])
def test_a_malformed_file_is_exit_2(kept, tmp_path, content):
    bad = tmp_path / "bad.txt"
    bad.write_bytes(content)
    res = verify(kept, file=str(bad))
    assert res.exit_code == 2, res.output
    assert res.stderr.startswith("error: malformed_note")


@pytest.mark.parametrize("args", [["--root", "abc"], ["--root", "zz" * 32], ["--size", "-1"]],
                         ids=["short_root", "not_hex", "negative_size"])
def test_bad_options_are_exit_2(kept, args):
    res = verify(kept, *args)
    assert res.exit_code == 2, res.output


def test_an_unreadable_key_file_is_exit_2(kept, tmp_path):
    junk = tmp_path / "junk.pem"
    junk.write_text("not a key")
    res = ledger_cli("verify-checkpoint", kept["file"], "--key", str(junk))
    assert res.exit_code == 2
    assert res.stderr.startswith("error: bad_key_file")


def test_a_checkpoint_read_from_stdin_verifies(kept):
    res = CliRunner().invoke(cli, ["--db", NO_DB, "verify-checkpoint", "-", "--key",
                                   kept["jwks"], "--format", "json"], input=kept["note"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["valid"] is True
