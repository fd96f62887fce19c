"""Redaction, legal holds and retention as use cases, on SQLite and PostgreSQL (``db_url``):
what is erased, what is refused, what the audit then says."""

from __future__ import annotations

import json
import random

import pytest
from sqlalchemy import create_engine, text

from ledger.clock import FixedClock, SystemClock
from ledger.core.retention import DAY_US, parse_retention
from ledger.crypto.tokens import new_es256_key
from ledger.demo.samples import attested, math_verified
from ledger.errors import NotFound, RedactionRefused, UsageError
from ledger.facade import Ledger
from ledger.ops.append import commit_batch, prepare_event
from ledger.ops.audit import AuditOptions
from ledger.ops.custody import Ask, verify_report
from tests.keyrings import ledger_keyring

ISSUER = "did:test:issuer"
ASK = Ask("GDPR Art. 17 request", "DSR-1", "dpo@example.org")


def _subs(n: int, subject: str, start: int = 0) -> list[dict]:
    out = []
    for i in range(start, start + n):
        s = math_verified(i, random.Random(i))
        s["subject"] = subject
        out.append(s)
    return out


@pytest.fixture
def ledger(db_url):
    lg = Ledger.init(db_url, origin="test.example/redaction")
    yield lg
    lg.close()


@pytest.fixture
def ring(ledger, tmp_path):
    return ledger_keyring(ledger, tmp_path / "keys")


def _seed(lg: Ledger) -> dict[str, list[int]]:
    alice = [r.seq for r in lg.append_many(_subs(3, "alice"), producer="p")]
    bob = [r.seq for r in lg.append_many(_subs(2, "bob", 10), producer="p")]
    return {"alice": alice, "bob": bob}


def _raw(url: str):
    return create_engine(url.replace("postgresql://", "postgresql+psycopg://", 1))


def _abstained(report: dict) -> list[tuple[int, str]]:
    return sorted((a.seq, a.reason) for a in report.abstentions)


def test_redact_by_subject_erases_and_the_audit_abstains(ledger, ring):
    seqs = _seed(ledger)
    out = ledger.redact(ASK, keyring=ring, subject="alice", payloads=["query", "evidence"])
    assert [t.seq for t in out.targets] == seqs["alice"]
    assert all(t.erase == ("preimage", "query") for t in out.targets)
    assert len(out.redaction_seqs) == 1 and out.redaction_seqs[0] > max(seqs["bob"])
    for seq in seqs["alice"]:
        payloads = ledger.get(seq)["payloads"]
        assert payloads["query"]["text"] is None and payloads["preimage"]["text"] is None
        assert payloads["result"]["text"] is not None
    for seq in seqs["bob"]:
        assert ledger.get(seq)["payloads"]["query"]["text"] is not None
    report = ledger.audit(AuditOptions())
    assert report.summary.failed == 0 and report.findings == ()
    assert report.outcome == "unverified"
    redacted = [a for a in report.abstentions if a.reason == "redacted"]
    assert len(redacted) == 6
    assert {a.to_json()["redaction_seq"] for a in redacted} == set(out.redaction_seqs)


def test_dry_run_changes_nothing(ledger):
    seqs = _seed(ledger)
    size = ledger.head()["size"]
    out = ledger.redact(ASK, keyring=ring, seqs=[seqs["bob"][0]], dry_run=True)
    assert out.dry_run and out.redaction_seqs == []
    assert out.targets[0].erase == ("meta", "preimage", "query", "result", "subject")
    assert ledger.head()["size"] == size
    assert ledger.get(seqs["bob"][0])["payloads"]["query"]["text"] is not None


def test_refusals_write_nothing(ledger, ring):
    seqs = _seed(ledger)
    size = ledger.head()["size"]
    with pytest.raises(NotFound) as e:
        ledger.redact(ASK, keyring=ring, seqs=[999])
    assert e.value.code == "no_such_entry"
    with pytest.raises(UsageError):
        ledger.redact(Ask("  "), keyring=ring, seqs=[0])
    with pytest.raises(UsageError):
        ledger.redact(ASK, keyring=ring, seqs=[0], payloads=["passwords"])
    first = ledger.redact(ASK, keyring=ring, seqs=[seqs["alice"][0]], payloads=["meta"])
    with pytest.raises(UsageError) as e:
        ledger.redact(ASK, keyring=ring, seqs=[first.redaction_seqs[0]])  # a redaction is not redactable
    assert e.value.code == "not_redactable"
    assert ledger.head()["size"] == size + 1


