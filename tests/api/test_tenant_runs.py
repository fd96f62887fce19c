"""Recorded audit and re-verification runs over HTTP, per tenant (docs/http.md, "Tenants").

A real server on each engine; a ledger of the tenants ``acme`` and ``globex`` and of
``default``, with four recorded runs made by the commands: an audit and a re-verification of
acme alone (``--tenant acme --record``) and of the whole ledger.  acme's auditor (and agent,
for re-verification runs) sees acme's runs and their findings only; globex's sees empty
lists; no token is accepted for the default tenant (its chain is the operator's); a run that is not the tenant's is answered exactly as a
run id that does not exist; an operator-level token sees every run.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from click.testing import CliRunner

from ledger.cli.main import cli
from ledger.crypto.keys import Keyring
from ledger.crypto.tokens import ledger_signer
from ledger.demo.samples import math_verified
from tests.api.server import Server, prepare_ledger, start_server
from tests.conftest import ENGINES, engine_url

A, B = "acme", "globex"
MISSING = 10**6


class Runs:
    def __init__(self, srv: Server) -> None:
        self.srv = srv
        self.reports: dict[str, dict[str, Any]] = {}

    def client(self, role: str, tenant: str | None) -> httpx.Client:
        return self.srv.scoped(role, tenant)

    def run(self, name: str, tmp: Path, exit_code: int, *args: str) -> None:
        out = tmp / f"{name}.json"
        r = CliRunner().invoke(cli, ["--db", self.srv.db_url, *args, "--record",
                                     "--json-report", str(out)])
        assert r.exit_code == exit_code, r.stderr
        self.reports[name] = json.loads(out.read_text())


def sub(tag: str) -> dict[str, Any]:
    s = math_verified(random.Random(tag).randrange(10**6), random.Random(tag))
    s["subject"] = tag
    return s


@pytest.fixture(scope="module", params=ENGINES)
def runs(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory,
         ) -> Iterator[Runs]:
    kind = request.param
    tmp = tmp_path_factory.mktemp(f"tenant-runs-{kind}")
    db_url = engine_url(kind, request, tmp)
    origin = f"test.example/tenant-runs-{kind}"
    prepare_ledger(db_url, tmp / "keys", origin)
    proc, url = start_server(db_url, tmp / "keys", tmp / "serve.log")
    srv = Server(kind, db_url, tmp / "keys", origin, proc, url, tmp / "serve.log")
    s = Runs(srv)
    try:
        for i, tenant in enumerate([A, B, None, A, B]):
            with s.client("producer", tenant) as c:
                r = c.post("/v1/entries", json=sub(f"{tenant}-{i}"))
                assert r.status_code == 201, r.text
        # 3: nothing re-executable (no re-executor for the demo engines)
        s.run("audit-acme", tmp, 0, "audit", "--tenant", A)
        s.run("reverify-acme", tmp, 3, "reverify", "--tenant", A)
        s.run("audit-whole", tmp, 0, "audit")
        s.run("reverify-whole", tmp, 3, "reverify")
        yield s
    finally:
        srv.stop()


def _get(s: Runs, role: str, tenant: str | None, path: str) -> httpx.Response:
    with s.client(role, tenant) as c:
        return c.get(path)


def test_a_tenant_auditor_lists_its_tenants_audit_runs_only(runs: Runs) -> None:
    mine = runs.reports["audit-acme"]["run_id"]
    whole = runs.reports["audit-whole"]["run_id"]
    r = _get(runs, "auditor", A, "/v1/audits")
    assert r.status_code == 200, r.text
    assert [(x["run_id"], x["tenant"]) for x in r.json()["runs"]] == [(mine, A)]
    one = _get(runs, "auditor", A, f"/v1/audits/{mine}")
    assert one.status_code == 200 and one.json()["tenant"] == A
    assert one.json()["finding_list"] == []
    r = _get(runs, "auditor", B, "/v1/audits")
    assert r.status_code == 200 and r.json() == {"runs": [], "next_before": None}
    operator = _get(runs, "auditor", None, "/v1/audits").json()["runs"]
    assert [(x["run_id"], x["tenant"]) for x in operator] == [(whole, None), (mine, A)]


@pytest.mark.parametrize(("tenant", "which"), [(B, "audit-acme"), (A, "audit-whole")])
def test_another_run_is_answered_as_a_missing_one(runs: Runs, tenant: str, which: str) -> None:
    run_id = runs.reports[which]["run_id"]
    got = _get(runs, "auditor", tenant, f"/v1/audits/{run_id}")
    missing = _get(runs, "auditor", tenant, f"/v1/audits/{MISSING}")
    assert got.status_code == missing.status_code == 404
    assert got.text.replace(str(run_id), "N") == missing.text.replace(str(MISSING), "N")
    csv = _get(runs, "auditor", tenant, f"/v1/audits/{run_id}?format=csv")
    assert csv.status_code == 404


@pytest.mark.parametrize("role", ["auditor", "agent"])
def test_a_tenant_reader_lists_its_tenants_reverify_runs_only(runs: Runs, role: str) -> None:
    mine = runs.reports["reverify-acme"]["recorded_seq"]
    whole = runs.reports["reverify-whole"]["recorded_seq"]
    r = _get(runs, role, A, "/v1/reverify-runs")
    assert r.status_code == 200, r.text
    (run,) = r.json()["runs"]
    assert run["seq"] == mine and run["tenant"] == A and run["outcomes_proven"]
    assert run["summary"]["entries"] == 2
    r = _get(runs, role, B, "/v1/reverify-runs")
    assert r.status_code == 200 and r.json()["runs"] == [], r.text
    operator = _get(runs, role, None, "/v1/reverify-runs").json()["runs"]
    assert [(x["seq"], x["tenant"]) for x in operator] == [(whole, None), (mine, A)]


def test_a_token_for_the_default_tenant_is_refused(runs: Runs) -> None:
    """The default tenant's chain holds the operator's whole-ledger runs and custody orders:
    no token is minted for it, and one signed by the ledger key anyway is not accepted
    (401), never read as a tenant's."""
    from ledger.errors import TenantError
    from ledger.ops.tokens import ACCESS_TOKEN_TYP

    with pytest.raises(TenantError) as refused:
        _get(runs, "auditor", "default", "/v1/audits")
    assert refused.value.field == "tenant"
    signer = ledger_signer(Keyring.load(runs.srv.keys_dir), runs.srv.origin)
    now = int(time.time())
    token = signer.sign_jwt({"iss": runs.srv.origin, "aud": runs.srv.origin, "sub": "d",
                             "role": "auditor", "tenant": "default", "iat": now, "nbf": now,
                             "exp": now + 600, "jti": "default-tenant"}, ACCESS_TOKEN_TYP)
    with httpx.Client(base_url=runs.srv.base_url, timeout=30.0,
                      headers={"Authorization": f"Bearer {token}"}) as c:
        for path in ("/v1/audits", "/v1/reverify-runs", "/v1/entries"):
            r = c.get(path)
            assert r.status_code == 401 and r.json()["code"] == "invalid_token", r.text
