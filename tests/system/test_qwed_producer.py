"""End to end with the real producer: QWED 8.0.0's engines (math, logic, sql, schema,
fact, code) with its own trust step, every result recorded through the QWED adapter and
the client into a real ``ledger serve`` (SQLite, PostgreSQL) that is killed and
restarted mid-run; then the spool drains and the audit passes with every result
present exactly once."""

from __future__ import annotations

from pathlib import Path

import pytest

from ledger.client import LedgerClient
from ledger.integrations.qwed import EvidenceRecorder, QwedGateway
from tests.client.conftest import audit_exit, result_keys
from tests.client.server import LedgerServer
from tests.conftest import ENGINES
from tests.conftest import engine_url as fresh_db_url
from tests.integrations.conftest import ISSUER, JWKS, ledger_cli

pytest.importorskip("qwed_new", reason="the real producer: pip install -e '.[dev]' (qwed 8.0.0)")

ROUNDS = 4


@pytest.mark.slow
@pytest.mark.parametrize("kind", ENGINES)
def test_real_qwed_results_survive_a_server_restart(kind: str, request: pytest.FixtureRequest,
                                                    tmp_path: Path) -> None:
    from tests.integrations.qwed_engines import install_issuer, produce

    db_url = fresh_db_url(kind, request, tmp_path)
    srv = LedgerServer(db_url, tmp_path, f"test.example/qwed-e2e-{kind}")
    assert ledger_cli(db_url, "keys", "trust", "--issuer", ISSUER, "--jwks", str(JWKS))[0] == 0
    srv.start()
    install_issuer()
    recorder = EvidenceRecorder()
    keys, statuses = [], []
    try:
        with LedgerClient(srv.url, srv.token(), spool_dir=str(tmp_path / "spool"),
                          timeout=3) as client, recorder:
            gateway = QwedGateway(client, recorder, meta={"producer": "qwed", "v": "8.0.0"})
            for r in range(ROUNDS):
                if r == 1:
                    srv.kill()  # the ledger dies mid-run
                if r == 3:
                    srv.start()
                    client.core.succeeded()  # do not wait out the back-off
                for p in produce(r):
                    out = gateway.record(p.result, engine=p.engine, query=p.query,
                                         admission=p.admission, subject=f"{p.engine}-{r}")
                    keys.append(out.idempotency_key)
                    statuses.append(out.status)
            assert "spooled" in statuses and "appended" in statuses
            report = client.drain()
            assert report.remaining == 0 and report.rejected == 0
        stored = result_keys(db_url)
        assert sorted(stored) == sorted(keys)  # every result exactly once
        assert audit_exit(db_url) == 0
    finally:
        srv.stop()


@pytest.mark.parametrize("kind", ENGINES)
def test_each_qwed_organisation_goes_to_its_tenant(kind: str, request: pytest.FixtureRequest,
                                                   tmp_path: Path) -> None:
    """A gateway serving two QWED organisations, each mapped to a tenant by its own client
    and tenant producer token: every result lands in its organisation's tenant chain, a
    result of an unmapped organisation is refused before anything is sent, and the ledger
    and each tenant audit clean."""
    from sqlalchemy import create_engine, text

    from ledger import Ledger
    from ledger.integrations.qwed import OrganisationGateways
    from tests.integrations.qwed_engines import install_issuer, produce

    db_url = fresh_db_url(kind, request, tmp_path)
    srv = LedgerServer(db_url, tmp_path, f"test.example/qwed-orgs-{kind}")
    assert ledger_cli(db_url, "keys", "trust", "--issuer", ISSUER, "--jwks", str(JWKS))[0] == 0
    srv.start()
    install_issuer()
    recorder = EvidenceRecorder()
    sent: dict[str, list[str]] = {"acme": [], "globex": []}
    try:
        with LedgerClient(srv.url, srv.token(subject="gw-acme", tenant="acme"),
                          spool_dir=str(tmp_path / "spool-acme"), timeout=5) as a, \
                LedgerClient(srv.url, srv.token(subject="gw-globex", tenant="globex"),
                             spool_dir=str(tmp_path / "spool-globex"), timeout=5) as g, \
                recorder:
            orgs = OrganisationGateways({1: QwedGateway(a, recorder), "2": QwedGateway(g, recorder)})
            for r, (org, tenant) in enumerate([(1, "acme"), (2, "globex"), ("1", "acme")]):
                for p in produce(r):
                    out = orgs.record(p.result, organization_id=org, engine=p.engine,
                                      query=p.query, admission=p.admission,
                                      subject=f"{p.engine}-{r}")
                    assert out.status == "appended", out
                    sent[tenant].append(out.idempotency_key)
            with pytest.raises(ValueError, match="mapped twice"):
                OrganisationGateways({1: QwedGateway(a, recorder), "1": QwedGateway(g, recorder)})
            p = produce(9)[0]
            for bad in (3, None, True, ""):
                with pytest.raises(ValueError, match="organization_id"):
                    orgs.record(p.result, organization_id=bad, engine=p.engine, query=p.query)
        eng = create_engine(db_url.replace("postgresql://", "postgresql+psycopg://", 1))
        try:
            with eng.connect() as conn:
                rows = conn.execute(text("SELECT tenant, idempotency_key FROM entries "
                                         "WHERE kind = 'result' ORDER BY seq")).all()
        finally:
            eng.dispose()
        stored: dict[str, list[str]] = {}
        for tenant, key in rows:
            stored.setdefault(tenant, []).append(key)
        assert stored == sent  # each result once, in its organisation's tenant, nothing else
        assert audit_exit(db_url) == 0
        with Ledger.open(db_url) as L:
            for tenant in sent:
                assert L.audit_tenant(tenant).findings == ()
    finally:
        srv.stop()
