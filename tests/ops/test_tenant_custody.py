"""Redaction, legal holds and retention per tenant, on SQLite and PostgreSQL (``db_url``):
an ``Ask`` with a tenant reaches only that tenant's entries, answers another tenant's seq
exactly as a missing one, and writes its redaction and hold entries into its tenant's chain
(docs/tenants.md, "Custody per tenant")."""

from __future__ import annotations

import json
import random

import pytest
from sqlalchemy import create_engine, text

from ledger.clock import FixedClock
from ledger.core.retention import DAY_US, parse_retention
from ledger.demo.samples import math_verified
from ledger.errors import Forbidden, LedgerError, NotFound, RedactionRefused, UsageError
from ledger.facade import Ledger
from ledger.ops.audit import AuditOptions
from ledger.ops.custody import Ask
from tests.keyrings import ledger_keyring

A, B = "acme", "globex"
MISSING = 10**6


def _subs(n: int, subject: str, start: int = 0) -> list[dict]:
    out = []
    for i in range(start, start + n):
        s = math_verified(i, random.Random(subject + str(i)))
        s["subject"] = subject
        out.append(s)
    return out


def ask(tenant: str | None, reason: str = "GDPR Art. 17") -> Ask:
    return Ask(reason, "DSR-1", "dpo@example.org", "custodian", "dpo", tenant)


def tenant_of(url: str, seq: int) -> str:
    eng = create_engine(url.replace("postgresql://", "postgresql+psycopg://", 1))
    try:
        with eng.connect() as conn:
            return str(conn.execute(text("SELECT tenant FROM entries WHERE seq = :s"),
                                    {"s": seq}).scalar_one())
    finally:
        eng.dispose()


@pytest.fixture
def ledger(db_url):
    lg = Ledger.init(db_url, origin="test.example/tenant-custody")
    yield lg
    lg.close()


@pytest.fixture
def ring(ledger, tmp_path):
    return ledger_keyring(ledger, tmp_path / "keys")


def _seed(lg: Ledger) -> dict[str, list[int]]:
    """acme, globex and default entries, interleaved; the subject "shared" in both tenants."""
    out: dict[str, list[int]] = {A: [], B: [], "default": []}
    for i in range(2):
        for tenant in (A, B, "default"):
            subs = _subs(1, "shared" if tenant != "default" else "d", 10 * i)
            out[tenant] += [r.seq for r in lg.append_many(subs, producer="p", tenant=tenant)]
    return out


def _same(x: LedgerError, y: LedgerError, x_seq: int, y_seq: int) -> None:
    """Two refusals identical but for the seq each named."""
    assert type(x) is type(y)
    assert (x.code, x.field) == (y.code, y.field)
    assert x.message.replace(str(x_seq), "N") == y.message.replace(str(y_seq), "N")
    assert json.dumps(x.to_dict()).replace(str(x_seq), "N") == \
        json.dumps(y.to_dict()).replace(str(y_seq), "N")


def _refusal(fn, *args, **kw) -> LedgerError:
    with pytest.raises(LedgerError) as e:
        fn(*args, **kw)
    return e.value


def test_a_tenant_redacts_its_own_entry_into_its_chain(ledger, ring, db_url):
    seqs = _seed(ledger)
    out = ledger.redact(ask(A), keyring=ring, seqs=[seqs[A][0]], payloads=["query"])
    assert [t.seq for t in out.targets] == [seqs[A][0]]
    rseq = out.redaction_seqs[0]
    assert tenant_of(db_url, rseq) == A  # the redaction entry joined acme's chain
    assert ledger.get(seqs[A][0])["payloads"]["query"]["text"] is None
    assert ledger.get(seqs[B][0])["payloads"]["query"]["text"] is not None
    report = ledger.audit(AuditOptions())
    assert report.summary.failed == 0 and report.findings == ()
    for tenant in (A, B):
        assert ledger.audit_tenant(tenant).findings == ()


