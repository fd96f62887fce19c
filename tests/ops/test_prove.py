"""Proof bundles built from a real ledger (SQLite and PostgreSQL): ``ledger prove`` and
``ledger checkpoint``, then verified offline without the database."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from ledger import Ledger
from ledger.cli.main import cli
from ledger.clock import FixedClock
from ledger.crypto.keys import Keyring, load_public_keys
from ledger.demo.samples import realistic
from ledger.errors import NotFound, ProofError, UsageError
from ledger.ops.checkpoint import (
    CheckpointError,
    consistency_bundle,
    inclusion_bundle,
    make_checkpoint,
)
from ledger.verify.proof import CONSISTENCY_FORMAT, verify_bundle, verify_consistency_bundle
from tests.verify.test_proof import ORIGIN, T0, flip_hex, flip_signature


@pytest.fixture
def ledger(db_url):
    with Ledger.init(db_url, origin=ORIGIN, clock=FixedClock(T0, 1000)) as L:
        subs = realistic(45)
        L.append_many(subs[:30])
        L.append_many(subs[30:])
        yield L


@pytest.fixture
def keyring(tmp_path):
    ring = Keyring.load(tmp_path / "keys")
    ring.generate(ORIGIN, T0)
    return ring


def _run_offline(tmp_path, *args):
    """`ledger ...` in a subprocess whose database URL points nowhere."""
    env = {**os.environ, "LEDGER_DB_URL": "postgresql://nobody@127.0.0.1:1/none"}
    return subprocess.run([sys.executable, "-m", "ledger", *map(str, args)], check=False,
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)


def test_prove_then_verify_offline_without_the_database(ledger, keyring, tmp_path, db_url):
    run = CliRunner().invoke
    keys = str(keyring.path)
    r = run(cli, ["--db", db_url, "checkpoint", "--keys", keys, "--out", tmp_path / "cp.txt"])
    assert r.exit_code == 0, r.output
    out = tmp_path / "p.json"
    r = run(cli, ["--db", db_url, "prove", "17", "--checkpoint", tmp_path / "cp.txt",
                  "--out", out])
    assert r.exit_code == 0, r.output
    bundle = json.loads(out.read_text())
    assert bundle["seq"] == 17 and bundle["tree_size"] == 45
    assert set(bundle["entry"]["payloads"]) >= {"result"}
    ledger.close()
    if db_url.startswith("sqlite"):
        Path(db_url.removeprefix("sqlite:///")).unlink()   # no database any more
    ok = _run_offline(tmp_path, "verify-proof", out, "--key", keyring.path / "jwks.json",
                      "--format", "json")
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout)["valid"] is True and json.loads(ok.stdout)["seq"] == 17
    pem = next(keyring.path.glob("*.pub.pem"))
    assert _run_offline(tmp_path, "verify-proof", out, "--key", pem).returncode == 0
    # one hashed byte changed (v2 envelope: a field, so that the payloads still verify)
    bundle["entry"]["envelope"] = bundle["entry"]["envelope"].replace('"att_verdict":"',
                                                                      '"att_verdict":"x', 1)
    out.write_text(json.dumps(bundle))
    bad = _run_offline(tmp_path, "verify-proof", out, "--key", pem)
    assert bad.returncode == 1 and bad.stdout == ""
    assert bad.stderr.count("\n") == 1 and bad.stderr.startswith("invalid: body_hash_mismatch")
    usage = _run_offline(tmp_path, "verify-proof", out)
    assert usage.returncode == 2
    (tmp_path / "junk.pem").write_text("junk")
    assert _run_offline(tmp_path, "verify-proof", out, "--key", "junk.pem").returncode == 2


def test_prove_makes_a_checkpoint_when_none_covers_the_entry(ledger, keyring):
    with pytest.raises(UsageError) as err:
        inclusion_bundle(ledger, 3)
    assert err.value.code == "no_checkpoint"
    b1 = inclusion_bundle(ledger, 3, keyring=keyring)          # signs one of size 45
    assert b1["tree_size"] == 45
    ledger.append(realistic(1, start=45)[0])
    b2 = inclusion_bundle(ledger, 10)                          # the latest still covers 10
    assert b2["checkpoint"] == b1["checkpoint"]
    b3 = inclusion_bundle(ledger, 45, keyring=keyring)         # seq 45 needs a new one
    assert b3["tree_size"] == 46
    for b in (b1, b2, b3):
        assert verify_bundle(b, keyring.public_keys()).entry_hash.hex() == \
            b["entry"]["entry_hash"][7:]
    with pytest.raises(NotFound):
        inclusion_bundle(ledger, 46, keyring=keyring)


def test_prove_rejects_checkpoints_that_do_not_fit(ledger, keyring, tmp_path):
    note = make_checkpoint(ledger, keyring)
    with pytest.raises(UsageError, match="does not cover seq"):
        ledger.append(realistic(1, start=45)[0])
        inclusion_bundle(ledger, 45, note)
    lie = note.replace("\n45\n", "\n44\n")   # parses; its root is not ours at 44
    with pytest.raises(CheckpointError):
        inclusion_bundle(ledger, 3, lie)
    with pytest.raises(UsageError, match="not a signed checkpoint"):
        inclusion_bundle(ledger, 3, "nope")
    foreign = note.replace(ORIGIN, "other/log")
    with pytest.raises(UsageError, match="not this ledger"):
        inclusion_bundle(ledger, 3, foreign)


def test_consistency_proof_between_two_checkpoints(ledger, keyring, tmp_path, db_url):
    old = make_checkpoint(ledger, keyring)
    ledger.append_many(realistic(20, start=45))
    new = make_checkpoint(ledger, keyring)
    bundle = consistency_bundle(ledger, old, new)
    assert bundle["format"] == CONSISTENCY_FORMAT
    result = verify_consistency_bundle(bundle, keyring.public_keys())
    assert (result.old_size, result.tree_size) == (45, 65)
    for mutate, code in [
        (lambda b: b["path"].__setitem__(0, flip_hex(b["path"][0])), "consistency_invalid"),
        (lambda b: b.update(old=b["new"], new=b["old"]), "consistency_invalid"),
        (lambda b: b.update(old=flip_signature(b["old"])), "checkpoint_signature_invalid"),
        (lambda b: b.update(origin="x/y"), "origin_mismatch"),
        (lambda b: b.update(path=[]), "consistency_invalid"),
    ]:
        bad = copy.deepcopy(bundle)
        mutate(bad)
        with pytest.raises(ProofError) as err:
            verify_bundle(json.dumps(bad), keyring.public_keys())
        assert err.value.code == code
    with pytest.raises(UsageError):
        consistency_bundle(ledger, new, old)
    # CLI: stored checkpoints by size, then verify offline
    out = tmp_path / "c.json"
    r = CliRunner().invoke(cli, ["--db", db_url, "prove", "--consistency", "45", "65",
                                 "--out", out])
    assert r.exit_code == 0, r.output
    ok = _run_offline(tmp_path, "verify-proof", out, "--key", keyring.path / "jwks.json")
    assert ok.returncode == 0 and "consistency" in ok.stdout
    r = CliRunner().invoke(cli, ["--db", db_url, "prove", "--consistency", "44", "65"])
    assert r.exit_code == 2 and "no stored checkpoint of size 44" in r.stderr
    r = CliRunner().invoke(cli, ["--db", db_url, "prove"])
    assert r.exit_code == 2


def test_checkpoint_cli_json_and_refusal(ledger, keyring, db_url):
    run = CliRunner().invoke
    r = run(cli, ["--db", db_url, "checkpoint", "--keys", str(keyring.path), "--format", "json"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["size"] == 45 and doc["note"].startswith(ORIGIN + "\n45\n")
    r = run(cli, ["--db", db_url, "checkpoint", "--keys", str(keyring.path / "none")])
    assert r.exit_code == 2 and "no_signing_key" in r.stderr
    from tests import merkle_tamper as tamper
    url = ledger.engine.url.render_as_string(hide_password=False)
    tamper.truncate(url, 40)
    tamper.wipe_tree(url)
    r = run(cli, ["--db", db_url, "checkpoint", "--keys", str(keyring.path)])
    assert r.exit_code == 1 and "checkpoint_truncated" in r.stderr


def test_keys_from_jwks_verify_bundles(ledger, keyring):
    bundle = inclusion_bundle(ledger, 0, keyring=keyring)
    refs = load_public_keys(keyring.path / "jwks.json")
    assert verify_bundle(bundle, refs).seq == 0
