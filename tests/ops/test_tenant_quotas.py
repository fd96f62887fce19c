"""Tenant entry quotas (docs/tenants.md, "Quotas"): a producer's result beyond its tenant's
quota is rejected with tenant_quota_exceeded and nothing of it is stored; other tenants, the
tenant's custody entries and an operator without quotas are unaffected.  Both engines, both
append paths (PostgreSQL's one-statement single append and the batch path)."""

from __future__ import annotations

import random

import pytest
from sqlalchemy import text

from ledger.demo.samples import math_verified
from ledger.errors import QuotaExceeded, UsageError
from ledger.facade import Ledger
from ledger.ops.audit import AuditOptions
from ledger.ops.custody import Ask
from ledger.ops.limits import ENV_TENANT_QUOTAS, TenantQuotas
from tests.keyrings import ledger_keyring


def _subs(n: int, tag: str) -> list[dict]:
    out = []
    for i in range(n):
        s = math_verified(i, random.Random(f"{tag}{i}"))
        s["subject"] = f"{tag}-{i}"
        out.append(s)
    return out


def _count(lg: Ledger, tenant: str) -> int:
    with lg.engine.connect() as conn:
        return int(conn.execute(text("SELECT count(*) FROM entries WHERE tenant = :t"),
                                {"t": tenant}).scalar_one())


def test_a_tenant_at_its_quota_gets_no_more_results(db_url, tmp_path):
    quotas = TenantQuotas({"acme": 3, "zero": 0})
    with Ledger.init(db_url, quotas=quotas) as lg:
        subs = _subs(8, "q")
        assert lg.append(subs[0], tenant="acme").ok  # single: one statement on PostgreSQL
        assert all(r.ok for r in lg.append_many(subs[1:3], tenant="acme"))
        head = lg.head()["size"]
        refused = lg.append(subs[3], tenant="acme")
        assert not refused.ok and refused.error["code"] == "tenant_quota_exceeded"
        assert refused.error["field"] == "tenant"
        assert refused.error["detail"] == {"quota": 3, "entries": 3}
        assert lg.head()["size"] == head and _count(lg, "acme") == 3  # nothing stored
        # a batch at the quota: every item refused
        out = lg.append_many(subs[4:6], tenant="acme")
        assert [r.error["code"] for r in out] == ["tenant_quota_exceeded"] * 2  # type: ignore[index]
        zero = lg.append(subs[6], tenant="zero")
        assert not zero.ok and zero.error["code"] == "tenant_quota_exceeded"
        # other tenants have no quota
        assert lg.append(subs[7], tenant="globex").ok and lg.append(subs[6]).ok
        # the refused results went to the quarantine with their error, as any rejected item
        assert lg.quarantine_status()["rows"] >= 4
        # custody is never refused by a quota: the tenant erases what it holds
        ring = ledger_keyring(lg, tmp_path / "keys")
        seq = [r for r in _seqs(lg, "acme")][0]
        red = lg.redact(Ask("GDPR Art. 17", "DSR-1", "dpo@example.org", "custodian", "dpo",
                            "acme"), keyring=ring, seqs=[seq], payloads=["query"])
        assert red.redaction_seqs and _count(lg, "acme") == 4
        report = lg.audit(AuditOptions())
        assert report.findings == () and report.summary.failed == 0
        assert lg.audit_tenant("acme").findings == ()


def _seqs(lg: Ledger, tenant: str) -> list[int]:
    with lg.engine.connect() as conn:
        return [int(r[0]) for r in conn.execute(text(
            "SELECT seq FROM entries WHERE tenant = :t AND kind = 'result' ORDER BY seq"),
            {"t": tenant})]


def test_a_batch_across_the_quota_stores_what_fits(db_url):
    with Ledger.init(db_url, quotas=TenantQuotas({"acme": 2})) as lg:
        out = lg.append_many(_subs(4, "b"), tenant="acme")
        assert [r.ok for r in out] == [True, True, False, False]
        assert [r.tseq for r in out if r.ok] == [0, 1]
        assert _count(lg, "acme") == 2


def test_quotas_read_from_the_environment(monkeypatch, db_url):
    monkeypatch.setenv(ENV_TENANT_QUOTAS, "acme=1, globex=5")
    assert TenantQuotas.from_env() == TenantQuotas({"acme": 1, "globex": 5})
    with Ledger.init(db_url) as lg:  # every ledger opened in the process
        subs = _subs(2, "e")
        assert lg.append(subs[0], tenant="acme").ok
        assert lg.append(subs[1], tenant="acme").error["code"] == "tenant_quota_exceeded"


@pytest.mark.parametrize("text", ["acme", "acme=x", "acme=-1", "Acme=1", "acme=1,acme=2",
                                  "=3", "acme=1.5", "acme=true"])
def test_a_bad_quota_setting_names_the_variable(text):
    with pytest.raises(UsageError) as e:
        TenantQuotas.parse(text)
    assert e.value.field == ENV_TENANT_QUOTAS
    with pytest.raises(UsageError):
        TenantQuotas({"acme": True})  # type: ignore[dict-item]


def test_the_error_is_a_403():
    assert QuotaExceeded("x").http_status == 403 and QuotaExceeded("x").exit_code == 2
    assert TenantQuotas.parse(" ") == TenantQuotas()
