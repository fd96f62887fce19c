"""``ledger redact``, ``ledger hold``, ``ledger retention apply`` end to end (CliRunner), on
SQLite and PostgreSQL: output lines, the signed report, refusals and exit codes."""

from __future__ import annotations

import json
import random

from click.testing import CliRunner

from ledger.cli.main import cli
from ledger.clock import SystemClock
from ledger.crypto.keys import Keyring
from ledger.demo.samples import math_verified
from ledger.facade import Ledger
from ledger.ops.custody import verify_report


def _ledger(db_url: str, n: int = 3, keys=None) -> list[int]:
    with Ledger.init(db_url, origin="test.example/cli-redact") as lg:
        if keys is not None:  # redactions are signed by the ledger key
            Keyring.load(keys).generate(lg.meta.origin, SystemClock().now_us())
        subs = []
        for i in range(n):
            s = math_verified(i, random.Random(i))
            s["subject"] = "dana" if i < 2 else "erin"
            subs.append(s)
        return [r.seq for r in lg.append_many(subs)]


def _run(db_url: str, *args: str, keys=None):
    env = {"LEDGER_KEYS_DIR": str(keys)} if keys is not None else None
    return CliRunner().invoke(cli, ["--db", db_url, *args], catch_exceptions=False, env=env)


def _lines(out: str) -> list[dict]:
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


def test_redact_dry_run_then_for_real_with_report(db_url, tmp_path):
    seqs = _ledger(db_url)
    keys = tmp_path / "keys"
    with Ledger.open(db_url) as lg:
        Keyring.load(keys).generate(lg.meta.origin, SystemClock().now_us())
    dry = _run(db_url, "redact", "--subject", "dana", "--payload", "evidence", "--payload",
               "query", "--reason", "DSR", "--dry-run")
    assert dry.exit_code == 0, dry.output
    lines = _lines(dry.stdout)
    assert [x["seq"] for x in lines] == seqs[:2]
    assert all(x["dry_run"] and x["redaction_seq"] is None for x in lines)
    assert "would erase 4 payloads of 2 entries" in dry.stderr
    report = tmp_path / "erasure.json"
    real = _run(db_url, "redact", "--subject", "dana", "--payload", "evidence", "--payload",
                "query", "--reason", "DSR", "--reference", "DSR-7", "--report", str(report),
                "--keys", str(keys))
    assert real.exit_code == 0, real.output
    got = _lines(real.stdout)
    assert [x["payloads"] for x in got] == [["preimage", "query"]] * 2
    doc = json.loads(report.read_text())
    assert doc["reference"] == "DSR-7" and doc["redaction_seqs"] == [got[0]["redaction_seq"]]
    assert verify_report(doc, json.loads((keys / "jwks.json").read_text()))
    audit = _run(db_url, "audit", "--key", str(keys / "jwks.json"))
    assert audit.exit_code == 3, audit.output  # only redactions are not verified
    assert "0 failed, 2 unverified, 4 redacted" in audit.stderr
    unkeyed = _run(db_url, "audit")  # the redaction's signature is not checked: abstained
    assert unkeyed.exit_code == 3 and "0 failed, 3 unverified" in unkeyed.stderr


