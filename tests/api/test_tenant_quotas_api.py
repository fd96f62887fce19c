"""Tenant entry quotas over HTTP (a real ``ledger serve`` with LEDGER_TENANT_QUOTAS): a
tenant producer's result beyond its quota is 403 tenant_quota_exceeded naming the field, the
single route and the batch route, with nothing stored; another tenant appends on."""

from __future__ import annotations

import random
from typing import Any

import pytest

from ledger.demo.samples import math_verified
from ledger.facade import Ledger
from tests.api.server import Server, prepare_ledger, start_server
from tests.conftest import ENGINES, engine_url


def sub(tag: str) -> dict[str, Any]:
    s = math_verified(random.Random(tag).randrange(10**6), random.Random(tag))
    s["subject"] = tag
    return s


@pytest.mark.parametrize("kind", ENGINES)
def test_a_tenant_producer_past_its_quota_gets_a_403(kind: str, request: pytest.FixtureRequest,
                                                     tmp_path) -> None:
    db_url = engine_url(kind, request, tmp_path)
    origin = f"test.example/quotas-{kind}"
    prepare_ledger(db_url, tmp_path / "keys", origin)
    proc, url = start_server(db_url, tmp_path / "keys", tmp_path / "serve.log",
                             env={"LEDGER_TENANT_QUOTAS": "acme=2"})
    srv = Server(kind, db_url, tmp_path / "keys", origin, proc, url, tmp_path / "serve.log")
    try:
        with srv.scoped("producer", "acme", "gw-acme") as a, \
                srv.scoped("producer", "globex", "gw-globex") as g:
            assert a.post("/v1/entries", json=sub("a0")).status_code == 201
            assert a.post("/v1/entries", json=sub("a1")).status_code == 201
            r = a.post("/v1/entries", json=sub("a2"))
            assert r.status_code == 403, r.text
            assert r.headers["content-type"].startswith("application/problem+json")
            body = r.json()
            assert body["code"] == "tenant_quota_exceeded" and body["field"] == "tenant"
            assert "Retry-After" not in r.headers  # no retry cures it
            b = a.post("/v1/entries/batch", json=[sub("a3"), sub("a4")])
            assert b.status_code == 200, b.text  # one result per item
            items = b.json()["results"]
            assert [i["ok"] for i in items] == [False, False]
            assert [i["error"]["code"] for i in items] == ["tenant_quota_exceeded"] * 2
            assert g.post("/v1/entries", json=sub("g0")).status_code == 201
        with Ledger.open(db_url) as lg:
            assert lg.head()["size"] == 3
            assert lg.audit().findings == ()
    finally:
        srv.stop()