def test_already_erased_is_a_reported_no_op(ledger, ring):
    seqs = _seed(ledger)
    ledger.redact(ASK, keyring=ring, seqs=[seqs["alice"][0]], payloads=["query"])
    again = ledger.redact(ASK, keyring=ring, seqs=[seqs["alice"][0]], payloads=["query", "meta"])
    assert again.targets[0].erase == ("meta",) and again.targets[0].already == ("query",)
    size = ledger.head()["size"]
    none = ledger.redact(ASK, keyring=ring, seqs=[seqs["alice"][0]], payloads=["query"])
    assert none.redaction_seqs == [] and none.targets[0].already == ("query",)
    assert ledger.head()["size"] == size  # nothing to erase: no entry
    with pytest.raises(UsageError) as err:  # a subject that matches nothing: refused
        ledger.redact(ASK, keyring=ring, subject="nobody")
    assert (err.value.code, err.value.field) == ("nothing_matched", "subject")
    assert ledger.head()["size"] == size


def test_query_takes_its_attestation_unless_kept(ledger, ring):
    key, jwk = new_es256_key()
    jwk["kid"] = f"{ISSUER}#k1"
    ledger.trust_issuer(ISSUER, {"keys": [jwk]})
    iat = SystemClock().now_us() // 1_000_000 - 60
    a, b = [r.seq for r in ledger.append_many(
        [attested(i, key, ISSUER, jwk["kid"], iat) for i in range(2)])]
    took = ledger.redact(ASK, keyring=ring, seqs=[a], payloads=["query"])
    assert took.targets[0].erase == ("attestation", "query")
    kept = ledger.redact(ASK, keyring=ring, seqs=[b], payloads=["query"], keep_attestation=True)
    assert kept.targets[0].erase == ("query",)
    assert ledger.get(b)["payloads"]["attestation"]["text"] is not None
    doc = json.loads(ledger.get(kept.redaction_seqs[0])["payloads"]["request"]["text"])
    assert doc["keep_attestation"] is True
    report = ledger.audit(AuditOptions())
    assert report.summary.failed == 0, report.findings


def test_legal_hold_blocks_redaction_until_released(ledger, ring):
    seqs = _seed(ledger)
    hold = ledger.hold_add(Ask("litigation", "case 42"), subject="alice")
    assert ledger.holds() == {hold: seqs["alice"]}
    with pytest.raises(RedactionRefused) as e:
        ledger.redact(ASK, keyring=ring, subject="alice")
    assert e.value.code == "entry_on_hold" and e.value.detail["hold_seq"] == hold
    assert str(hold) in e.value.message
    ledger.redact(ASK, keyring=ring, subject="bob")  # other entries are not held
    release = ledger.hold_release(Ask("case closed"), hold)
    assert release > hold and ledger.holds() == {}
    with pytest.raises(NotFound):
        ledger.hold_release(Ask("twice"), hold)
    ledger.redact(ASK, keyring=ring, subject="alice")
    assert ledger.audit(AuditOptions()).summary.failed == 0


def test_minimum_retention_refuses_without_override(ledger, ring):
    seqs = _seed(ledger)
    policy = parse_retention(json.dumps({"format": "ledger-retention/1", "rules": [
        {"engine": "*", "payloads": ["query"], "minimum_days": 183}]}))
    with pytest.raises(RedactionRefused) as e:
        ledger.redact(ASK, keyring=ring, seqs=[seqs["alice"][0]], retention=policy)
    assert e.value.code == "minimum_retention"
    ledger.redact(ASK, keyring=ring, seqs=[seqs["alice"][0]], payloads=["meta"], retention=policy)
    out = ledger.redact(ASK, keyring=ring, seqs=[seqs["alice"][0]], retention=policy,
                        override_minimum="court order 7")
    doc = json.loads(ledger.get(out.redaction_seqs[0])["payloads"]["request"]["text"])
    assert doc["override_minimum"] == "court order 7"