def test_another_tenants_seq_is_answered_as_a_missing_one(ledger, ring):
    seqs = _seed(ledger)
    foreign = seqs[B][0]
    for dry in (True, False):
        kw = {"keyring": ring, "dry_run": dry}
        _same(_refusal(ledger.redact, ask(A), seqs=[foreign], **kw),
              _refusal(ledger.redact, ask(A), seqs=[MISSING], **kw), foreign, MISSING)
        # mixed with its own entry: refused all the same, nothing written
        _same(_refusal(ledger.redact, ask(A), seqs=[seqs[A][0], foreign], **kw),
              _refusal(ledger.redact, ask(A), seqs=[seqs[A][0], MISSING], **kw),
              foreign, MISSING)
    _same(_refusal(ledger.hold_add, ask(A), seqs=[foreign]),
          _refusal(ledger.hold_add, ask(A), seqs=[MISSING]), foreign, MISSING)
    assert isinstance(_refusal(ledger.redact, ask(A), seqs=[MISSING], keyring=ring), NotFound)
    # a default entry is another tenant's too
    _same(_refusal(ledger.redact, ask(A), seqs=[seqs["default"][0]], keyring=ring),
          _refusal(ledger.redact, ask(A), seqs=[MISSING], keyring=ring),
          seqs["default"][0], MISSING)
    assert ledger.get(foreign)["payloads"]["query"]["text"] is not None
    assert ledger.holds() == {}


def test_a_subject_resolves_to_the_tenants_entries_only(ledger, ring):
    seqs = _seed(ledger)
    out = ledger.redact(ask(A), keyring=ring, subject="shared", dry_run=True)
    assert [t.seq for t in out.targets] == seqs[A]
    # a subject only another tenant has: as a subject nobody has
    only_default = _refusal(ledger.redact, ask(A), subject="d", keyring=ring)
    nobody = _refusal(ledger.redact, ask(A), subject="nobody", keyring=ring)
    assert (only_default.code, only_default.field) == (nobody.code, nobody.field)
    assert only_default.message.replace("'d'", "S") == nobody.message.replace("'nobody'", "S")
    hold = ledger.hold_add(ask(B), subject="shared")
    assert ledger.holds() == {hold: seqs[B]}


def test_holds_per_tenant(ledger, ring, db_url):
    seqs = _seed(ledger)
    ha = ledger.hold_add(ask(A), seqs=[seqs[A][0]])
    hb = ledger.hold_add(ask(B), seqs=[seqs[B][0]])
    assert tenant_of(db_url, ha) == A and tenant_of(db_url, hb) == B
    # an operator-level hold over entries of every tenant
    hop = ledger.hold_add(ask(None), seqs=[seqs[A][1], seqs[B][1], seqs["default"][0]])
    assert tenant_of(db_url, hop) == "default"
    assert ledger.holds(A) == {ha: [seqs[A][0]], hop: [seqs[A][1]]}
    assert ledger.holds(B) == {hb: [seqs[B][0]], hop: [seqs[B][1]]}
    assert ledger.holds("initech") == {}
    assert ledger.holds() == {ha: [seqs[A][0]], hb: [seqs[B][0]],
                              hop: sorted([seqs[A][1], seqs[B][1], seqs["default"][0]])}
    # A's hold blocks A's redaction; so does the operator's hold over A's entry
    for seq in (seqs[A][0], seqs[A][1]):
        e = _refusal(ledger.redact, ask(A), seqs=[seq], keyring=ring)
        assert isinstance(e, RedactionRefused) and e.code == "entry_on_hold"
    # B's hold, released by A: as a seq that is no hold at all
    _same(_refusal(ledger.hold_release, ask(A), hb),
          _refusal(ledger.hold_release, ask(A), MISSING), hb, MISSING)
    _same(_refusal(ledger.hold_release, ask(A), seqs[B][0]),
          _refusal(ledger.hold_release, ask(A), MISSING), seqs[B][0], MISSING)
    # the operator's hold, which A sees: refused, not denied
    e = _refusal(ledger.hold_release, ask(A), hop)
    assert isinstance(e, Forbidden) and e.code == "tenant_scope" and e.field == "hold_seq"
    # the tenant releases its own hold, into its chain, then redacts
    rel = ledger.hold_release(ask(A), ha)
    assert tenant_of(db_url, rel) == A
    assert ledger.holds(A) == {hop: [seqs[A][1]]}
    assert ledger.redact(ask(A), keyring=ring, seqs=[seqs[A][0]]).redaction_seqs
    # the operator-level custodian still works across tenants
    assert ledger.hold_release(ask(None), hop) is not None
    out = ledger.redact(ask(None), keyring=ring, seqs=[seqs[A][1], seqs[B][1]])
    assert [t.seq for t in out.targets] == [seqs[A][1], seqs[B][1]]
    assert tenant_of(db_url, out.redaction_seqs[0]) == "default"
    assert ledger.audit(AuditOptions()).findings == ()
    for tenant in (A, B):
        assert ledger.audit_tenant(tenant).findings == ()