def test_refusals_exit_2(db_url, tmp_path):
    keys = tmp_path / "keys"
    seqs = _ledger(db_url, keys=keys)
    assert _run(db_url, "redact", "--seq", "99", "--reason", "x").exit_code == 2
    assert _run(db_url, "redact", "--seq", "0").exit_code == 2  # --reason is required
    assert _run(db_url, "redact", "--reason", "x").exit_code == 2  # no target
    held = _run(db_url, "hold", "add", "--seq", str(seqs[2]), "--reason", "case 1")
    assert held.exit_code == 0, held.output
    hold_seq = json.loads(held.stdout)["hold_seq"]
    refused = _run(db_url, "redact", "--subject", "erin", "--reason", "x", keys=keys)
    assert refused.exit_code == 2 and f"legal hold {hold_seq}" in refused.stderr
    listed = _run(db_url, "hold", "list", "--format", "json")
    assert json.loads(listed.stdout) == {str(hold_seq): [seqs[2]]}
    rel = _run(db_url, "hold", "release", str(hold_seq), "--reason", "closed")
    assert rel.exit_code == 0 and json.loads(rel.stdout)["release_seq"] > hold_seq
    assert _run(db_url, "redact", "--subject", "erin", "--reason", "x",
                keys=keys).exit_code == 0
    # without the ledger key there is no redaction: exit 2, nothing written
    nokey = _run(db_url, "redact", "--subject", "dana", "--reason", "x",
                 keys=tmp_path / "empty")
    assert nokey.exit_code == 2 and "no active signing key" in nokey.stderr
    assert "Traceback" not in nokey.output


def test_minimum_retention_and_retention_apply(db_url, tmp_path):
    keys = tmp_path / "keys"
    _ledger(db_url, keys=keys)
    policy = tmp_path / "retention.json"
    policy.write_text(json.dumps({"format": "ledger-retention/1", "rules": [
        {"id": "min", "payloads": ["query"], "minimum_days": 30},
        {"id": "meta-now", "payloads": ["meta"], "erase_after_days": 0}]}))
    refused = _run(db_url, "redact", "--seq", "0", "--reason", "x", "--retention", str(policy),
                   keys=keys)
    assert refused.exit_code == 2 and "minimum retention" in refused.stderr
    ok = _run(db_url, "redact", "--seq", "0", "--reason", "x", "--retention", str(policy),
              "--override-minimum", "court order", keys=keys)
    assert ok.exit_code == 0, ok.output
    dry = _run(db_url, "retention", "apply", "--policy", str(policy), "--dry-run")
    assert dry.exit_code == 0, dry.output
    assert [x["payloads"] for x in _lines(dry.stdout)] == [["meta"], ["meta"]]
    run = _run(db_url, "retention", "apply", "--policy", str(policy), keys=keys)
    assert json.loads(run.stderr.split("retention apply: ", 1)[1])["entries"] == 2
    again = _run(db_url, "retention", "apply", "--policy", str(policy), keys=keys)
    assert _lines(again.stdout) == []


def test_retention_apply_for_one_tenant(db_url, tmp_path):
    keys = tmp_path / "keys"
    _ledger(db_url, keys=keys)
    with Ledger.open(db_url) as lg:
        mine = [r.seq for r in lg.append_many([math_verified(7, random.Random(7))],
                                              tenant="acme")]
    policy = tmp_path / "retention.json"
    policy.write_text(json.dumps({"format": "ledger-retention/1", "rules": [
        {"id": "meta-now", "payloads": ["meta"], "erase_after_days": 0}]}))
    for bad in ("Acme", "", "a" * 64):
        refused = _run(db_url, "retention", "apply", "--policy", str(policy), "--tenant", bad,
                       keys=keys)
        assert refused.exit_code == 2 and "tenant" in refused.stderr, refused.output
    run = _run(db_url, "retention", "apply", "--policy", str(policy), "--tenant", "acme",
               keys=keys)
    assert run.exit_code == 0, run.output
    assert [x["seq"] for x in _lines(run.stdout)] == mine
    with Ledger.open(db_url) as lg:
        assert lg.get(mine[0])["payloads"]["meta"]["text"] is None
        assert lg.get(0)["payloads"]["meta"]["text"] is not None
        assert lg.audit_tenant("acme").findings == ()


