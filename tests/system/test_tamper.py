"""The tamper suite: what a database superuser can change, and what the audit says.

Every case switches the append-only triggers off with raw SQL (``tests.tamper``),
changes history, switches them back on, and checks that the audit finds it, names
the first affected seq and the class, that ``run_audit`` ends ``failed`` and that
``ledger audit`` exits 1 — on SQLite and PostgreSQL.  The two cases the chain alone
cannot catch (a self-consistent rewrite with the head moved along) are documented
as such: signed checkpoints kept outside the database exist for them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError

from ledger import Ledger
from ledger.cli.main import cli
from ledger.clock import FixedClock
from ledger.core.canonical import canonical_json
from ledger.crypto.trust import TrustStore
from ledger.demo.samples import realistic
from ledger.ops.audit import AuditOptions, AuditReport, run_audit
from ledger.ops.trust import trust_events
from ledger.ops.trust_store import load_trust_store
from tests import tamper as T

DATA = Path(__file__).resolve().parents[1] / "data"

BATCH = 6
N = 36  # realistic rows, appended in batches of BATCH (one recorded_at per batch)


def build(url: str, n: int = N) -> Ledger:
    L = Ledger.init(url, clock=FixedClock(1_800_000_000_000_000, step_us=1000))
    for i in range(0, n, BATCH):
        assert all(r.ok for r in L.append_many(realistic(BATCH, start=i)))
    return L


def build_attested(url: str, n: int = 6) -> Ledger:
    clock = FixedClock(T.FIXTURE_TIME_US, step_us=1000)
    L = Ledger.init(url, clock=clock)
    L.trust_issuer(T.ISSUER, T.JWKS)
    assert all(r.ok for r in L.append_many([T.signed_sub(i, clock.now_us())
                                            for i in range(n)]))
    return L


def audit(url: str) -> AuditReport:
    with Ledger.open(url) as L:
        return run_audit(L, AuditOptions())


def cli_audit(url: str) -> tuple[int, AuditReport, str]:
    res = CliRunner().invoke(cli, ["--db", url, "audit", "--json-report", "-"])
    assert not res.exception or isinstance(res.exception, SystemExit), res.exception
    return res.exit_code, AuditReport.from_json(json.loads(res.stdout)), res.stderr


def codes(report: AuditReport) -> list[tuple[str, int, str]]:
    return [(f.code, f.seq, f.cls) for f in report.findings]


def detected(url: str, code: str, seq: int, cls: str) -> AuditReport:
    """The audit's first finding is (code, seq, cls); run_audit fails; the CLI exits 1
    and reports the same findings."""
    report = audit(url)
    assert report.outcome == "failed"
    assert report.findings, "nothing found"
    first = report.findings[0]
    assert (first.code, first.seq, first.cls) == (code, seq, cls), codes(report)
    exit_code, cli_report, stderr = cli_audit(url)
    assert exit_code == 1
    assert codes(cli_report) == codes(report)
    assert f"  seq {seq}: {cls} {code}: " in stderr
    return report


# =============================================================================
# The triggers themselves
# =============================================================================

def test_triggers_stop_raw_changes_before_and_after_an_unlocked_block(db_url):
    build(db_url, 6).close()

    def refused(sql: str) -> bool:
        try:
            with T.connect(db_url) as conn:
                conn.execute(text(sql))
        except DBAPIError as exc:
            assert "append-only" in str(exc)
            return True
        return False

    changes = ["UPDATE entries SET status = 'BLOCKED' WHERE seq = 0",
               "DELETE FROM entries WHERE seq = 5",
               "UPDATE payloads SET data = data"]
    assert all(refused(sql) for sql in changes)
    with T.unlocked(db_url) as conn:
        conn.execute(text("UPDATE entries SET subject = subject WHERE seq = 0"))
    assert all(refused(sql) for sql in changes)  # restored exactly
    assert audit(db_url).outcome == "passed"


# =============================================================================
# Payloads and columns
# =============================================================================

def test_one_byte_of_an_evidence_preimage(db_url):
    build(db_url).close()
    seq = 6  # math VERIFIED: its evidence preimage is used by this row only
    with T.unlocked(db_url) as conn:
        digest = T.row(conn, seq).preimage_digest
        assert T.uses_of(conn, digest) == 1
        data = bytearray(T.payload(conn, digest))
        data[10] ^= 0x01
        T.set_payload(conn, digest, bytes(data))
        want = T.digest_for(conn, seq, "preimage", bytes(data))  # v2: the salted commitment
    report = detected(db_url, "payload_digest_mismatch", seq, "payload_modified")
    (f,) = report.findings
    assert f.expected == digest and f.actual == want
    assert report.summary.to_json() == {"rows": N, "verified": N - 1, "failed": 1, "unverified": 0}


def test_a_status_column(db_url):
    build(db_url).close()
    with T.unlocked(db_url) as conn:
        assert T.row(conn, 7).status == "VERIFIED"
        T.update_entry(conn, 7, status="BLOCKED")
    report = detected(db_url, "column_mismatch", 7, "payload_modified")
    (f,) = report.findings
    assert (f.expected, f.actual) == ("VERIFIED", "BLOCKED")


def test_an_agent_message_inside_the_stored_result(db_url):
    build(db_url).close()
    seq = 12
    with T.unlocked(db_url) as conn:
        digest = T.row(conn, seq).doc_digest
        assert T.uses_of(conn, digest) == 1
        doc = T.payload(conn, digest)
        assert b"Claim verified" in doc
        T.set_payload(conn, digest, doc.replace(b"Claim verified", b"Claim rejected"))
    report = detected(db_url, "payload_digest_mismatch", seq, "payload_modified")
    assert len(report.findings) == 1


def test_an_envelope_byte(db_url):
    build(db_url).close()
    with T.unlocked(db_url) as conn:
        env = bytes(T.row(conn, 9).envelope)
        # v2: the subject is a committed payload; one byte of its commitment is changed
        at = env.index(b'"subject":"sha256:') + len(b'"subject":"sha256:')
        flipped = b"1" if env[at:at + 1] != b"1" else b"2"
        T.update_entry(conn, 9, envelope=env[:at] + flipped + env[at + 1:])
    detected(db_url, "envelope_hash_mismatch", 9, "payload_modified")


def test_a_recorded_time(db_url):
    build(db_url).close()
    with T.unlocked(db_url) as conn:
        T.update_entry(conn, 20, recorded_at=T.row(conn, 20).recorded_at + 1)
    report = detected(db_url, "entry_hash_mismatch", 20, "payload_modified")
    # rows 21..23 share row 20's original batch time, now earlier than row 20's
    assert codes(report) == [("entry_hash_mismatch", 20, "payload_modified")] + [
        ("time_reversed", s, "reordered") for s in (21, 22, 23)]


# =============================================================================
# Rows deleted, reordered, replaced, added
# =============================================================================

def test_a_middle_row_deleted(db_url):
    build(db_url).close()
    with T.unlocked(db_url) as conn:
        conn.execute(text("DELETE FROM entries WHERE seq = 17"))
    report = detected(db_url, "seq_gap", 17, "deleted")
    assert codes(report) == [("seq_gap", 17, "deleted")]
    assert report.summary.rows == N - 1


def _swap(url: str, i: int, j: int) -> None:
    with T.unlocked(url) as conn:
        a, b = T.row(conn, i), T.row(conn, j)
        cols = [c for c in a._mapping if c != "seq"]
        T.update_entry(conn, i, **{c: b._mapping[c] for c in cols})
        T.update_entry(conn, j, **{c: a._mapping[c] for c in cols})
        T.move_payloads(conn, i, j)  # payloads are laid out by seq: they move too


def test_two_rows_swapped_within_one_batch(db_url):
    """Same recorded_at: each row is recognised as hashed at the other's seq, and the
    row after the pair no longer links to its predecessor."""
    build(db_url).close()
    _swap(db_url, 7, 8)
    report = detected(db_url, "entry_out_of_place", 7, "reordered")
    assert codes(report) == [("entry_out_of_place", 7, "reordered"),
                             ("entry_out_of_place", 8, "reordered"),
                             ("broken_link", 9, "forked")]
    assert [(f.expected, f.actual) for f in report.findings[:2]] == [(7, 8), (8, 7)]


def test_two_rows_swapped_across_batches(db_url):
    build(db_url).close()
    _swap(db_url, 11, 12)  # 11 is the last of a batch, 12 the first of the next
    report = detected(db_url, "entry_out_of_place", 11, "reordered")
    assert codes(report) == [("entry_out_of_place", 11, "reordered"),
                             ("entry_out_of_place", 12, "reordered"),
                             ("time_reversed", 12, "reordered"),
                             ("broken_link", 13, "forked")]


def test_a_row_replaced_by_a_self_consistent_forgery(db_url):
    """Row k replaced by another result with its envelope, body and entry hash correctly
    recomputed (linked to k-1): only the next row's link betrays it."""
    build(db_url).close()
    k = 14
    with T.unlocked(db_url) as conn:
        old = T.row(conn, k)
        cols, blobs = T.forged_result(T.ledger_id(conn), realistic(1, start=5000)[0])
        T.add_payloads(conn, blobs)
        T.write_linked(conn, k, old.recorded_at, bytes(old.prev_hash), cols, replace=True)
        assert T.row(conn, k).subject == "req-005000"
    report = detected(db_url, "hash_not_committed", k, "forked")
    assert codes(report) == [("hash_not_committed", k, "forked")]