def test_bad_tenant_in_an_ask_is_a_usage_error(ledger, ring):
    for bad in ("", "Acme", "a" * 64, "a/b"):
        e = _refusal(ledger.redact, ask(bad), seqs=[0], keyring=ring)
        assert isinstance(e, UsageError) and e.field == "tenant", bad
        e = _refusal(ledger.hold_add, ask(bad), seqs=[0])
        assert isinstance(e, UsageError) and e.field == "tenant", bad
    e = _refusal(ledger.apply_retention, parse_retention(json.dumps(
        {"format": "ledger-retention/1", "rules": [{"payloads": ["query"],
                                                   "erase_after_days": 1}]})),
        tenant="Bad!", keyring=ring)
    assert isinstance(e, UsageError) and e.field == "tenant"


def test_retention_per_tenant(db_url, tmp_path):
    clock = FixedClock(1_800_000_000_000_000, step_us=1)
    Ledger.init(db_url, origin="test.example/tenant-retention", clock=clock).close()
    policy = parse_retention(json.dumps({"format": "ledger-retention/1", "rules": [
        {"payloads": ["query"], "erase_after_days": 30}]}))
    with Ledger.open(db_url, clock=clock) as lg:
        seqs = _seed(lg)
        ring = ledger_keyring(lg, tmp_path / "keys")
        hold = lg.hold_add(ask(A), seqs=[seqs[A][1]])
        clock.advance(31 * DAY_US)
        dry = lg.apply_retention(policy, dry_run=True, tenant=A)
        assert (dry.entries, dry.held, dry.scanned) == (1, 1, 2)
        run = lg.apply_retention(policy, keyring=ring, tenant=A, role="custodian")
        assert [x["seq"] for x in run.lines] == [seqs[A][0]]
        assert [tenant_of(db_url, s) for s in run.redaction_seqs] == [A]
        for s in seqs[B] + seqs["default"] + [seqs[A][1]]:
            assert lg.get(s)["payloads"]["query"]["text"] is not None
        # the operator's run: every tenant's entries left (the held one skipped)
        run = lg.apply_retention(policy, keyring=ring)
        assert sorted(x["seq"] for x in run.lines) == sorted(seqs[B] + seqs["default"])
        assert [tenant_of(db_url, s) for s in run.redaction_seqs] == ["default"]
        assert lg.holds(A) == {hold: [seqs[A][1]]}
        assert lg.audit(AuditOptions()).findings == ()
        for tenant in (A, B):
            assert lg.audit_tenant(tenant).findings == ()


def test_the_audit_flags_a_tenant_hold_naming_another_tenants_entry(ledger, ring):
    """Written past the custody checks (as a store-level writer could): a hold in acme's
    chain that names a globex entry is hold_target_invalid, and the finding does not name
    globex; the operator's hold (default chain) over the same entry is no finding."""
    from ledger.core.redaction import build_hold
    from ledger.ops.custody.redaction import _append_hold

    seqs = _seed(ledger)
    ctx = ledger.ctx
    foreign = _append_hold(ctx, build_hold("add", "litigation", targets=[seqs[B][0]]), ask(A))
    own = _append_hold(ctx, build_hold("add", "litigation", targets=[seqs[A][0]]), ask(A))
    operator = _append_hold(ctx, build_hold("add", "litigation", targets=[seqs[B][1]]), ask(None))
    report = ledger.audit(AuditOptions())
    bad = [f for f in report.findings if f.code == "hold_target_invalid"]
    assert [f.seq for f in bad] == [foreign]
    assert B not in json.dumps(bad[0].to_json())
    assert bad[0].expected == A
    assert own not in {f.seq for f in report.findings}
    assert operator not in {f.seq for f in report.findings}
