"""POST /v1/entries and /v1/entries/batch against a real server: receipts, idempotency,
per-item results, and every client mistake answered with a 4xx JSON error and a code."""

from __future__ import annotations

import json
import random
import uuid
from typing import Any

import httpx
import pytest
from sqlalchemy import text

from ledger.api.receipts import verify_receipt
from ledger.core.submission import MAX_SUBMISSION_BYTES
from ledger.demo.samples import math_verified
from ledger.store.db import make_engine
from tests.api.server import Server, api  # noqa: F401 - fixture


def valid(tag: str | None = None) -> dict[str, Any]:
    tag = tag or uuid.uuid4().hex
    sub = math_verified(random.Random(tag).randrange(10**6), random.Random(tag))
    sub["subject"] = tag
    return sub


def unverifiable(tag: str) -> dict[str, Any]:
    return {"result": {"status": "UNVERIFIABLE", "agent_message": "could not verify",
                       "developer_fields": {"constraint_id": "math.x"}, "proof_ref": None},
            "engine": "math", "subject": tag}


def quarantined(api: Server) -> int:  # noqa: F811
    eng = make_engine(api.db_url)
    try:
        with eng.connect() as conn:
            return conn.execute(text("SELECT count(*) FROM quarantine")).scalar_one()
    finally:
        eng.dispose()


def assert_error(r: httpx.Response, status: int, code: str | None = None) -> dict[str, Any]:
    assert r.status_code == status, r.text
    assert r.headers["content-type"].startswith("application/problem+json"), r.headers
    err = r.json()["error"]
    assert isinstance(err["code"], str) and err["code"] and isinstance(err["message"], str)
    if code is not None:
        assert err["code"] == code, r.text
    return err


def test_append_returns_a_receipt_that_verifies(api: Server) -> None:  # noqa: F811
    with api.client("producer") as c:
        r = c.post("/v1/entries", json=valid())
        assert r.status_code == 201, r.text
        body = r.json()
        jwks = c.get("/.well-known/jwks.json").json()
    claims = verify_receipt(body["receipt"], jwks, api.origin)
    assert (claims["seq"], claims["entry_hash"], claims["recorded_at"]) == (
        body["seq"], body["entry_hash"], body["recorded_at"])
    assert claims["producer"] == "test-producer" and claims["origin"] == api.origin
    with api.client("auditor") as c:
        entry = c.get(f"/v1/entries/{body['seq']}").json()["entry"]
    assert entry["entry_hash"] == body["entry_hash"]
    # a tampered receipt does not verify
    head, payload, sig = body["receipt"].split(".")
    forged = head + "." + payload[:-2] + ("AA" if payload[-2:] != "AA" else "BB") + "." + sig
    with pytest.raises(Exception, match="receipt"):
        verify_receipt(forged, jwks, api.origin)


def test_idempotency_key_header(api: Server) -> None:  # noqa: F811
    key = f"req-{uuid.uuid4().hex}"
    sub = valid()
    with api.client("producer") as c:
        first = c.post("/v1/entries", json=sub, headers={"Idempotency-Key": key})
        assert first.status_code == 201, first.text
        again = c.post("/v1/entries", json=sub, headers={"Idempotency-Key": key})
        assert again.status_code == 200 and again.json()["replayed"] is True
        assert again.json()["seq"] == first.json()["seq"]
        assert verify_receipt(again.json()["receipt"], c.get("/.well-known/jwks.json").json(),
                              api.origin)["seq"] == first.json()["seq"]
        # same key, other content: 409
        assert_error(c.post("/v1/entries", json=valid(), headers={"Idempotency-Key": key}),
                     409, "idempotency_conflict")
        # header and body disagree: 422
        other = {**valid(), "idempotency_key": "something-else"}
        assert_error(c.post("/v1/entries", json=other, headers={"Idempotency-Key": key + "x"}),
                     422, "idempotency_key_mismatch")
        # a malformed key header is a 400
        assert_error(c.post("/v1/entries", json=valid(), headers={"Idempotency-Key": "a b"}),
                     400, "bad_request")
    with api.client("auditor") as c:
        rows = c.get("/v1/entries", params={"subject": sub["subject"]}).json()["entries"]
    assert len(rows) == 1 and rows[0]["idempotency_key"] == key


def test_batch_per_item_results(api: Server) -> None:  # noqa: F811
    tag = uuid.uuid4().hex
    items: list[Any] = [valid(tag + "-0"), {"engine": "math"}, unverifiable(tag + "-2"),
                        {**valid(tag + "-3"), "surprise": 1}, "not an object"]
    before = quarantined(api)
    with api.client("producer") as c:
        r = c.post("/v1/entries/batch", json=items)
    assert r.status_code == 200, r.text
    res = r.json()["results"]
    assert [x["ok"] for x in res] == [True, False, True, False, False]
    assert res[1]["error"]["code"] == "missing_field"
    assert res[3]["error"]["code"] == "unknown_field" and res[3]["error"]["field"] == "surprise"
    assert res[4]["error"]["code"] == "not_an_object"
    assert res[2]["seq"] == res[0]["seq"] + 1 and res[0]["receipt"] and res[2]["receipt"]
    assert quarantined(api) == before + 3  # rejected items are kept for auditors