def test_unverifiable_row_with_a_proof_appended_with_a_valid_link(db_url):
    """Inserted behind the validator, correctly linked, head moved: the chain is whole,
    the contract check still fails it."""
    build(db_url).close()
    proof = "sha256:" + "ab" * 32
    doc = {"status": "UNVERIFIABLE", "agent_message": "could not decide",
           "developer_fields": {}, "proof_ref": proof, "is_authoritative": True}
    with T.connect(db_url) as conn:
        cols, blobs = T.forged_columns(
            T.ledger_id(conn), "result",
            {"engine": "math", "status": "UNVERIFIABLE", "proof_ref": proof,
             "att_verdict": "none"},
            {"result": canonical_json(doc)})
        seq = T.append_forged(conn, cols, blobs, move_head=True)
    assert seq == N
    report = detected(db_url, "proof_on_non_verified", N, "contract_violation")
    assert codes(report) == [("proof_on_non_verified", N, "contract_violation")]
    assert report.findings[0].actual == proof


def test_truncated_tail_without_moving_the_head(db_url):
    build(db_url).close()
    with T.unlocked(db_url) as conn:
        conn.execute(text("DELETE FROM entries WHERE seq >= 30"))
    report = detected(db_url, "seq_gap", 30, "deleted")
    assert ("head_beyond_entries", 30, "truncated") in codes(report)


