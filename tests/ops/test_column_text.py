"""Strings that become columns are refused when one of the engines cannot store them
(U+0000 on PostgreSQL, values wider than the column), with the same rule on SQLite and
PostgreSQL; payloads are bytes and keep them.  The rejected item is quarantined, its
batch-mates are stored, nothing else is written."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from sqlalchemy import func, select

from ledger.core.entry import digest_text
from ledger.errors import UsageError
from ledger.facade import Ledger
from ledger.store.schema import entries, quarantine

PRE = "the evidence"


def _b64(obj: Any) -> str:
    raw = obj if isinstance(obj, bytes) else json.dumps(obj).encode()
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def token(kid: str = "did:example:p#k1", iss: str = "did:example:p") -> str:
    """An ES256-shaped JWT (not signed by a trusted key: judged unchecked)."""
    header = {"alg": "ES256", "typ": "qwed-attestation+jwt", "kid": kid}
    return ".".join([_b64(header), _b64({"iss": iss}), _b64(b"s" * 64)])


def verified(**top: Any) -> dict[str, Any]:
    dev = top.pop("developer_fields", {"constraint_id": "math.root"})
    return {"engine": "math", "proof_preimage": PRE, **top,
            "result": {"status": "VERIFIED", "agent_message": "ok", "developer_fields": dev,
                       "proof_ref": digest_text(PRE.encode())}}


def blocked(i: int) -> dict[str, Any]:
    return {"engine": "logic", "subject": f"mate-{i}",
            "result": {"status": "BLOCKED", "agent_message": f"no {i}"}}


def _counts(L: Ledger) -> tuple[int, list[tuple[str, str | None]]]:
    with L.engine.connect() as conn:
        n = conn.execute(select(func.count()).select_from(entries)).scalar_one()
        q = conn.execute(select(quarantine.c.code, quarantine.c.field)).all()
    return n, [tuple(r) for r in q]


COLUMN_CASES = {
    "subject": (verified(subject="a\x00b"), "subject"),
    "idempotency_key": (verified(idempotency_key="k\x00"), "idempotency_key"),
    "constraint_id": (verified(developer_fields={"constraint_id": "c\x00"}),
                      "result.developer_fields.constraint_id"),
    "att_kid": (verified(attestation=token(kid="k\x001")), "attestation"),
    "att_iss": (verified(attestation=token(iss="did:\x00")), "attestation"),
}


@pytest.mark.parametrize("case", sorted(COLUMN_CASES))
def test_nul_in_a_column_string_is_refused_on_both_engines(db_url, case):
    bad, field = COLUMN_CASES[case]
    with Ledger.init(db_url) as L:
        res = L.append_many([blocked(0), json.dumps(bad), blocked(1)])
        assert [r.ok for r in res] == [True, False, True]
        assert (res[1].error["code"], res[1].error["field"]) == ("invalid_text", field)
        assert [L.get(r.seq)["subject"] for r in (res[0], res[2])] == ["mate-0", "mate-1"]
        assert _counts(L) == (2, [("invalid_text", field)])


def test_a_single_append_with_nul_is_refused_and_writes_only_the_quarantine(db_url):
    with Ledger.init(db_url) as L:
        res = L.append(verified(subject="\x00"))
        assert (res.ok, res.error["code"], res.error["field"]) == (False, "invalid_text",
                                                                   "subject")
        assert _counts(L) == (0, [("invalid_text", "subject")])


def test_a_producer_with_nul_is_refused_before_anything_is_written(db_url):
    with Ledger.init(db_url) as L:
        with pytest.raises(UsageError) as err:
            L.append_many([blocked(0)], producer="p\x00")
        assert (err.value.code, err.value.field) == ("invalid_text", "producer")
        assert _counts(L) == (0, [])


WIDTH_CASES = {
    "subject": (verified(subject="s" * 257), "field_too_long", "subject"),
    "idempotency_key": (verified(idempotency_key="k" * 257), "field_too_long",
                        "idempotency_key"),
    "att_kid": (verified(attestation=token(kid="k" * 513)), "attestation_malformed",
                "attestation"),
    "att_iss": (verified(attestation=token(iss="i" * 513)), "attestation_malformed",
                "attestation"),
}


@pytest.mark.parametrize("case", sorted(WIDTH_CASES))
def test_strings_wider_than_their_column_are_refused_on_both_engines(db_url, case):
    bad, code, field = WIDTH_CASES[case]
    with Ledger.init(db_url) as L:
        res = L.append_many([blocked(0), bad])
        assert [r.ok for r in res] == [True, False]
        assert (res[1].error["code"], res[1].error["field"]) == (code, field)
        assert _counts(L) == (1, [(code, field)])


def test_widest_column_strings_and_a_long_constraint_id_are_stored(db_url):
    long_cid = "c" * 300 + "\x00"  # too long for the column: kept in the document only
    sub = verified(subject="s" * 256, idempotency_key="k" * 256,
                   attestation=token(kid="k" * 512, iss="i" * 512),
                   developer_fields={"constraint_id": long_cid})
    with Ledger.init(db_url) as L:
        (res,) = L.append_many([sub], producer="p" * 256)
        assert res.ok, res.error
        got = L.get(res.seq)
        assert (got["subject"], got["constraint_id"], got["producer"]) == (
            "s" * 256, None, "p" * 256)
        assert got["document"]["developer_fields"]["constraint_id"] == long_cid


def test_nul_in_payloads_is_stored_on_both_engines(db_url):
    pre = "evidence\x00bytes"
    sub = {"engine": "math", "proof_preimage": pre, "query": "q\x00", "meta": {"m\x00": "v\x00"},
           "result": {"status": "VERIFIED", "agent_message": "ok\x00",
                      "developer_fields": {"note\x00": "x\x00y"},
                      "proof_ref": digest_text(pre.encode())}}
    with Ledger.init(db_url) as L:
        (res,) = L.append_many([json.dumps(sub)])
        assert res.ok, res.error
        got = L.get(res.seq)
        assert got["payloads"]["preimage"]["text"] == pre
        assert got["payloads"]["query"]["text"] == "q\x00"
        assert got["document"]["developer_fields"] == {"note\x00": "x\x00y"}
        assert json.loads(got["payloads"]["meta"]["text"]) == {"m\x00": "v\x00"}


@pytest.mark.parametrize("key", ["a\x00", "k" * 300, "\ud800"], ids=["nul", "long", "surrogate"])
def test_a_rejection_naming_an_unstorable_key_is_quarantined(db_url, key):
    bad = json.dumps({"engine": "x", "result": {"status": "BLOCKED", "agent_message": "m"},
                      key: 1})
    with Ledger.init(db_url) as L:
        res = L.append_many([bad, blocked(0)])
        assert [r.ok for r in res] == [False, True]
        assert (res[0].error["code"], res[0].error["field"]) == ("unknown_field", key)
        n, rows = _counts(L)
        assert n == 1 and [code for code, _ in rows] == ["unknown_field"]
        assert rows[0][1] is not None and len(rows[0][1]) <= 256
