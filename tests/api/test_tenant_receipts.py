"""Receipts name the tenant (docs/http.md "Receipts", docs/format-receipt.md): on both
engines, an append by a producer token of a tenant other than ``default`` answers its
``tenant`` and ``tseq``, and its receipt -- per entry or batch, appended or replayed -- signs
them; they are the stored row's, and every verifier checks them against the answer.  A
default-tenant answer and receipt have exactly the members they always had."""

from __future__ import annotations

import base64
import json
import random
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from sqlalchemy import create_engine, text

from ledger.api.receipts import verify_receipt
from ledger.client import LedgerClient
from ledger.client.errors import ReceiptInvalid
from ledger.client.receipt import verify_receipt as client_verify
from ledger.demo.samples import math_verified
from ledger.errors import IntegrityError
from tests.api.server import Server, prepare_ledger, start_server
from tests.conftest import ENGINES, engine_url

T = "initech"
OLD_CLAIMS = {"iss", "origin", "ledger_id", "seq", "entry_hash", "recorded_at", "producer",
              "iat"}
BATCH = {"Prefer": "receipt=batch"}


def sub(tag: str) -> dict[str, Any]:
    s = math_verified(random.Random(tag).randrange(10**6), random.Random(tag))
    s["subject"] = tag
    return s


@pytest.fixture(scope="module", params=ENGINES)
def srv(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory,
        ) -> Iterator[Server]:
    kind = request.param
    tmp = tmp_path_factory.mktemp(f"receipts-{kind}")
    db_url = engine_url(kind, request, tmp)
    origin = f"test.example/receipts-{kind}"
    prepare_ledger(db_url, tmp / "keys", origin)
    proc, url = start_server(db_url, tmp / "keys", tmp / "serve.log")
    s = Server(kind, db_url, tmp / "keys", origin, proc, url, tmp / "serve.log")
    try:
        yield s
    finally:
        s.stop()


def token(srv: Server, tenant: str | None, subject: str) -> str:
    return srv.token("producer", subject, tenant=tenant)


def client(srv: Server, tenant: str | None, subject: str) -> httpx.Client:
    return srv.scoped("producer", tenant, subject)


def jws_claims(receipt: str) -> dict[str, Any]:
    part = receipt.split("~")[0].split(".")[1]
    return dict(json.loads(base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))))


def leaf_doc(receipt: str) -> dict[str, Any]:
    part = receipt.split("~")[1]
    return dict(json.loads(base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))))


def stored(srv: Server, seq: int) -> tuple[str, int]:
    eng = create_engine(srv.db_url)
    try:
        with eng.connect() as conn:
            t, tseq = conn.execute(text("SELECT tenant, tseq FROM entries WHERE seq = :s"),
                                   {"s": seq}).one()
            return str(t), int(tseq)
    finally:
        eng.dispose()


def check(srv: Server, jwks: dict[str, Any], item: dict[str, Any], tseq: int) -> None:
    """The answer names T and ``tseq``, the stored row's; both verifiers accept the receipt
    for it and refuse it for another tenant or place."""
    assert (item["tenant"], item["tseq"]) == (T, tseq) == stored(srv, item["seq"])
    claims = verify_receipt(item["receipt"], jwks, srv.origin, entry=item)
    assert (claims["tenant"], claims["tseq"]) == (T, tseq)
    got = client_verify(item["receipt"], jwks, origin=srv.origin, ledger_id=None,
                        seq=item["seq"], entry_hash=item["entry_hash"], tenant=T, tseq=tseq)
    assert (got["tenant"], got["tseq"]) == (T, tseq)
    for tenant, place in ((None, None), (T, tseq + 1), ("acme", tseq)):
        with pytest.raises(ReceiptInvalid, match="tenant"):
            client_verify(item["receipt"], jwks, origin=srv.origin, ledger_id=None,
                          seq=item["seq"], entry_hash=item["entry_hash"], tenant=tenant,
                          tseq=place)
        with pytest.raises(IntegrityError, match="tenant"):
            verify_receipt(item["receipt"], jwks, srv.origin,
                           entry={**item, "tenant": tenant, "tseq": place})


def test_a_tenant_append_and_its_receipts_name_the_tenant_and_tseq(srv: Server) -> None:
    with client(srv, T, "svc-initech") as c:
        jwks = c.get("/.well-known/jwks.json").json()
        items = []
        for i in range(2):  # per-entry receipts
            r = c.post("/v1/entries", json=sub(f"t-{i}"))
            assert r.status_code == 201, r.text
            items.append(r.json())
        r = c.post("/v1/entries/batch", json=[sub("t-2"), sub("t-3")], headers=BATCH)
        assert r.status_code == 200 and r.headers["Preference-Applied"] == "receipt=batch"
        items += r.json()["results"]
        r = c.post("/v1/entries", json=sub("t-4"), headers=BATCH)
        assert r.status_code == 201, r.text
        items.append(r.json())
    for tseq, item in enumerate(items):
        check(srv, jwks, item, tseq)
    for item in items[:2]:
        assert set(jws_claims(item["receipt"])) == OLD_CLAIMS | {"tenant", "tseq"}
    for item in items[2:]:
        assert set(leaf_doc(item["receipt"])) == {"entry_hash", "producer", "recorded_at",
                                                  "seq", "tenant", "tseq"}
        assert "tenant" not in jws_claims(item["receipt"])  # the batch JWS is as before