def test_head_hash_rewritten(db_url):
    build(db_url).close()
    with T.connect(db_url) as conn:
        size, _, last = T.head(conn)
        T.set_head(conn, size, b"\x01" * 32, last)
    report = detected(db_url, "head_hash_mismatch", N - 1, "forked")
    assert report.summary.failed == 0  # a ledger-level finding, not a row


def test_head_row_deleted(db_url):
    """A deleted head row is a finding (no traceback), and every entry is still audited."""
    build(db_url).close()
    with T.unlocked(db_url) as conn:
        conn.execute(text("DELETE FROM head"))
    report = detected(db_url, "head_missing", 0, "truncated")
    assert report.summary.rows == N and report.summary.verified == N


# =============================================================================
# Attestations
# =============================================================================

def test_attestation_payload_rows_swapped(db_url):
    """(Revision 0005: no digest columns any more; the swap is of the payload rows.)"""
    build_attested(db_url).close()
    with T.unlocked(db_url) as conn:
        T.swap_payloads(conn, 2, 4, "attestation")
    report = detected(db_url, "payload_digest_mismatch", 2, "payload_modified")
    assert {(c, s) for c, s, k in codes(report) if k == "payload_modified"} == {
        ("payload_digest_mismatch", 2), ("payload_digest_mismatch", 4)}
    assert report.summary.failed == 2


def test_attestation_payload_rows_swapped_reports_no_false_deletion(db_url):
    build_attested(db_url).close()
    with T.unlocked(db_url) as conn:
        T.swap_payloads(conn, 2, 4, "attestation")
    assert {c for c, _, _ in codes(audit(db_url))} == {"payload_digest_mismatch"}


def test_attestations_swapped_in_the_envelopes_and_rechained(db_url):
    """Two rows' attestation digests swapped *in the hashed envelopes* and the whole
    chain recomputed: the chain is whole, but each token signs the other row's proof."""
    build_attested(db_url).close()
    with T.unlocked(db_url) as conn:
        a, b = T.row(conn, 2), T.row(conn, 4)
        for r, other in ((a, b), (b, a)):
            env = json.loads(bytes(r.envelope))
            env["payloads"]["attestation"] = other.attestation_digest
            T.update_entry(conn, r.seq, envelope=canonical_json(env))
        T.swap_payloads(conn, 2, 4, "attestation")  # v2: the salt goes with its bytes
        T.rechain(conn, 2)
    report = detected(db_url, "attestation_proof_mismatch", 2, "signature_invalid")
    assert codes(report) == [("attestation_proof_mismatch", 2, "signature_invalid"),
                             ("attestation_proof_mismatch", 4, "signature_invalid")]


