"""``ledger audit`` and ``ledger keys`` through Click's CliRunner.

Exit codes: 0 every row verified; 1 findings; 3 complete with abstentions only
(human review needed); 2 usage errors and bad input (the message names the field);
4 could not run (database missing, uninitialized or unreachable).
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from sqlalchemy import text

from ledger import Ledger
from ledger.cli.main import cli
from ledger.clock import FixedClock
from ledger.demo.samples import realistic
from tests import tamper as T

SUMMARY = re.compile(r"^audit complete: (\d+) rows, (\d+) verified, (\d+) failed, "
                     r"(\d+) unverified( \(human review needed\))?(; \d+ ledger-level finding\(s\))?$")


def run(url: str, *args: str) -> Result:
    res = CliRunner().invoke(cli, ["--db", url, *args])
    if res.exception is not None and not isinstance(res.exception, SystemExit):
        raise res.exception
    return res


def summary_of(stderr: str) -> tuple[int, int, int, int, bool]:
    (line,) = [ln for ln in stderr.splitlines() if ln.startswith("audit complete:")]
    m = SUMMARY.match(line)
    assert m, line
    rows, ver, failed, unver = (int(g) for g in m.groups()[:4])
    return rows, ver, failed, unver, m.group(5) is not None


def with_fixtures(url: str, *, trust: bool = False) -> Ledger:
    L = Ledger.init(url, clock=FixedClock(T.FIXTURE_TIME_US, step_us=1000))
    if trust:
        L.trust_issuer(T.ISSUER, T.JWKS)
    assert all(r.ok for r in L.append_many(realistic(12) + T.fixtures()))
    return L


def write_json(path: Path, obj: Any) -> str:
    path.write_text(json.dumps(obj) if not isinstance(obj, str) else obj, encoding="utf-8")
    return str(path)


# =============================================================================
# Exit codes and the summary line
# =============================================================================

def test_clean_ledger_exits_0_with_the_summary_line(db_url):
    with Ledger.init(db_url) as L:
        L.append_many(realistic(12))
    res = run(db_url, "audit")
    assert res.exit_code == 0
    assert res.stdout == ""
    assert res.stderr.splitlines() == [
        "audit complete: 12 rows, 12 verified, 0 failed, 0 unverified"]


def test_abstentions_only_exit_3_and_ask_for_human_review(db_url, tmp_path):
    with_fixtures(db_url).close()
    report_path = tmp_path / "report.json"
    res = run(db_url, "audit", "--json-report", str(report_path))
    assert res.exit_code == 3
    rows, ver, failed, unver, review = summary_of(res.stderr)
    report = json.loads(report_path.read_text())
    n_attested = sum(1 for s in T.fixtures() if T.token_of(s))
    assert (rows, ver, failed, unver, review) == (12 + len(T.fixtures()),
                                                  rows - n_attested, 0, n_attested, True)
    assert report["summary"] == {"rows": rows, "verified": ver, "failed": 0,
                                 "unverified": unver}
    assert report["outcome"] == "unverified" and report["findings"] == []
    assert {a["reason"] for a in report["abstentions"]} == {"unknown_issuer_key"}


def test_no_attestations_flag_exits_3_even_with_the_issuer_trusted(db_url):
    with_fixtures(db_url, trust=True).close()
    assert run(db_url, "audit").exit_code == 0
    res = run(db_url, "audit", "--no-attestations")
    assert res.exit_code == 3
    assert summary_of(res.stderr)[3] == sum(1 for s in T.fixtures() if T.token_of(s))


def test_keys_trust_through_the_cli_then_audit_verifies_the_attested_rows(db_url, tmp_path):
    with_fixtures(db_url).close()
    jwks = write_json(tmp_path / "jwks.json", T.JWKS)
    res = run(db_url, "keys", "trust", "--issuer", T.ISSUER, "--jwks", jwks,
              "--reason", "published JWKS", "--producer", "ops")
    assert res.exit_code == 0
    (line,) = res.stdout.splitlines()
    out = json.loads(line)
    assert out["ok"] is True and out["seq"] == 12 + len(T.fixtures())
    audited = run(db_url, "audit")
    assert audited.exit_code == 0
    rows, ver, failed, unver, review = summary_of(audited.stderr)
    assert rows == ver == out["seq"] + 1 and (failed, unver, review) == (0, 0, False)


def test_findings_exit_1_and_are_listed_on_stderr(db_url, tmp_path):
    with Ledger.init(db_url) as L:
        L.append_many(realistic(30))
    with T.unlocked(db_url) as conn:
        T.update_entry(conn, 7, status="BLOCKED")
        conn.execute(text("DELETE FROM entries WHERE seq = 20"))
    report_path = tmp_path / "r.json"
    res = run(db_url, "audit", "--json-report", str(report_path))
    assert res.exit_code == 1
    assert summary_of(res.stderr)[:4] == (29, 28, 1, 0)  # the gap is ledger-level
    assert "1 ledger-level finding(s)" in res.stderr
    lines = res.stderr.splitlines()
    assert lines[1].startswith("  seq 7: payload_modified column_mismatch: column status")
    assert lines[2].startswith("  seq 20: deleted seq_gap: entries 20..20 are missing")
    report = json.loads(report_path.read_text())
    assert report["outcome"] == "failed"
    assert [(f["code"], f["seq"], f["class"], f["expected"], f["actual"])
            for f in report["findings"]] == [
        ("column_mismatch", 7, "payload_modified", "VERIFIED", "BLOCKED"),
        ("seq_gap", 20, "deleted", 20, 21)]
    assert all(set(f) == {"code", "seq", "class", "message", "expected", "actual"}
               for f in report["findings"])


def test_json_report_content(db_url, tmp_path):
    with Ledger.init(db_url) as L:
        L.append_many(realistic(10))
        ledger_id, origin = L.meta.ledger_id, L.meta.origin
    path = tmp_path / "report.json"
    res = run(db_url, "audit", "--json-report", str(path), "--from", "2", "--to", "8")
    assert res.exit_code == 0
    report = json.loads(path.read_text())
    assert report["format"] == "ledger-audit-report/1"
    assert (report["ledger_id"], report["origin"]) == (ledger_id, origin)
    assert report["range"] == {"start": 2, "end": 8}
    assert report["summary"] == {"rows": 6, "verified": 6, "failed": 0, "unverified": 0}
    assert (report["outcome"], report["findings"], report["abstentions"]) == ("passed", [], [])
    assert report["policy"] == "default policy" and report["attestations_checked"] is True
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z", report["finished_at"])
    assert res.stderr.splitlines() == ["audit complete: 6 rows, 6 verified, 0 failed, 0 unverified"]
    # "-" writes the same report to stdout
    dash = run(db_url, "audit", "--json-report", "-", "--from", "2", "--to", "8")
    assert json.loads(dash.stdout)["summary"] == report["summary"]


def test_record_then_since_last_through_the_cli(db_url):
    with Ledger.init(db_url) as L:
        L.append_many(realistic(10))
    rec = run(db_url, "audit", "--record", "--producer", "nightly", "--json-report", "-")
    assert rec.exit_code == 0 and json.loads(rec.stdout)["recorded_seq"] == 10
    with Ledger.open(db_url) as L:
        assert (L.get(10)["kind"], L.get(10)["producer"]) == ("audit_run", "nightly")
        L.append_many(realistic(3, start=10))
    since = run(db_url, "audit", "--since-last")
    assert since.exit_code == 0
    assert summary_of(since.stderr)[:4] == (4, 4, 0, 0)


def test_rows_beyond_the_head_are_a_ledger_level_finding(db_url):
    with Ledger.init(db_url) as L:
        L.append_many(realistic(6))
    with T.connect(db_url) as conn:
        cols, blobs = T.forged_result(T.ledger_id(conn), realistic(1, start=6)[0])
        T.append_forged(conn, cols, blobs, move_head=False)
    res = run(db_url, "audit")
    assert res.exit_code == 1
    assert res.stderr.splitlines()[0] == (
        "audit complete: 7 rows, 7 verified, 0 failed, 0 unverified; 1 ledger-level finding(s)")


@pytest.mark.parametrize("args,field", [
    (["--policy", "{policy}"], "[policy]"),
    (["--resume"], "[resume]"),
    (["--from", "50"], "[from]"),
])
def test_usage_errors_exit_2_naming_the_field(sqlite_url, tmp_path, args, field):
    with Ledger.init(sqlite_url) as L:
        L.append_many(realistic(5))
    policy = write_json(tmp_path / "p.json", {"format": "ledger-policy/1",
                                              "rules": [{"id": "x", "engine": 5}]})
    res = run(sqlite_url, "audit", *[a.format(policy=policy) for a in args])
    assert res.exit_code == 2
    assert res.stderr.startswith("error: ") and field in res.stderr


@pytest.mark.parametrize("args", [["--workers", "0"], ["--from", "-1"], ["--bogus"],
                                  ["--policy", "/nonexistent/dir"]])
def test_bad_options_exit_2(sqlite_url, args):
    Ledger.init(sqlite_url).close()
    res = run(sqlite_url, "audit", *args)
    assert res.exit_code == 2


@pytest.mark.parametrize("value", ["0", "65", "lots", "2.5", ""])
def test_a_bad_worker_count_exits_2_naming_the_option(sqlite_url, value):
    Ledger.init(sqlite_url).close()
    res = run(sqlite_url, "audit", "--workers", value)
    assert res.exit_code == 2 and "--workers" in res.stderr and "Traceback" not in res.output


def test_workers_auto_uses_the_processors_and_records_the_run(sqlite_url):
    with Ledger.init(sqlite_url) as L:
        L.append_many(realistic(40))
    res = run(sqlite_url, "audit", "--workers", "AUTO", "--json-report", "-")
    assert res.exit_code == 0, res.output
    report = json.loads(res.stdout)
    assert report["workers"] == min(64, len(os.sched_getaffinity(0)))
    assert report["summary"]["rows"] == 40 and report["run_id"] is not None


def test_invalid_policy_json_exits_2(sqlite_url, tmp_path):
    Ledger.init(sqlite_url).close()
    res = run(sqlite_url, "audit", "--policy", write_json(tmp_path / "p.json", "{nope"))
    assert res.exit_code == 2 and "bad_policy [policy]" in res.stderr


def test_uninitialized_sqlite_file_exits_4(tmp_path):
    url = f"sqlite:///{tmp_path / 'empty.db'}"
    res = run(url, "audit")
    assert res.exit_code == 4 and "not_initialized" in res.stderr


def test_missing_sqlite_directory_exits_4(tmp_path):
    res = run(f"sqlite:///{tmp_path / 'no' / 'such' / 'l.db'}", "audit")
    assert res.exit_code == 4 and "store_unavailable" in res.stderr


def test_uninitialized_postgresql_schema_exits_4(pg_url):
    res = run(pg_url, "audit")
    assert res.exit_code == 4 and "not_initialized" in res.stderr


def test_unreachable_postgresql_exits_4():
    res = run("postgresql://postgres@127.0.0.1:1/nothing", "audit")
    assert res.exit_code == 4 and res.stderr.startswith("error: ")


# =============================================================================
# ledger keys
# =============================================================================

def test_keys_trust_trusted_retire_revoke(db_url, tmp_path):
    Ledger.init(db_url).close()
    jwks = write_json(tmp_path / "jwks.json", T.JWKS)
    first = run(db_url, "keys", "trust", "--issuer", T.ISSUER, "--jwks", jwks)
    assert first.exit_code == 0 and json.loads(first.stdout)["seq"] == 0
    again = run(db_url, "keys", "trust", "--issuer", T.ISSUER, "--jwks", jwks)
    assert again.exit_code == 0 and again.stdout == ""
    assert "already trusted" in again.stderr

    eph = T.new_key()
    eph_kid = "did:qwed:node:eph#signing-key-v1"
    eph_jwks = write_json(tmp_path / "eph.json", T.jwks_of(eph, eph_kid))
    assert run(db_url, "keys", "trust", "--issuer", "did:qwed:node:eph",
               "--jwks", eph_jwks).exit_code == 0
    # a key without a kid gets <issuer>#<RFC 7638 thumbprint>, as upstream names it
    plain = write_json(tmp_path / "plain.json", T.jwks_of(T.new_key()))
    assert run(db_url, "keys", "trust", "--issuer", "did:qwed:node:p", "--jwks",
               plain).exit_code == 0

    retired = run(db_url, "keys", "retire", "--kid", eph_kid, "--reason", "restart")
    assert retired.exit_code == 0 and json.loads(retired.stdout)["seq"] == 3
    revoked = run(db_url, "keys", "revoke", "--kid", T.KID, "--reason", "leak",
                  "--compromised-since", "2026-01-01T12:00:00Z")
    assert revoked.exit_code == 0 and json.loads(revoked.stdout)["seq"] == 4

    listed = run(db_url, "keys", "trusted", "--format", "json")
    assert listed.exit_code == 0
    rows = json.loads(listed.stdout)
    assert [(r["issuer"], r["trusted_at_seq"], r["ended_at_seq"], r["compromised_since"])
            for r in rows] == [
        (T.ISSUER, 0, 4, "2026-01-01T12:00:00.000000Z"),
        ("did:qwed:node:eph", 1, 3, None),
        ("did:qwed:node:p", 2, None, None)]
    assert rows[0]["kid"] == T.KID and rows[1]["kid"] == eph_kid
    assert rows[2]["kid"] == "did:qwed:node:p#" + rows[2]["thumbprint"]
    table = run(db_url, "keys", "trusted")
    assert table.exit_code == 0 and T.KID in table.stdout and "trusted_at_seq" in table.stdout
    # key events are ledger entries: the audit covers them
    assert run(db_url, "audit").exit_code == 0


def test_keys_trusted_on_an_empty_store(sqlite_url):
    Ledger.init(sqlite_url).close()
    res = run(sqlite_url, "keys", "trusted", "--format", "json")
    assert res.exit_code == 0 and json.loads(res.stdout) == []
    assert "no trusted producer keys" in res.stderr


BAD_JWKS = {
    "not-json": "{\"keys\": [",
    "no-keys-member": {"kty": "EC"},
    "empty-keys": {"keys": []},
    "private-jwk": {"keys": [{**T.JWKS["keys"][0], "d": "c2VjcmV0"}]},
    "rsa-key": {"keys": [{"kty": "RSA", "n": "sXch", "e": "AQAB"}]},
    "p384-key": {"keys": [{**T.JWKS["keys"][0], "crv": "P-384"}]},
    "point-not-on-curve": {"keys": [{**T.JWKS["keys"][0], "y": T.JWKS["keys"][0]["x"]}]},
    "x-not-a-string": {"keys": [{**T.JWKS["keys"][0], "x": 12}]},
}


@pytest.mark.parametrize("content", list(BAD_JWKS.values()), ids=list(BAD_JWKS))
def test_keys_trust_with_a_bad_jwks_exits_2_naming_the_field(sqlite_url, tmp_path, content):
    Ledger.init(sqlite_url).close()
    path = write_json(tmp_path / "jwks.json", content)
    res = run(sqlite_url, "keys", "trust", "--issuer", T.ISSUER, "--jwks", path)
    assert res.exit_code == 2
    assert res.stderr.startswith("error: usage [jwks]: ")
    with Ledger.open(sqlite_url) as L:
        assert L.head()["size"] == 0  # nothing recorded


def test_private_jwk_message_says_why(sqlite_url, tmp_path):
    Ledger.init(sqlite_url).close()
    path = write_json(tmp_path / "jwks.json", BAD_JWKS["private-jwk"])
    res = run(sqlite_url, "keys", "trust", "--issuer", T.ISSUER, "--jwks", path)
    assert "keys[0]" in res.stderr and "private JWK" in res.stderr


@pytest.mark.parametrize("keys", [
    [{"kty": "EC", "crv": "P-256", "x": "AAAA", "y": "AAAA"}],
    [{"kty": "EC", "crv": "P-256"}],
    ["not-an-object"],
], ids=["short-coordinates", "missing-coordinates", "key-not-an-object"])
def test_keys_trust_with_a_malformed_key_exits_2(sqlite_url, tmp_path, keys):
    Ledger.init(sqlite_url).close()
    path = write_json(tmp_path / "jwks.json", {"keys": keys})
    res = CliRunner().invoke(cli, ["--db", sqlite_url, "keys", "trust", "--issuer", T.ISSUER,
                                   "--jwks", path])
    assert res.exit_code == 2
    assert "[jwks]" in res.stderr


def test_keys_trust_missing_file_or_issuer_exits_2(sqlite_url, tmp_path):
    Ledger.init(sqlite_url).close()
    jwks = write_json(tmp_path / "jwks.json", T.JWKS)
    missing = run(sqlite_url, "keys", "trust", "--issuer", T.ISSUER, "--jwks",
                  str(tmp_path / "nope.json"))
    assert missing.exit_code == 2 and "[jwks]" in missing.stderr
    empty_issuer = run(sqlite_url, "keys", "trust", "--issuer", "", "--jwks", jwks)
    assert empty_issuer.exit_code == 2 and "[issuer]" in empty_issuer.stderr
    no_issuer = run(sqlite_url, "keys", "trust", "--jwks", jwks)
    assert no_issuer.exit_code == 2 and "--issuer" in no_issuer.stderr


@pytest.mark.parametrize("command", [["retire", "--kid", "did:x#unknown"],
                                     ["revoke", "--kid", "did:x#unknown", "--reason", "r"]])
def test_retire_or_revoke_an_unknown_kid_exits_2(sqlite_url, tmp_path, command):
    with Ledger.init(sqlite_url) as L:
        L.trust_issuer(T.ISSUER, T.JWKS)
    res = run(sqlite_url, "keys", *command)
    assert res.exit_code == 2
    assert res.stderr.startswith("error: not_found [kid]: ") and "did:x#unknown" in res.stderr


def test_retiring_twice_is_an_unknown_kid(sqlite_url):
    with Ledger.init(sqlite_url) as L:
        L.trust_issuer(T.ISSUER, T.JWKS)
    assert run(sqlite_url, "keys", "retire", "--kid", T.KID).exit_code == 0
    again = run(sqlite_url, "keys", "retire", "--kid", T.KID)
    assert again.exit_code == 2 and "[kid]" in again.stderr


def test_revoke_needs_a_reason_and_an_rfc3339_time(sqlite_url):
    with Ledger.init(sqlite_url) as L:
        L.trust_issuer(T.ISSUER, T.JWKS)
    no_reason = run(sqlite_url, "keys", "revoke", "--kid", T.KID)
    assert no_reason.exit_code == 2 and "--reason" in no_reason.stderr
    bad_time = run(sqlite_url, "keys", "revoke", "--kid", T.KID, "--reason", "leak",
                   "--compromised-since", "last tuesday")
    assert bad_time.exit_code == 2 and "[compromised-since]" in bad_time.stderr
    with Ledger.open(sqlite_url) as L:
        assert L.head()["size"] == 1  # still only the trust event


def test_a_checkpoint_without_a_key_is_an_abstention_and_a_missing_one_exits_2(sqlite_url,
                                                                               tmp_path):
    with Ledger.init(sqlite_url, origin="test.example/cli-audit") as L:
        L.append_many(realistic(5))
    keys = tmp_path / "keys"
    assert run(sqlite_url, "keys", "generate", "--keys", str(keys)).exit_code == 0
    cp = tmp_path / "cp.txt"
    assert run(sqlite_url, "checkpoint", "--keys", str(keys), "--out", str(cp)).exit_code == 0
    res = run(sqlite_url, "audit", "--checkpoint", str(cp), "--json-report", "-")
    assert res.exit_code == 3, res.output
    report = json.loads(res.stdout)
    assert report["checkpoints"] == [str(cp)] and report["findings"] == []
    assert [(a["check"], a["reason"]) for a in report["abstentions"]] == [
        ("checkpoint_signature", "no_ledger_key")]
    jwks = str(keys / "jwks.json")
    assert run(sqlite_url, "audit", "--checkpoint", str(cp), "--key", jwks).exit_code == 0
    res = run(sqlite_url, "audit", "--checkpoint", str(tmp_path / "none.txt"))
    assert res.exit_code == 2 and "checkpoint" in res.stderr


def test_more_than_twenty_findings_are_listed_up_to_twenty(sqlite_url):
    with Ledger.init(sqlite_url) as L:
        L.append_many(realistic(30))
    with T.unlocked(sqlite_url) as conn:
        for seq in range(25):
            T.update_entry(conn, seq, subject=f"rewritten-{seq}")
    res = run(sqlite_url, "audit")
    assert res.exit_code == 1
    listed = [ln for ln in res.stderr.splitlines() if ln.startswith("  seq ")]
    assert len(listed) == 20
    assert res.stderr.splitlines()[-1].startswith("  … ") and "more in the JSON report" in \
        res.stderr