def test_batch_idempotency_key_derives_item_keys(api: Server) -> None:  # noqa: F811
    key = f"batch-{uuid.uuid4().hex}"
    items = [valid(), valid()]
    with api.client("producer") as c:
        a = c.post("/v1/entries/batch", json=items, headers={"Idempotency-Key": key}).json()
        b = c.post("/v1/entries/batch", json=items, headers={"Idempotency-Key": key}).json()
    assert [x["seq"] for x in a["results"]] == [x["seq"] for x in b["results"]]
    assert all(x.get("replayed") for x in b["results"])
    with api.client("auditor") as c:
        e = c.get(f"/v1/entries/{a['results'][1]['seq']}").json()["entry"]
    assert e["idempotency_key"] == f"{key}#1"


BAD_BODIES: list[tuple[str, bytes, int, str]] = [
    ("malformed JSON", b'{"result": ', 422, "invalid_json"),
    ("empty body", b"", 422, "invalid_json"),
    ("not UTF-8", b'{"engine": "\xff"}', 422, "invalid_json"),
    ("array instead of object", b"[1, 2]", 422, "not_an_object"),
    ("unknown field", json.dumps({**unverifiable("u"), "extra": 1}).encode(), 422,
     "unknown_field"),
    ("unknown result field", json.dumps({**unverifiable("u"), "result": {
        **unverifiable("u")["result"], "colour": "red"}}).encode(), 422, "unknown_field"),
    ("duplicate key", b'{"engine": "math", "engine": "math", "result": {}}', 422,
     "duplicate_key"),
    ("NaN in result", b'{"engine": "math", "result": {"status": "BLOCKED", "agent_message":'
     b' "x", "developer_fields": {"v": NaN}}}', 422, None),
    ("too deep", b'{"engine": "math", "meta": ' + b'{"a": ' * 80 + b"1" + b"}" * 80 + b"}",
     422, "too_deep"),
    ("VERIFIED without proof", json.dumps({"engine": "math", "result": {
        "status": "VERIFIED", "agent_message": "ok", "developer_fields": {},
        "proof_ref": None}}).encode(), 422, "verified_without_proof"),
    ("huge integer", b'{"engine": "math", "result": {"status": "BLOCKED", "agent_message": '
     b'"x", "developer_fields": {"n": ' + b"9" * 5000 + b"}}}", 422, None),
]


@pytest.mark.parametrize("name,body,status,code", BAD_BODIES, ids=[b[0] for b in BAD_BODIES])
def test_bad_single_bodies_are_4xx(api: Server, name: str, body: bytes,  # noqa: F811
                                   status: int, code: str | None) -> None:
    with api.client("producer") as c:
        assert_error(c.post("/v1/entries", content=body,
                            headers={"Content-Type": "application/json"}), status, code)


def test_body_over_the_limit_is_413_before_parsing(api: Server) -> None:  # noqa: F811
    big = b'{"engine": "math", "meta": {"pad": "' + b"x" * MAX_SUBMISSION_BYTES + b'"}}'
    with api.client("producer") as c:
        assert_error(c.post("/v1/entries", content=big), 413, "too_large")

        def chunks() -> Any:  # no Content-Length: the server counts as it receives
            for i in range(0, len(big), 64 * 1024):
                yield big[i:i + 64 * 1024]

        assert_error(c.post("/v1/entries", content=chunks()), 413, "too_large")
        # exactly at the limit is parsed (and then judged on its content)
        at_limit = b" " * (MAX_SUBMISSION_BYTES - 2) + b"{}"
        assert_error(c.post("/v1/entries", content=at_limit), 422)
        # GET endpoints take no body worth more than 64 KiB
        assert_error(c.request("GET", "/v1/health", content=b"x" * 70_000), 413, "too_large")


def test_bad_batches(api: Server) -> None:  # noqa: F811
    with api.client("producer") as c:
        assert_error(c.post("/v1/entries/batch", json=valid()), 422, "not_an_array")
        assert_error(c.post("/v1/entries/batch", content=b"[{}, "), 422, "invalid_json")
        assert_error(c.post("/v1/entries/batch", content=b"[{}] []"), 422, "invalid_json")
        assert_error(c.post("/v1/entries/batch", content=b"[" * 100_000), 422)
        too_many = b"[" + b",".join([b"{}"] * 1001) + b"]"
        assert_error(c.post("/v1/entries/batch", content=too_many), 413, "batch_too_large")
        assert c.post("/v1/entries/batch", content=b" [ ] ").json() == {"results": []}


def test_routing_and_parameter_errors_are_json(api: Server) -> None:  # noqa: F811
    with api.client("auditor") as c:
        assert_error(c.get("/v1/nothing-here"), 404, "no_such_route")
        assert_error(c.delete("/v1/entries"), 405, "method_not_allowed")
        assert_error(c.get("/v1/entries/batch"), 405, "method_not_allowed")
        assert_error(c.get("/v1/entries/99999999"), 404, "not_found")
        assert_error(c.get(f"/v1/entries/{10**30}"), 400, "bad_request")
        assert_error(c.get("/v1/entries", params={"limit": 0}), 400, "bad_request")
        assert_error(c.get("/v1/entries", params={"limit": "many"}), 400, "bad_request")
        assert_error(c.get("/v1/entries", params={"after": -5}), 400, "bad_request")
        assert_error(c.get("/v1/entries", params={"stauts": "VERIFIED"}), 400,
                     "unknown_parameter")
        assert_error(c.get("/v1/entries", params={"since": "yesterday"}), 400)
        assert_error(c.get("/v1/entries", params={"engine": "a\x00b"}), 400)
        assert_error(c.get("/v1/entries/0", params={"proof": "maybe"}), 400, "bad_request")
        assert_error(c.get("/v1/export", params={"format": "xml"}), 400, "bad_request")