def test_retention_apply_is_resumable_and_skips_holds(db_url, tmp_path):
    clock = FixedClock(1_800_000_000_000_000, step_us=1)
    Ledger.init(db_url, origin="test.example/retention", clock=clock).close()
    with Ledger.open(db_url, clock=clock) as lg:
        seqs = [r.seq for r in lg.append_many(_subs(5, "carol"))]
        hold = lg.hold_add(Ask("keep one"), seqs=[seqs[0]])
        policy = parse_retention(json.dumps({"format": "ledger-retention/1", "rules": [
            {"payloads": ["query", "evidence"], "erase_after_days": 30}]}))
        ring = ledger_keyring(lg, tmp_path / "keys")
        assert lg.apply_retention(policy, keyring=ring).entries == 0  # not old enough yet
        clock.advance(31 * DAY_US)
        dry = lg.apply_retention(policy, dry_run=True)
        assert dry.entries == 4 and dry.held == 1 and dry.redaction_seqs == []
        run = lg.apply_retention(policy, keyring=ring)
        assert run.entries == 4 and run.payloads == 8 and len(run.redaction_seqs) == 1
        assert lg.apply_retention(policy, keyring=ring).entries == 0  # a rerun: nothing left
        assert lg.get(seqs[0])["payloads"]["query"]["text"] is not None
        assert lg.holds() == {hold: [seqs[0]]}
        assert lg.audit(AuditOptions()).summary.failed == 0


def test_erasure_report_is_signed(ledger, ring):
    _seed(ledger)
    out = ledger.redact(ASK, keyring=ring, subject="bob")
    report = ledger.erasure_report(out, ASK, ring)
    jwks = json.loads((ring.path / "jwks.json").read_text())
    assert verify_report(report, jwks)["iss"] == ledger.meta.origin
    assert report["redaction_seqs"] == out.redaction_seqs
    assert report["checkpoint"]["size"] == out.redaction_seqs[0] + 1
    assert "bob" not in json.dumps(report)
    forged = {**report, "reason": "something else"}
    with pytest.raises(Exception) as e:
        verify_report(forged, jwks)
    assert getattr(e.value, "code", None) == "erasure_report_invalid"


def test_erasure_report_times_come_from_the_ledger_clock(db_url, tmp_path):
    """The report's erasure time and its signature's ``iat`` are the injected clock's."""
    t0 = 1_000_000_000_000_000  # 2001-09-09: far from any wall clock this runs under
    with Ledger.init(db_url, origin="test.example/redaction",
                     clock=FixedClock(t0, step_us=1)) as lg:
        ring = ledger_keyring(lg, tmp_path / "keys")
        _seed(lg)
        out = lg.redact(ASK, keyring=ring, subject="bob")
        report = lg.erasure_report(out, ASK, ring)
    claims = verify_report(report, json.loads((ring.path / "jwks.json").read_text()))
    assert claims["iat"] == t0 // 1_000_000
    assert report["erased_at"].startswith("2001-09-09T")


def test_a_raw_delete_without_redaction_is_refused(ledger, db_url):
    _seed(ledger)
    eng = _raw(db_url)
    try:
        with pytest.raises(Exception) as e, eng.begin() as c:
            c.execute(text("DELETE FROM payloads WHERE pid = 3"))  # seq 0, query
        assert "not allowed" in str(e.value)
    finally:
        eng.dispose()
    assert ledger.get(0)["payloads"]["query"]["text"] is not None


def test_a_delete_with_the_trigger_off_is_still_caught(ledger, db_url):
    _seed(ledger)
    eng = _raw(db_url)
    pg = db_url.startswith("postgresql")
    try:
        with eng.begin() as c:  # what a database superuser can do
            if pg:
                c.execute(text("ALTER TABLE payloads DISABLE TRIGGER USER"))
            else:
                c.execute(text("DROP TRIGGER payloads_no_delete"))
            c.execute(text("DELETE FROM payloads WHERE pid = 3"))
    finally:
        eng.dispose()
    report = ledger.audit(AuditOptions())
    assert [(f.seq, f.code) for f in report.findings] == [(0, "payload_missing")]
    assert report.outcome == "failed"


