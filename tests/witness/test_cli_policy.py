"""The CLI end to end with two real witnesses and a real TSA: ``checkpoint --witness
--tsa``, then ``audit`` / ``verify-checkpoint`` / ``verify-proof`` / ``verify-export`` with
``--witness-key --quorum --tsa-certs``; and a rewritten history caught by the quorum."""

from __future__ import annotations

import json
import shutil

import pytest
from click.testing import CliRunner

from ledger.cli.main import cli
from ledger.demo.samples import realistic
from ledger.witness.local_tsa import POLICY
from tests.witness.conftest import ORIGIN


def run(db_url, *args):
    return CliRunner().invoke(cli, ["--db", db_url, *map(str, args)])


@pytest.fixture
def anchored(db_url, ledger, keyring, witnesses, tsa, tmp_path):
    """A ledger of 12 entries with a checkpoint cosigned by both witnesses and time-stamped,
    kept in cp.txt (+ cp.txt.tsr)."""
    ledger.append_many(realistic(12))
    out = tmp_path / "cp.txt"
    args = [a for w in witnesses for a in ("--witness", f"{w.name}={w.url}",
                                          "--witness-key", w.vkey_file)]
    res = run(db_url, "checkpoint", "--keys", keyring.path, *args, "--tsa", tsa.url,
              "--tsa-certs", tsa.ca_file, "--out", out)
    assert res.exit_code == 0, res.output
    assert "witness.example/w1: cosigned" in res.output and "timestamp:" in res.output
    assert (tmp_path / "cp.txt.tsr").is_file()
    return out


def policy(witnesses, tsa, quorum=2):
    return [a for w in witnesses for a in ("--witness-key", w.vkey_file)] + [
        "--quorum", quorum, "--tsa-certs", tsa.ca_file, "--tsa-policy", POLICY]


def test_audit_with_the_quorum_and_timestamp(db_url, anchored, keyring, witnesses, tsa,
                                             tmp_path):
    report = tmp_path / "r.json"
    res = run(db_url, "audit", "--checkpoint", anchored, "--key", keyring.path / "jwks.json",
              *policy(witnesses, tsa), "--json-report", report)
    assert res.exit_code == 0, res.output
    [a] = json.loads(report.read_text())["anchors"]
    assert a["quorum_met"] and a["cosigned_by"] == ["witness.example/w1", "witness.example/w2"]
    assert a["recorded_no_later_than"] and a["covers"] == "seq 0..11"


def test_quorum_not_met_and_bad_timestamp_are_findings(db_url, anchored, keyring, witnesses,
                                                       tsa, tmp_path):
    lines = anchored.read_text().splitlines(keepends=True)
    one = tmp_path / "one.txt"
    one.write_text("".join(line for line in lines if "witness.example/w2" not in line))
    shutil.copy(str(anchored) + ".tsr", str(one) + ".tsr")
    res = run(db_url, "audit", "--checkpoint", one, "--key", keyring.path / "jwks.json",
              *policy(witnesses, tsa))
    assert res.exit_code == 1 and "unwitnessed witness_quorum_not_met" in res.output
    (tmp_path / "one.txt.tsr").write_bytes(b"\x30\x00")
    res = run(db_url, "audit", "--checkpoint", one, "--key", keyring.path / "jwks.json",
              *policy(witnesses, tsa, quorum=1))
    assert res.exit_code == 1 and "timestamp_invalid" in res.output


def test_verify_checkpoint(db_url, anchored, keyring, witnesses, tsa):
    res = run(db_url, "verify-checkpoint", anchored, "--key", keyring.path / "jwks.json",
              *policy(witnesses, tsa), "--format", "json")
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["valid"] and out["quorum_met"] and out["recorded_no_later_than"]
    res = run(db_url, "verify-checkpoint", anchored, "--key", keyring.path / "jwks.json",
              "--witness-key", witnesses[0].vkey_file, "--quorum", 2)
    assert res.exit_code == 2  # a quorum larger than the keys given


def test_verify_proof_and_export_offline(db_url, anchored, keyring, witnesses, tsa, tmp_path):
    proof = tmp_path / "p.json"
    assert run(db_url, "prove", 3, "--out", proof).exit_code == 0
    doc = json.loads(proof.read_text())
    assert doc["timestamps"] and doc["checkpoint"].count("witness.example/w") == 2
    res = run(db_url, "verify-proof", proof, "--key", keyring.path / "jwks.json",
              *policy(witnesses, tsa), "--format", "json")
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["quorum_met"]
    doc["checkpoint"] = "".join(line for line in doc["checkpoint"].splitlines(True)
                                if "witness.example/w1" not in line)
    proof.write_text(json.dumps(doc))
    res = run(db_url, "verify-proof", proof, "--key", keyring.path / "jwks.json",
              *policy(witnesses, tsa))
    assert res.exit_code == 1 and "witness_quorum_not_met" in res.output
    bundle = tmp_path / "export"
    assert run(db_url, "export", "--out", bundle, "--keys", keyring.path).exit_code == 0
    assert (bundle / "timestamps.json").is_file()
    res = run(db_url, "verify-export", bundle, "--jwks", keyring.path / "jwks.json",
              *policy(witnesses, tsa), "--json-report", "-")
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["anchors"]["quorum_met"]


def test_a_rewritten_history_is_refused_and_reported(db_url, anchored, keyring, witnesses,
                                                     tsa, tmp_path):
    fork = f"sqlite:///{tmp_path / 'rewritten.db'}"
    assert run(fork, "init", "--origin", ORIGIN).exit_code == 0
    subs = tmp_path / "subs.json"
    subs.write_text(json.dumps(realistic(14, start=40)))
    assert run(fork, "append", subs).exit_code == 0
    args = [a for w in witnesses for a in ("--witness", f"{w.name}={w.url}",
                                          "--witness-key", w.vkey_file)]
    res = run(fork, "checkpoint", "--keys", keyring.path, *args, "--out", tmp_path / "f.txt")
    assert res.exit_code == 0 and res.output.count("not cosigned") == 2
    res = run(fork, "audit", "--checkpoint", anchored, "--key", keyring.path / "jwks.json",
              *policy(witnesses, tsa))
    assert res.exit_code == 1 and "rewritten checkpoint_inconsistent" in res.output
    res = run(fork, "audit", "--checkpoint", tmp_path / "f.txt", "--key",
              keyring.path / "jwks.json", *policy(witnesses, tsa))
    assert res.exit_code == 1 and "witness_quorum_not_met" in res.output