def test_a_replayed_tenant_append_names_its_tenant_and_tseq(srv: Server) -> None:
    body = sub("replayed")
    with client(srv, T, "svc-initech") as c:
        jwks = c.get("/.well-known/jwks.json").json()
        first = c.post("/v1/entries", json=body, headers={"Idempotency-Key": "rk-1"})
        again = c.post("/v1/entries", json=body, headers={"Idempotency-Key": "rk-1"})
        batch = c.post("/v1/entries/batch", json=[body], headers={"Idempotency-Key": "rk-1",
                                                                   **BATCH})
        batch_again = c.post("/v1/entries/batch", json=[body],
                             headers={"Idempotency-Key": "rk-1", **BATCH})
    assert (first.status_code, again.status_code) == (201, 200), again.text
    assert again.json()["replayed"] is True
    tseq = first.json()["tseq"]
    check(srv, jwks, first.json(), tseq)
    check(srv, jwks, again.json(), tseq)
    new, replayed = batch.json()["results"][0], batch_again.json()["results"][0]
    assert replayed["replayed"] is True and replayed["seq"] == new["seq"]
    check(srv, jwks, new, new["tseq"])
    check(srv, jwks, replayed, new["tseq"])


def test_the_client_checks_the_tenant_of_its_receipts(srv: Server) -> None:
    for kind in ("batch", "entry"):
        with LedgerClient(srv.base_url, token(srv, T, "svc-client"), receipts=kind) as lc:
            out = lc.append(sub(f"client-{kind}"))
        assert out.status == "appended" and out.claims is not None
        assert (out.claims["tenant"], out.claims["tseq"]) == stored(srv, out.seq or 0)


def test_the_client_refuses_an_answer_for_another_tenant_than_its_tokens(srv: Server) -> None:
    """A real answer for T checked by clients of T's token and of a default token: the
    former takes it, and refuses it stripped of its tenant; the latter refuses it."""
    with client(srv, T, "svc-client") as c:
        item = c.post("/v1/entries", json=sub("client-strict")).json()
    tenant_client = LedgerClient(srv.base_url, token(srv, T, "svc-client"), receipts="entry")
    default_client = LedgerClient(srv.base_url, token(srv, None, "svc-client"),
                                  receipts="entry")
    try:
        for lc in (tenant_client, default_client):
            lc.append(sub(f"warm-{lc.core.tenant}"))  # learns the origin and the keys
        assert (tenant_client.core.tenant, default_client.core.tenant) == (T, "default")
        assert tenant_client.core.verified(item, "k").claims["tenant"] == T
        stripped = {k: v for k, v in item.items() if k not in ("tenant", "tseq")}
        for lc, answer in ((tenant_client, stripped), (default_client, item)):
            with pytest.raises(ReceiptInvalid, match="tenant"):
                lc.core.verified(answer, "k")
    finally:
        tenant_client.close()
        default_client.close()


def test_a_default_tenant_answer_and_receipt_are_unchanged(srv: Server) -> None:
    with client(srv, None, "svc-default") as c:
        jwks = c.get("/.well-known/jwks.json").json()
        one = c.post("/v1/entries", json=sub("d-0"))
        batched = c.post("/v1/entries", json=sub("d-1"), headers=BATCH)
    for r in (one, batched):
        assert r.status_code == 201, r.text
        assert set(r.json()) == {"ok", "seq", "entry_hash", "recorded_at", "receipt"}
        claims = verify_receipt(r.json()["receipt"], jwks, srv.origin, entry=r.json())
        assert "tenant" not in claims and "tseq" not in claims
        client_verify(r.json()["receipt"], jwks, origin=srv.origin, ledger_id=None,
                      seq=r.json()["seq"], entry_hash=r.json()["entry_hash"])
        with pytest.raises(ReceiptInvalid, match="tenant"):
            client_verify(r.json()["receipt"], jwks, origin=srv.origin, ledger_id=None,
                          seq=r.json()["seq"], entry_hash=r.json()["entry_hash"],
                          tenant=T, tseq=0)
    assert set(jws_claims(one.json()["receipt"])) == OLD_CLAIMS
    header = one.json()["receipt"].split(".")[0]
    assert set(json.loads(base64.urlsafe_b64decode(header + "=" * (-len(header) % 4)))) == \
        {"alg", "kid", "typ"}
    assert set(leaf_doc(batched.json()["receipt"])) == {"entry_hash", "producer",
                                                        "recorded_at", "seq"}