def test_audit_checks_the_redaction_entries_themselves(ledger):
    seqs = _seed(ledger)
    doc = {"format": "ledger-redaction/1", "targets": [{"seq": seqs["bob"][0],
                                                        "payloads": ["meta"]}],
           "reason": "r", "reference": None, "requested_by": None,
           "keep_attestation": False, "override_minimum": None}
    p = prepare_event("redaction", {"producer": "x", "role": "agent"}, "request", doc)
    bad = commit_batch(ledger.engine, ledger.meta.ledger_id, ledger.clock, [p])[0]
    report = ledger.audit(AuditOptions())
    codes = {(f.seq, f.code) for f in report.findings}
    assert (bad.seq, "redaction_role_invalid") in codes
    # the payload the bad redaction names is still stored: not applied
    assert (seqs["bob"][0], "redaction_not_applied") in codes
    assert report.summary.failed >= 2


# -- a hold and a redaction racing (issue 34, item 1) -------------------------------------
class _HoldWhenPlanned:
    """A system clock that, the first time it is read after ``arm``, appends a legal hold
    on ``seq`` through a second ledger handle (its own engine and connections): a custodian
    whose hold lands after the redaction read the holds and before it erased anything."""

    def __init__(self, url: str) -> None:
        self.url, self.seq, self.hold = url, None, None

    def arm(self, seq: int) -> None:
        self.seq = seq

    def now_us(self) -> int:
        if self.seq is not None:
            seq, self.seq = self.seq, None
            with Ledger.open(self.url) as other:
                self.hold = other.hold_add(Ask("litigation", "case 9"), seqs=[seq])
        return SystemClock().now_us()


def test_a_hold_appended_while_a_redaction_is_planned_blocks_it(db_url, tmp_path):
    Ledger.init(db_url, origin="test.example/race").close()
    clock = _HoldWhenPlanned(db_url)
    with Ledger.open(db_url, clock=clock) as lg:
        seqs = _seed(lg)
        target = seqs["alice"][1]
        clock.arm(target)
        with pytest.raises(RedactionRefused) as e:
            lg.redact(ASK, seqs=[target, seqs["bob"][0]], keyring=ledger_keyring(lg, tmp_path))
        assert clock.hold is not None  # the race happened
        assert e.value.code == "entry_on_hold" and e.value.detail["hold_seq"] == clock.hold
        # nothing erased, no redaction entry: the hold is the last entry
        assert lg.get(target)["payloads"]["query"]["text"] is not None
        assert lg.get(seqs["bob"][0])["payloads"]["query"]["text"] is not None
        assert lg.head()["size"] == clock.hold + 1
        report = lg.audit(AuditOptions())
        assert report.findings == () and report.outcome == "passed"


# -- a hold that cannot be read (issue 34, item 2) ---------------------------------------
def _break_order(url: str, hold_seq: int, how: str) -> None:
    from tests import tamper

    with tamper.unlocked(url, ("payloads",)) as c:
        if how == "deleted":
            c.execute(text(f"DELETE FROM payloads WHERE pid = {hold_seq * 8}"))
        else:
            c.execute(text(f"UPDATE payloads SET data = :d WHERE pid = {hold_seq * 8}"),
                      {"d": b'{"format": "ledger-hold/1", "garbage": true}'})


@pytest.mark.parametrize("how", ["deleted", "corrupted"])
def test_an_unreadable_hold_blocks_erasure_of_every_earlier_entry(ledger, ring, db_url, how):
    seqs = _seed(ledger)
    hold = ledger.hold_add(Ask("litigation", "case 42"), seqs=[seqs["alice"][0]])
    later = ledger.append_many(_subs(1, "zoe", 30))[0].seq
    _break_order(db_url, hold, how)
    size = ledger.head()["size"]
    for target in (seqs["alice"][0], seqs["bob"][1]):  # held, and not named by the hold
        with pytest.raises(RedactionRefused) as e:
            ledger.redact(ASK, keyring=ring, seqs=[target])
        assert e.value.code == "entry_on_hold" and e.value.detail["hold_seq"] == hold
        assert e.value.detail["hold_unreadable"] is True
        assert "cannot be read" in e.value.message
    assert ledger.head()["size"] == size
    assert ledger.get(seqs["bob"][1])["payloads"]["query"]["text"] is not None
    # retention skips what the broken hold may cover
    clock_policy = parse_retention(json.dumps({"format": "ledger-retention/1", "rules": [
        {"payloads": ["meta"], "erase_after_days": 0}]}))
    run = ledger.apply_retention(clock_policy, dry_run=True)
    assert run.held == len(seqs["alice"]) + len(seqs["bob"])
    assert [line["seq"] for line in run.lines] == [later]
    # an entry appended after the hold is not covered by it
    assert ledger.redact(ASK, keyring=ring, seqs=[later], payloads=["meta"]).redaction_seqs
    # the way out: release the broken hold (recorded), then the erasure goes through
    ledger.hold_release(Ask("order lost; re-issued as a new hold"), hold)
    assert ledger.redact(ASK, keyring=ring, seqs=[seqs["bob"][1]], payloads=["meta"]).redaction_seqs


