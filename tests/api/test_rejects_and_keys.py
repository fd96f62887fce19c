"""Over HTTP, on SQLite and PostgreSQL: a rejection naming an unstorable key (NUL, longer
than 256 characters) is quarantined and every stored item of its batch / group commit is
acknowledged; idempotency keys are scoped per producer (a 409 names only the caller's own
entry); /v1/health shows the quarantine totals."""

from __future__ import annotations

import asyncio
import json
import uuid

import httpx
import pytest
from sqlalchemy import text

from ledger.store.db import make_engine
from tests.api.server import Server, api  # noqa: F401 - fixture

KEYS = ["a\x00b", "k" * 300]


def ok(marker: str, i: int) -> dict:
    return {"engine": "logic", "subject": f"{marker}-{i}",
            "result": {"status": "BLOCKED", "agent_message": f"fine {i}"}}


def bad_body(key: str, marker: str) -> bytes:
    return json.dumps({"engine": "logic", "subject": marker, key: 1,
                       "result": {"status": "BLOCKED", "agent_message": "m"}}).encode()


def quarantined(api: Server, marker: str) -> list[tuple[str, str]]:  # noqa: F811
    eng = make_engine(api.db_url)
    try:
        with eng.connect() as conn:
            rows = conn.execute(text("SELECT code, field, raw FROM quarantine")).all()
    finally:
        eng.dispose()
    return [(r.code, r.field) for r in rows if marker.encode() in bytes(r.raw)]


@pytest.mark.parametrize("key", KEYS, ids=["nul", "long"])
def test_a_batch_with_an_unstorable_key_acknowledges_every_stored_item(
        api: Server, key: str) -> None:  # noqa: F811
    marker = f"b-{uuid.uuid4().hex}"
    body = b"[" + b",".join([json.dumps(ok(marker, 0)).encode(), bad_body(key, marker),
                             json.dumps(ok(marker, 1)).encode()]) + b"]"
    with api.client("producer") as c:
        r = c.post("/v1/entries/batch", content=body)
        assert r.status_code == 200, r.text
        res = r.json()["results"]
        assert [x["ok"] for x in res] == [True, False, True]
        assert all("seq" in x and "receipt" in x for x in (res[0], res[2]))
        assert res[1]["error"]["code"] == "unknown_field"
    with api.client("auditor") as c:
        for x in (res[0], res[2]):
            got = c.get(f"/v1/entries/{x['seq']}")
            assert got.status_code == 200 and marker in got.text
    (row,) = quarantined(api, marker)
    assert row[0] == "unknown_field" and len(row[1]) <= 256 and "\x00" not in row[1]


@pytest.mark.parametrize("key", KEYS, ids=["nul", "long"])
def test_a_group_commit_with_an_unstorable_key_acknowledges_its_mates(
        api: Server, key: str) -> None:  # noqa: F811
    marker = f"g-{uuid.uuid4().hex}"
    headers = {"Authorization": f"Bearer {api.tokens['producer']}",
               "Content-Type": "application/json"}
    bodies = [json.dumps(ok(marker, i)).encode() for i in range(6)]
    bodies.insert(3, bad_body(key, marker))

    async def send() -> list[httpx.Response]:
        async with httpx.AsyncClient(base_url=api.base_url, headers=headers,
                                     timeout=30) as c:
            return await asyncio.gather(*(c.post("/v1/entries", content=b) for b in bodies))

    got = asyncio.run(send())
    assert [r.status_code for r in got] == [201, 201, 201, 422, 201, 201, 201], \
        [r.text for r in got]
    assert got[3].json()["code"] == "unknown_field"
    assert len({r.json()["seq"] for i, r in enumerate(got) if i != 3}) == 6
    assert [c for c, _ in quarantined(api, marker)] == ["unknown_field"]


def test_the_same_idempotency_key_from_two_producers(api: Server) -> None:  # noqa: F811
    key = f"k-{uuid.uuid4().hex}"
    marker = f"i-{uuid.uuid4().hex}"
    alice = httpx.Client(base_url=api.base_url, timeout=30, headers={
        "Authorization": f"Bearer {api.token('producer', 'alice-' + marker)}"})
    bob = httpx.Client(base_url=api.base_url, timeout=30, headers={
        "Authorization": f"Bearer {api.token('producer', 'bob-' + marker)}"})
    with alice, bob:
        a = alice.post("/v1/entries", json=ok(marker, 0), headers={"Idempotency-Key": key})
        b = bob.post("/v1/entries", json=ok(marker, 1), headers={"Idempotency-Key": key})
        assert (a.status_code, b.status_code) == (201, 201), (a.text, b.text)
        assert a.json()["seq"] != b.json()["seq"]
        again = bob.post("/v1/entries", json=ok(marker, 1), headers={"Idempotency-Key": key})
        assert again.status_code == 200 and again.json()["seq"] == b.json()["seq"]
        clash = bob.post("/v1/entries", json=ok(marker, 2), headers={"Idempotency-Key": key})
        assert clash.status_code == 409, clash.text
        problem = clash.json()
        assert problem["error"]["detail"] == {"seq": b.json()["seq"]}
        assert str(a.json()["seq"]) not in json.dumps(problem).replace(
            str(b.json()["seq"]), "")


def test_health_shows_the_quarantine_totals(api: Server) -> None:  # noqa: F811
    body = httpx.get(api.base_url + "/v1/health", timeout=10).json()
    q = body["quarantine"]
    assert set(q) == {"rows", "dropped", "pruned", "max_rows", "max_per_producer"}
    assert (q["max_rows"], q["max_per_producer"]) == (10_000, 1_000)