def test_audit_with_the_ledger_key_tells_a_forged_redaction_from_a_lawful_one(db_url, tmp_path):
    from ledger.core.redaction import build_request
    from ledger.ops.append import commit_redaction
    from ledger.ops.custody import Ask, prepare_redaction

    keys = tmp_path / "keys"
    seqs = _ledger(db_url, keys=keys)
    lawful = _run(db_url, "redact", "--seq", str(seqs[0]), "--reason", "DSR", keys=keys)
    assert lawful.exit_code == 0, lawful.output
    jwks = str(keys / "jwks.json")
    ok = _run(db_url, "audit", "--key", jwks)
    assert ok.exit_code == 3, ok.output  # lawful: only the erased payloads are unverified
    with Ledger.open(db_url) as lg:  # a database writer without the key
        p, pairs = prepare_redaction(build_request({seqs[1]: ["query"]}, "forged"),
                                     Ask("forged", role="custodian"))
        forged = commit_redaction(lg.ctx, [p], [pairs])[0].result.seq
    bad = _run(db_url, "audit", "--key", jwks, "--json-report", "-")
    assert bad.exit_code == 1, bad.output
    report = json.loads(bad.stdout)
    assert {(f["seq"], f["code"]) for f in report["findings"]} == {(forged, "redaction_unsigned")}


def test_a_payload_the_entry_does_not_have_is_refused_and_nothing_written(db_url, tmp_path):
    keys = tmp_path / "keys"
    with Ledger.init(db_url, origin="test.example/cli-redact") as lg:
        Keyring.load(keys).generate(lg.meta.origin, SystemClock().now_us())
        subs = []
        for i in range(2):
            s = math_verified(i, random.Random(i))
            s.pop("meta")  # entries without a meta payload
            s["subject"] = "dana"
            subs.append(s)
        seqs = [r.seq for r in lg.append_many(subs)]
        assert json.loads(lg.get(seqs[0])["envelope"])["payloads"]["meta"] is None
        size = lg.head()["size"]
    for payloads in (["meta"], ["meta", "subject"], ["subject", "meta"]):
        args = [a for p in payloads for a in ("--payload", p)]
        got = _run(db_url, "redact", "--seq", str(seqs[0]), *args, "--reason", "DSR", keys=keys)
        assert got.exit_code == 2, got.output
        assert "payload meta names nothing: entry 0 has no meta payload" in got.stderr
        assert got.stdout == ""
    by_subject = _run(db_url, "redact", "--subject", "dana", "--payload", "meta",
                      "--payload", "query", "--reason", "DSR", keys=keys)
    assert by_subject.exit_code == 2 and "any of the 2 entries" in by_subject.stderr
    with Ledger.open(db_url) as lg:
        assert lg.head()["size"] == size  # no redaction entry written
    ok = _run(db_url, "redact", "--seq", str(seqs[0]), "--payload", "subject", "--reason", "x",
              keys=keys)
    assert ok.exit_code == 0 and _lines(ok.stdout)[0]["payloads"] == ["subject"]


def test_redact_and_hold_that_match_nothing_exit_2_and_write_nothing(db_url, tmp_path):
    keys = tmp_path / "keys"
    _ledger(db_url, keys=keys)
    with Ledger.open(db_url) as lg:
        size = lg.head()["size"]
    report = tmp_path / "erasure.json"
    for dry in ((), ("--dry-run",)):
        r = _run(db_url, "redact", "--subject", "nobody", "--reason", "DSR", "--report",
                 str(report), "--keys", str(keys), *dry)
        assert r.exit_code == 2, r.output
        assert "no result entry has the subject 'nobody'" in r.stderr
        assert "nothing to erase, nothing was written" in r.stderr
        assert not report.exists()  # no signed report of an erasure that did not happen
    r = _run(db_url, "hold", "add", "--subject", "nobody", "--reason", "litigation")
    assert r.exit_code == 2, r.output
    assert "no result entry has the subject 'nobody': nothing to hold" in r.stderr
    assert "give --subject" not in r.stderr  # the option was given: it matched nothing
    with Ledger.open(db_url) as lg:
        assert lg.head()["size"] == size  # nothing appended
    one = _run(db_url, "redact", "--seq", "2", "--payload", "evidence", "--reason", "DSR",
               keys=keys)
    assert one.exit_code == 0 and "erased 1 payload of 1 entry in redaction entry " in \
        one.stderr, one.output