def test_the_audit_names_an_erasure_made_while_a_hold_was_unreadable(ledger, db_url):
    seqs = _seed(ledger)
    hold = ledger.hold_add(Ask("litigation"), seqs=[seqs["alice"][0]])
    _break_order(db_url, hold, "deleted")
    # an erasure the fixed code refuses, written as the old code wrote it
    from ledger.core.redaction import build_request
    from ledger.ops.append import commit_redaction
    from ledger.ops.custody import prepare_redaction

    req = build_request({seqs["bob"][0]: ["meta"]}, "r")
    p, pairs = prepare_redaction(req, ASK)
    rseq = commit_redaction(ledger.ctx, [p], [pairs])[0].result.seq
    report = ledger.audit(AuditOptions())
    codes = {(f.seq, f.code) for f in report.findings}
    assert (rseq, "redaction_under_unreadable_hold") in codes
    assert (hold, "payload_missing") in codes
    assert report.outcome == "failed"


# -- redactions are signed by the ledger key (issue 34, item 3) ---------------------------
def _forge(lg, targets, *, signer=None, reqs=None):
    """What anyone who can write the database can do: append a redaction entry (custodian
    role) and erase the payloads it names, signed by ``signer`` or not at all."""
    from ledger.core.redaction import build_request
    from ledger.crypto.redaction_sign import sign_request
    from ledger.ops.append import commit_redaction
    from ledger.ops.custody import prepare_redaction

    req = build_request(targets, "forged") if reqs is None else reqs
    if signer is not None:
        req = sign_request(signer, lg.meta.ledger_id, req)
    p, pairs = prepare_redaction(req, Ask("forged", role="custodian", producer="mallory"))
    return commit_redaction(lg.ctx, [p], [pairs])[0].result.seq


def _jwks(ring, tmp_path):
    path = tmp_path / "ledger-jwks.json"
    path.write_text(json.dumps({"keys": ring.jwks}))
    return str(path)


def test_a_redaction_is_signed_and_the_audit_checks_it(ledger, ring, tmp_path):
    seqs = _seed(ledger)
    out = ledger.redact(ASK, seqs=[seqs["alice"][0]], payloads=["query"], keyring=ring)
    doc = json.loads(ledger.get(out.redaction_seqs[0])["payloads"]["request"]["text"])
    assert doc["format"] == "ledger-redaction/2" and doc["signature"].count(".") == 2
    signed = ledger.audit(AuditOptions(keys=(_jwks(ring, tmp_path),)))
    assert signed.findings == () and signed.outcome == "unverified"
    assert _abstained(signed) == [(seqs["alice"][0], "redacted")]
    unkeyed = ledger.audit(AuditOptions())  # without --key the signature is not checked
    assert (out.redaction_seqs[0], "no_ledger_key") in _abstained(unkeyed)
    assert unkeyed.findings == ()
    # no keyring, no redaction (nothing written)
    size = ledger.head()["size"]
    with pytest.raises(UsageError) as e:
        ledger.redact(ASK, seqs=[seqs["bob"][0]])
    assert e.value.code == "no_signing_key" and ledger.head()["size"] == size


