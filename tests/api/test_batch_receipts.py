"""Batch receipts over a real server (``Prefer: receipt=batch``, docs/format-receipt.md):
concurrent single appends that were group-committed share ONE signature, every caller's
receipt verifies with its own leaf and path, and a request without the preference still gets
its per-entry JWT -- in the same batch, too."""

from __future__ import annotations

import asyncio
import uuid
from collections import defaultdict
from typing import Any

import httpx
import pytest

from ledger.api.receipts import verify_receipt
from ledger.client import LedgerClient
from ledger.client.errors import ClientUsage
from ledger.client.receipt import verify_receipt as client_verify
from tests.api.server import Server, api  # noqa: F401 - fixture
from tests.api.test_append import unverifiable, valid

BATCH = {"Prefer": "receipt=batch"}


def _check(api: Server, jwks: dict[str, Any], body: dict[str, Any]) -> dict[str, Any]:  # noqa: F811
    claims = verify_receipt(body["receipt"], jwks, api.origin)
    assert (claims["seq"], claims["entry_hash"], claims["recorded_at"]) == (
        body["seq"], body["entry_hash"], body["recorded_at"])
    mine = client_verify(body["receipt"], jwks, origin=api.origin, ledger_id=None,
                         seq=body["seq"], entry_hash=body["entry_hash"])
    assert mine.get("index") == claims.get("index") and mine["seq"] == claims["seq"]
    return claims


def test_concurrent_appends_share_one_signature_per_commit(api: Server) -> None:  # noqa: F811
    async def burst() -> list[httpx.Response]:
        headers = {"Authorization": f"Bearer {api.tokens['producer']}", **BATCH}
        async with httpx.AsyncClient(base_url=api.base_url, headers=headers,
                                     timeout=30) as c:
            return await asyncio.gather(*(c.post("/v1/entries", json=valid())
                                          for _ in range(40)))

    answers = asyncio.run(burst())
    with api.client("producer") as c:
        jwks = c.get("/.well-known/jwks.json").json()
    by_jws: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in answers:
        assert r.status_code == 201, r.text
        assert r.headers["preference-applied"] == "receipt=batch"
        body = r.json()
        assert body["receipt"].count("~") == 2
        claims = _check(api, jwks, body)
        assert claims["producer"] == "test-producer"
        by_jws[body["receipt"].split("~")[0]].append(claims)
    # each signature covers exactly the receipts that carry it, at indices 0..size-1, and
    # the entries of one signature were committed together (one recorded_at)
    for group in by_jws.values():
        assert sorted(c["index"] for c in group) == list(range(group[0]["size"]))
        assert len({c["recorded_at"] for c in group}) == 1
    assert len(by_jws) < len(answers), "40 concurrent appends were never group-committed"


def test_without_the_preference_each_entry_gets_its_jwt(api: Server) -> None:  # noqa: F811
    with api.client("producer") as c:
        r = c.post("/v1/entries", json=valid())
        assert r.status_code == 201 and "~" not in r.json()["receipt"]
        assert "preference-applied" not in r.headers
        other = c.post("/v1/entries", json=valid(), headers={"Prefer": "return=minimal"})
        assert other.status_code == 201 and "~" not in other.json()["receipt"]
        jwks = c.get("/.well-known/jwks.json").json()
    assert verify_receipt(r.json()["receipt"], jwks, api.origin)["seq"] == r.json()["seq"]


def test_mixed_callers_in_one_commit_get_what_each_asked_for(api: Server) -> None:  # noqa: F811
    async def burst() -> list[tuple[bool, httpx.Response]]:
        auth = {"Authorization": f"Bearer {api.tokens['producer']}"}
        async with httpx.AsyncClient(base_url=api.base_url, headers=auth, timeout=30) as c:
            wants = [i % 2 == 0 for i in range(30)]
            rs = await asyncio.gather(*(c.post("/v1/entries", json=valid(),
                                               headers=BATCH if w else {}) for w in wants))
            return list(zip(wants, rs, strict=True))

    with api.client("producer") as c:
        jwks = c.get("/.well-known/jwks.json").json()
    for wanted, r in asyncio.run(burst()):
        assert r.status_code == 201, r.text
        assert ("~" in r.json()["receipt"]) is wanted
        _check(api, jwks, r.json())