def test_alg_none_token_inserted_with_a_valid_link_is_judged_by_the_audit(db_url):
    """A row that never went through the append check is still judged by the audit."""
    build_attested(db_url).close()
    sub = T.verified_sub(100)
    token = T.handmade({"alg": "none", "kid": T.KID, "typ": T.TYP},
                       T.claims_for(sub["result"]["proof_ref"], iat=T.FIXTURE_TIME_US // 10**6))
    with T.connect(db_url) as conn:
        cols, blobs = T.forged_result(T.ledger_id(conn), T.attested(sub, token))
        seq = T.append_forged(conn, cols, blobs, move_head=True)
    report = detected(db_url, "attestation_alg_not_allowed", seq, "signature_invalid")
    assert len(report.findings) == 1


def _rogue_trust_event(conn: Any, key: Any, kid: str) -> tuple[dict[str, Any], dict[str, bytes]]:
    (ev,) = trust_events(TrustStore(), T.ISSUER, T.jwks_of(key, kid), "rogue", None)
    return T.forged_columns(T.ledger_id(conn), "key_event", ev.fields, ev.payloads)


def test_rogue_key_inserted_behind_the_append_path(db_url):
    """A key_event row inserted at the tail, correctly linked, without moving the head."""
    build_attested(db_url).close()
    with T.connect(db_url) as conn:
        old_size = T.head(conn)[0]
        cols, blobs = _rogue_trust_event(conn, T.new_key(), T.ISSUER + "#rogue")
        assert T.append_forged(conn, cols, blobs, move_head=False) == old_size
    report = detected(db_url, "entries_beyond_head", old_size, "forked")
    assert codes(report) == [("entries_beyond_head", old_size, "forked")]
    assert report.summary.failed == 0  # the row itself is well formed
    _, _, stderr = cli_audit(db_url)
    assert "; 1 ledger-level finding(s)" in stderr


def test_rogue_key_appended_with_valid_link_needs_a_checkpoint(db_url):
    """The chain alone cannot catch this.

    A superuser appends a ``trust`` key_event for a rogue key with a correct link *and*
    moves the head, then appends results signed by that key through the ordinary
    path.  Every hash recomputes, the trust store folded from the chain really does
    contain the rogue key, so every check passes.  What exposes it is a signed
    checkpoint kept outside the database (issue 4): the ledger then has entries the
    checkpointed history never had, or — if the attacker rewrote the whole chain — a
    root inconsistent with the checkpoint.
    """
    clock = FixedClock(T.FIXTURE_TIME_US, step_us=1000)
    with Ledger.init(db_url, clock=clock) as L:
        L.trust_issuer(T.ISSUER, T.JWKS)
        L.append_many([T.signed_sub(i, clock.now_us()) for i in range(4)])
        rogue, kid = T.new_key(), T.ISSUER + "#rogue"
        with T.connect(db_url) as conn:
            cols, blobs = _rogue_trust_event(conn, rogue, kid)
            T.append_forged(conn, cols, blobs, move_head=True, recorded_at=clock.now_us())
        forged = L.append(T.signed_sub(99, clock.now_us(), key=rogue, kid=kid))
        assert forged.ok and L.get(forged.seq)["attestation_verdict"] == "valid"
    report = audit(db_url)
    assert report.outcome == "passed"
    assert report.summary.to_json() == {"rows": 7, "verified": 7, "failed": 0, "unverified": 0}
    assert cli_audit(db_url)[0] == 0


def test_a_modified_key_event_document_is_found_and_never_trusted(db_url):
    with Ledger.init(db_url) as L:
        L.append_many(realistic(3))
        jwks = json.loads((DATA / "qwed_issuer_jwks.json").read_text())
        L.trust_issuer("did:qwed:node:test", jwks)
        seq = L.head()["size"] - 1
        digest = L.get(seq)["payloads"]["event"]["digest"]
        with T.unlocked(db_url) as conn:
            T.set_payload(conn, digest, b'{"action":"trust"}')
        report = run_audit(L, AuditOptions())
        fresh = Ledger.open(db_url)
        try:
            assert fresh.trust_store().keys == []  # the modified event grants nothing
        finally:
            fresh.close()
    codes = {(f.code, f.seq) for f in report.findings}
    assert ("payload_digest_mismatch", seq) in codes


@pytest.mark.parametrize("doc", [b"not json", b"[]", b'{"action": "promote"}',
                                 b'{"action": "trust"}', b'{"action": "trust", "kid": 1}'],
                         ids=["not json", "not an object", "unknown action", "no fields",
                              "wrong types"])
def test_a_forged_key_event_that_is_no_event_grants_no_trust(db_url, doc):
    """A key_event row appended behind the append path whose document matches its digest
    but is not a usable event: the trust store skips it (the audit judges the row)."""
    with Ledger.init(db_url) as L:
        L.append_many(realistic(2))
        (ev,) = trust_events(TrustStore(), T.ISSUER, T.JWKS, None, None)
        with T.connect(db_url) as conn:
            cols, blobs = T.forged_columns(T.ledger_id(conn), "key_event", ev.fields,
                                           {name: doc for name in ev.payloads})
            T.append_forged(conn, cols, blobs, move_head=True)
        assert load_trust_store(L.engine).keys == []
    with Ledger.open(db_url) as fresh:
        assert fresh.trust_store().keys == []