def test_a_redaction_written_without_the_ledger_key_fails_the_audit(ledger, ring, tmp_path):
    from ledger.core.redaction import build_request
    from ledger.crypto.tokens import ledger_signer

    seqs = _seed(ledger)
    keys = (_jwks(ring, tmp_path),)
    other = ledger_keyring(ledger, tmp_path / "mallory-keys")  # a key of the same name
    forged = _forge(ledger, {seqs["bob"][0]: ["query"]},
                    signer=ledger_signer(other, ledger.meta.origin))
    report = ledger.audit(AuditOptions(keys=keys))
    assert [(f.seq, f.code, f.cls) for f in report.findings] == \
        [(forged, "redaction_signature_invalid", "signature_invalid")]
    assert report.outcome == "failed" and report.summary.failed == 1
    # a lawful signature lifted onto other targets: the claims no longer match
    lawful = ledger.redact(ASK, seqs=[seqs["alice"][0]], payloads=["meta"], keyring=ring)
    doc = json.loads(ledger.get(lawful.redaction_seqs[0])["payloads"]["request"]["text"])
    lifted = build_request({seqs["bob"][1]: ["query"]}, doc["reason"]).signed(doc["signature"])
    moved = _forge(ledger, {}, reqs=lifted)
    codes = {(f.seq, f.code) for f in ledger.audit(AuditOptions(keys=keys)).findings}
    assert (moved, "redaction_signature_invalid") in codes
    assert (lawful.redaction_seqs[0], "redaction_signature_invalid") not in codes


def test_unsigned_redactions_are_old_data_until_a_signed_one_exists(ledger, ring, tmp_path):
    seqs = _seed(ledger)
    keys = (_jwks(ring, tmp_path),)
    old = _forge(ledger, {seqs["alice"][0]: ["query"]})  # as written before signing
    report = ledger.audit(AuditOptions(keys=keys))
    assert report.findings == () and report.outcome == "unverified"
    assert (old, "redaction_unsigned") in _abstained(report)
    assert (seqs["alice"][0], "redacted") in _abstained(report)
    ledger.redact(ASK, seqs=[seqs["alice"][1]], payloads=["meta"], keyring=ring)
    late = _forge(ledger, {seqs["bob"][0]: ["query"]})  # unsigned after a signed one
    report = ledger.audit(AuditOptions(keys=keys))
    assert [(f.seq, f.code) for f in report.findings] == [(late, "redaction_unsigned")]
    assert (old, "redaction_unsigned") in _abstained(report)
    assert report.outcome == "failed"


def test_an_audit_unverified_only_by_redactions_is_a_since_last_baseline(ledger, ring,
                                                                          tmp_path):
    """After an erasure no audit can pass; a run whose only non-verified items are the
    erased payloads still sets the --since-last baseline and asks for no review."""
    _seed(ledger)
    ledger.redact(ASK, keyring=ring, subject="alice", payloads=["query"])
    keys = (_jwks(ring, tmp_path),)  # the redaction is signed: checked with the ledger's key
    first = ledger.audit(AuditOptions(record=True, keys=keys))
    assert first.outcome == "unverified" and first.findings == ()
    assert {a.reason for a in first.abstentions} == {"redacted"}
    assert "human review" not in first.summary_line()
    run = json.loads(ledger.get(first.recorded_seq)["payloads"]["report"]["text"])
    assert (run["format"], run["abstentions"], run["redacted"]) == \
        ("ledger-audit-run/2", 3, 3)
    ledger.append_many(_subs(2, "carol", 20), producer="p")
    second = ledger.audit(AuditOptions(since_last=True, record=True, keys=keys))
    assert second.range.start == first.range.end  # not 0 again
    assert second.findings == () and second.outcome == "passed"
    # an abstention that is not an erasure is no baseline, and asks for review
    key, jwk = new_es256_key()
    iat = SystemClock().now_us() // 1_000_000
    ledger.append_many([attested(0, key, ISSUER, "did:test:issuer#untrusted", iat)],
                       producer="p")
    third = ledger.audit(AuditOptions(since_last=True, record=True, keys=keys))
    assert third.range.start == second.range.end
    assert {a.reason for a in third.abstentions} == {"unknown_issuer_key"}
    assert "(human review needed)" in third.summary_line()
    fourth = ledger.audit(AuditOptions(since_last=True, keys=keys))
    assert fourth.range.start == second.range.end  # third set no baseline
