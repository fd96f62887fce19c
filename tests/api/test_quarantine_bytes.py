"""A rejected HTTP submission is quarantined as the exact bytes that arrived, with or
without an ``Idempotency-Key`` header (which makes the service parse the body to carry the
key): odd spacing, key order and unicode escapes survive, read back from the store."""

from __future__ import annotations

import uuid

import pytest
from sqlalchemy import select

from ledger.store.db import make_engine
from ledger.store.schema import quarantine
from tests.api.server import Server, api  # noqa: F401 - fixture


def quarantined_raw(api: Server, marker: str) -> list[bytes]:  # noqa: F811
    """The raw bytes of every quarantine row that contains ``marker``."""
    eng = make_engine(api.db_url)
    try:
        with eng.connect() as conn:
            rows = conn.execute(select(quarantine.c.raw)).scalars().all()
    finally:
        eng.dispose()
    return [bytes(r) for r in rows if marker.encode() in bytes(r)]


def odd_bodies(marker: str) -> list[bytes]:
    """Rejected submissions whose bytes a parse and re-serialization would change."""
    return [
        # an unknown field; odd whitespace, "subject" first, escaped non-ASCII
        ('{ "subject" :"' + marker + '",\n\t"engine":"math" ,  "bogus" : 1,'
         '"result":{"status":"UNVERIFIABLE","agent_message":"caf\\u00e9 \\ud83d\\ude00",'
         '"proof_ref":null}}  ').encode(),
        # a contract break (VERIFIED without evidence); raw UTF-8 and an escaped solidus
        ('{"result": {"agent_message": "ok \u00e9\\/", "status": "VERIFIED",'
         ' "proof_ref": "sha256:' + "0" * 64 + '"}, "engine": "math",'
         '    "subject": "' + marker + '"}').encode(),
    ]


@pytest.mark.parametrize("keyed", [False, True], ids=["no-key", "idempotency-key"])
def test_rejected_single_append_keeps_the_sent_bytes(api: Server, keyed: bool,  # noqa: F811
                                                     ) -> None:
    marker = f"q-{uuid.uuid4().hex}"
    bodies = odd_bodies(marker)
    with api.client("producer") as c:
        for i, body in enumerate(bodies):
            headers = {"Content-Type": "application/json"}
            if keyed:
                headers["Idempotency-Key"] = f"{marker}-{i}"
            r = c.post("/v1/entries", content=body, headers=headers)
            assert r.status_code == 422, r.text
    assert sorted(quarantined_raw(api, marker)) == sorted(bodies)


def test_rejected_item_with_its_own_matching_key_keeps_the_sent_bytes(
        api: Server) -> None:  # noqa: F811
    marker = f"q-{uuid.uuid4().hex}"
    key = f"{marker}-own"
    body = ('{"idempotency_key" : "' + key + '", "subject":"' + marker + '",'
            '"engine":"math","bogus":[1, 2 ,3],"result":{"status":"UNVERIFIABLE",'
            '"agent_message":"\\u0041","proof_ref":null}}').encode()
    with api.client("producer") as c:
        r = c.post("/v1/entries", content=body, headers={"Idempotency-Key": key})
        assert r.status_code == 422 and r.json()["code"] == "unknown_field", r.text
    assert quarantined_raw(api, marker) == [body]


@pytest.mark.parametrize("keyed", [False, True], ids=["no-key", "idempotency-key"])
def test_rejected_batch_items_keep_their_sent_bytes(api: Server, keyed: bool,  # noqa: F811
                                                    ) -> None:
    marker = f"q-{uuid.uuid4().hex}"
    items = odd_bodies(marker)
    body = b"[ " + b" ,\n ".join(items) + b"\t]"
    headers = {"Idempotency-Key": marker} if keyed else {}
    with api.client("producer") as c:
        r = c.post("/v1/entries/batch", content=body, headers=headers)
        assert r.status_code == 200, r.text
        assert [x["ok"] for x in r.json()["results"]] == [False, False]
    # each item as its own text: the array's separators are not part of it
    assert sorted(quarantined_raw(api, marker)) == sorted(b.strip() for b in items)


def test_a_keyed_body_that_is_not_an_object_is_rejected_and_kept(api: Server,  # noqa: F811
                                                                 ) -> None:
    marker = f"q-{uuid.uuid4().hex}"
    body = ('[ "' + marker + '" ,\t"\\u00e9" ]').encode()
    with api.client("producer") as c:
        r = c.post("/v1/entries", content=body, headers={"Idempotency-Key": marker})
        assert r.status_code == 422 and r.json()["code"] == "not_an_object", r.text
    assert quarantined_raw(api, marker) == [body]