def test_batch_endpoint_one_signature_for_its_appended_items(api: Server) -> None:  # noqa: F811
    tag = uuid.uuid4().hex
    items = [valid(), unverifiable(tag), valid(), {"result": "not an object"}, valid()]
    with api.client("producer") as c:
        r = c.post("/v1/entries/batch", json=items, headers=BATCH)
        jwks = c.get("/.well-known/jwks.json").json()
    assert r.status_code == 200 and r.headers["preference-applied"] == "receipt=batch"
    results = r.json()["results"]
    taken = [x for x in results if x["ok"]]
    assert len(taken) == 4 and not results[3]["ok"] and "receipt" not in results[3]
    assert len({x["receipt"].split("~")[0] for x in taken}) == 1
    claims = [_check(api, jwks, x) for x in taken]
    assert [c["index"] for c in claims] == [0, 1, 2, 3] and claims[0]["size"] == 4


def test_a_replay_gets_a_batch_receipt_too(api: Server) -> None:  # noqa: F811
    key, sub = f"k-{uuid.uuid4().hex}", valid()
    with api.client("producer") as c:
        first = c.post("/v1/entries", json=sub, headers={**BATCH, "Idempotency-Key": key})
        again = c.post("/v1/entries", json=sub, headers={**BATCH, "Idempotency-Key": key})
        jwks = c.get("/.well-known/jwks.json").json()
    assert first.status_code == 201 and again.status_code == 200
    assert again.json()["replayed"] is True
    assert _check(api, jwks, again.json())["seq"] == first.json()["seq"]


def test_the_client_asks_for_batch_receipts_and_verifies_both(api: Server) -> None:  # noqa: F811
    with LedgerClient(api.base_url, api.tokens["producer"]) as client:
        out = client.append(valid())
        assert out.status == "appended" and out.receipt and out.receipt.count("~") == 2
        assert out.claims["size"] >= 1 and out.claims["seq"] == out.seq
    with LedgerClient(api.base_url, api.tokens["producer"], receipts="entry") as client:
        out = client.append(valid())
        assert out.status == "appended" and out.receipt and "~" not in out.receipt
    with pytest.raises(ClientUsage, match="receipts"):
        LedgerClient(api.base_url, api.tokens["producer"], receipts="none")


def test_a_forged_batch_receipt_is_refused_by_the_client(api: Server) -> None:  # noqa: F811
    with api.client("producer") as c:
        r = c.post("/v1/entries/batch", json=[valid(), valid()], headers=BATCH)
        jwks = c.get("/.well-known/jwks.json").json()
    a, b = r.json()["results"]
    # b's leaf and path under a's answer, a's path under b's leaf: neither verifies as a
    jws, leaf_a, proof_a = a["receipt"].split("~")
    _, leaf_b, proof_b = b["receipt"].split("~")
    for forged in ("~".join([jws, leaf_b, proof_b]), "~".join([jws, leaf_b, proof_a])):
        with pytest.raises(Exception, match="receipt"):
            client_verify(forged, jwks, origin=api.origin, ledger_id=None, seq=a["seq"],
                          entry_hash=a["entry_hash"])


@pytest.mark.parametrize(("header", "wanted"), [
    ("receipt=batch", True), ('receipt="batch"', True), ("return=minimal, receipt=batch", True),
    ("Receipt=Batch; x=1", True), ("receipt=entry", False), ("", False), (None, False),
    ("receipt=batches", False), ("respond-async", False),
])
def test_the_prefer_header_is_read_as_rfc7240_says(header: str | None, wanted: bool) -> None:
    from ledger.api.receipts import wants_batch

    assert wants_batch(header) is wanted
