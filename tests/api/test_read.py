"""Layered reads against a real server: projections, layer leaks, proofs, pagination,
checkpoint, JWKS and the JSON Lines export."""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import json
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest

from ledger.core.diagnostics import compute_proof_ref
from ledger.core.entry import parse_hash_hex
from ledger.core.merkle import leaf_hash, verify_inclusion
from ledger.crypto.keys import known_keys, load_public_keys
from ledger.crypto.note_sign import open_checkpoint
from ledger.ops.query import AGENT_FIELDS, DEVELOPER_FIELDS
from ledger.verify.proof import verify_bundle
from tests.api.server import Server, api  # noqa: F401 - fixture

SECRET = "S3CRET"  # every layer-2/3 value of the sentinel entry contains this


def sentinel(tag: str) -> dict[str, Any]:
    """A VERIFIED entry whose every non-agent field carries SECRET."""
    evidence = {"calc": f"{SECRET}-evidence-{tag}", "claimed": 1}
    return {
        "result": {"status": "VERIFIED", "agent_message": "Claim verified",
                   "developer_fields": {"constraint_id": f"{SECRET}.cid.{tag}",
                                        "expected": f"{SECRET}-expected"},
                   "proof_ref": compute_proof_ref(evidence), "is_authoritative": True},
        "engine": "math", "evidence": evidence, "query": f"{SECRET} query {tag}",
        "subject": f"{SECRET}-subject-{tag}", "meta": {"model": f"{SECRET}-model"},
        "idempotency_key": f"{SECRET}-idem-{tag}",
    }


@pytest.fixture
def planted(api: Server) -> tuple[Server, int, str]:  # noqa: F811
    tag = uuid.uuid4().hex[:10]
    prod = httpx.Client(base_url=api.base_url, headers={
        "Authorization": f"Bearer {api.token('producer', f'{SECRET}-producer')}"})
    with prod:
        r = prod.post("/v1/entries", json=sentinel(tag))
    assert r.status_code == 201, r.text
    return api, r.json()["seq"], tag


def test_each_layer_sees_its_allow_list(planted: tuple[Server, int, str]) -> None:
    srv, seq, tag = planted
    views = {}
    for role in ("agent", "developer", "auditor"):
        with srv.client(role) as c:
            body = c.get(f"/v1/entries/{seq}").json()
        assert body["layer"] == role
        views[role] = body["entry"]
    assert set(views["agent"]) == set(AGENT_FIELDS)
    assert views["agent"]["status"] == "VERIFIED"
    assert views["agent"]["agent_message"] == "Claim verified"
    assert set(views["developer"]) == set(DEVELOPER_FIELDS)
    assert views["developer"]["constraint_id"] == f"{SECRET}.cid.{tag}"
    dev_text = json.dumps(views["developer"])
    for hidden in ("evidence", "query", "model", "idem", "producer"):
        assert f"{SECRET}-{hidden}" not in dev_text and f"{SECRET} {hidden}" not in dev_text
    aud = views["auditor"]
    assert aud["producer"] == f"{SECRET}-producer" and aud["proof_ref"].startswith("sha256:")
    assert SECRET in aud["preimage"] and aud["query"] == f"{SECRET} query {tag}"


def agent_requests(seq: int, tag: str) -> list[tuple[str, dict[str, Any]]]:
    return [
        (f"/v1/entries/{seq}", {}),
        (f"/v1/entries/{seq}", {"proof": "true"}),
        ("/v1/entries", {}),
        ("/v1/entries", {"status": "VERIFIED", "limit": 1000}),
        ("/v1/entries", {"kind": "result", "after": seq - 1}),
        ("/v1/entries", {"since": "2000-01-01T00:00:00Z"}),
        ("/v1/entries", {"constraint_id": f"{SECRET}.cid.{tag}"}),
        ("/v1/entries", {"engine": "math"}),
        ("/v1/entries", {"subject": f"{SECRET}-subject-{tag}"}),
        ("/v1/entries", {"proof_ref": "sha256:" + "0" * 64}),
        ("/v1/entries", {"producer": f"{SECRET}-producer"}),
        ("/v1/export", {}),
        ("/v1/export", {"status": "VERIFIED"}),
        ("/v1/export", {"format": "records"}),
        ("/v1/export", {"constraint_id": f"{SECRET}.cid.{tag}"}),
        ("/v1/checkpoint", {}),
        ("/v1/entries/999999999", {}),
        ("/v1/entries", {"until": "not a time"}),
        # every request the web console makes (tests/api/test_console_routes.py pins the
        # list against ledger/console/app.js; the browser tests record them live)
        ("/v1/entries", {"limit": 1}),
        ("/v1/entries", {"status": "VERIFIED", "limit": 25, "after": -1}),
        ("/v1/entries", {"kind": "result", "limit": 1000, "after": -1}),
        (f"/v1/entries/{seq}", {"proof": "true"}),
        ("/v1/checkpoints", {"after": -1, "limit": 1000}),
        ("/v1/audits", {"limit": 1000}),
        ("/v1/audits/1", {}),
        ("/.well-known/jwks.json", {}),
        ("/v1/entries", {"status": ["VERIFIED", "BLOCKED"], "order": "desc", "limit": 25,
                         "count": "true"}),
        ("/v1/entries", {"order": "desc", "before": seq + 1, "count": "true"}),
        ("/v1/entries/values", {"field": "status"}),
        ("/v1/entries/values", {"field": "kind"}),
        ("/v1/entries/values", {"field": "producer"}),
        ("/v1/entries/values", {"field": "engine"}),
        ("/v1/entries/by-hash/" + "ab" * 32, {}),
        ("/v1/export", {"status": ["VERIFIED", "BLOCKED"], "format": "csv"}),
        ("/v1/export", {"format": "json"}),
        ("/v1/export/bundle", {}),
        ("/v1/audits/1", {"format": "csv"}),
        ("/v1/aggregates", {"bucket": "auto"}),
        ("/v1/aggregates", {"engine": "math"}),
        ("/v1/reverify-runs", {"limit": 20}),
    ]


def test_agent_never_receives_a_developer_field(planted: tuple[Server, int, str]) -> None:
    """Whatever the query: no SECRET byte, no key outside the agent allow-list; filters
    on hidden fields are refused (a filter would reveal the field one bit at a time)."""
    srv, seq, tag = planted
    with srv.client("agent") as c:
        for path, params in agent_requests(seq, tag):
            r = c.get(path, params=params)
            assert r.status_code < 500, (path, params, r.text)
            assert SECRET not in r.text, (path, params, r.text[:300])
            if r.status_code != 200 or path in ("/v1/checkpoint", "/v1/checkpoints",
                                                 "/.well-known/jwks.json"):
                continue
            if path == "/v1/aggregates":  # by status only: no engine, producer, finding
                doc = r.json()
                assert doc["series"] == ["status"] and "engines" not in doc, doc
                for b in doc["buckets"]:
                    assert set(b) == {"start", "results", "unverified", "flagged"}, b
                    assert all(len(x) == 2 for x in b["results"]), b
                continue
            if path == "/v1/reverify-runs":  # the verdict, the counts, the seqs that disagree
                for run in r.json()["runs"]:
                    assert set(run) <= {"seq", "recorded_at", "integrity", "outcome",
                                        "summary", "range", "outcomes_proven",
                                        "disagreements"}, run
                    assert all(set(d) == {"seq"} for d in run["disagreements"]), run
                continue
            if path == "/v1/entries/values":  # a pick-list: of a field the agent may see
                assert params["field"] in ("status", "kind"), params
                assert set(r.json()["values"]) <= {"VERIFIED", "UNVERIFIABLE", "BLOCKED",
                                                   "result"}, r.json()
                continue
            fmt = params.get("format")
            if path == "/v1/export" and fmt == "csv":
                rows = list(csv.DictReader(io.StringIO(r.text)))
                assert rows
            elif path == "/v1/export" and fmt == "json":
                rows = r.json()
            elif path == "/v1/export":
                rows = [json.loads(x) for x in r.text.splitlines()]
            else:
                rows = r.json().get("entries") or [r.json()["entry"]]
            for row in rows:
                assert set(row) <= set(AGENT_FIELDS), (path, sorted(row))
        for name in ("constraint_id", "engine", "subject", "proof_ref", "producer",
                     "att_kid", "att_verdict"):
            r = c.get("/v1/entries", params={name: "x"})
            assert r.status_code == 403 and r.json()["error"]["code"] == "forbidden_filter"
    with srv.client("developer") as c:
        for name in ("proof_ref", "producer", "att_kid", "att_verdict"):
            assert c.get("/v1/entries", params={name: "x"}).status_code == 403
        assert c.get("/v1/entries", params={"constraint_id": f"{SECRET}.cid.{tag}"}
                     ).json()["entries"][0]["seq"] == seq
        assert c.get("/v1/export", params={"format": "records"}).status_code == 403


def _jwks_keys(api: Server, tmp_path: Path) -> list[Any]:  # noqa: F811
    path = tmp_path / "jwks.json"
    path.write_text(httpx.get(api.base_url + "/.well-known/jwks.json").text)
    return load_public_keys(path)


def test_proofs(planted: tuple[Server, int, str], tmp_path: Path) -> None:
    srv, seq, _ = planted
    keys = _jwks_keys(srv, tmp_path)
    with srv.client("auditor") as c:
        bundle = c.get(f"/v1/entries/{seq}", params={"proof": "true"}).json()["proof"]
    result = verify_bundle(bundle, keys)  # offline: envelope, payloads, path, signature
    assert result.seq == seq and result.tree_size > seq
    with srv.client("agent") as c:
        proof = c.get(f"/v1/entries/{seq}", params={"proof": "true"}).json()["proof"]
    assert "entry" not in proof and "envelope" not in json.dumps(proof)
    cp, signers = open_checkpoint(proof["checkpoint"], known_keys(keys, srv.origin))
    assert signers and cp.size == proof["tree_size"]
    verify_inclusion(seq, cp.size, leaf_hash(parse_hash_hex(proof["entry_hash"])),
                     [bytes.fromhex(h) for h in proof["inclusion_path"]], cp.root_hash)
    # the checkpoint endpoint serves the latest signed note
    with srv.client("developer") as c:
        r = c.get("/v1/checkpoint")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/plain")
    latest, _ = open_checkpoint(r.text, known_keys(keys, srv.origin))
    assert latest.origin == srv.origin and latest.size >= cp.size


def test_keyset_pagination(api: Server) -> None:  # noqa: F811
    subject = f"page-{uuid.uuid4().hex[:8]}"
    items = [{"result": {"status": "BLOCKED", "agent_message": f"blocked {i}",
                         "developer_fields": {}, "proof_ref": None},
              "engine": "sql", "subject": subject} for i in range(7)]
    with api.client("producer") as c:
        seqs = [x["seq"] for x in c.post("/v1/entries/batch", json=items).json()["results"]]
    got, after = [], -1
    with api.client("developer") as c:
        for _ in range(10):
            page = c.get("/v1/entries", params={"subject": subject, "limit": 3,
                                                "after": after}).json()
            got += [e["seq"] for e in page["entries"]]
            if page["next_after"] is None:
                break
            after = page["next_after"]
    assert got == seqs


def test_export_streams_json_lines(api: Server) -> None:  # noqa: F811
    subject = f"exp-{uuid.uuid4().hex[:8]}"
    items = [{"result": {"status": "UNVERIFIABLE", "agent_message": f"u {i}",
                         "developer_fields": {"constraint_id": "c"}, "proof_ref": None},
              "engine": "fact", "subject": subject} for i in range(5)]
    with api.client("producer") as c:
        c.post("/v1/entries/batch", json=items)
    with api.client("developer") as c:
        r = c.get("/v1/export", params={"subject": subject})
    assert r.status_code == 200 and r.headers["content-type"] == "application/x-ndjson"
    rows = [json.loads(x) for x in r.text.splitlines()]
    assert len(rows) == 5 and all(set(x) == set(DEVELOPER_FIELDS) for x in rows)
    assert r.headers["x-ledger-layer"] == "developer"
    # auditors can stream the verifiable records: payload bytes hash to their digests,
    # and consecutive records link (prev_hash of one = entry_hash of the one before)
    with api.client("auditor") as c:
        r = c.get("/v1/export", params={"format": "records", "limit": 50})
    recs = [json.loads(x) for x in r.text.splitlines()]
    assert 1 <= len(recs) <= 50 and recs[0]["seq"] == 0
    for a, b in zip(recs, recs[1:]):
        assert b["prev_hash"] == a["entry_hash"] and b["seq"] == a["seq"] + 1
    for rec in recs:
        for p in rec["payloads"].values():
            data = base64.b64decode(p["data_b64"])
            if "salt_b64" in p:  # format v2: the salted commitment (docs/format.md)
                data = b"ledger.payload.v2\x00" + base64.b64decode(p["salt_b64"]) + data
            assert "sha256:" + hashlib.sha256(data).hexdigest() == p["digest"]


def test_health_and_jwks_need_no_token(api: Server) -> None:  # noqa: F811
    h = httpx.get(api.base_url + "/v1/health").json()
    assert h["size"] >= 0 and h["head_hash"].startswith("sha256:")
    jwks = httpx.get(api.base_url + "/.well-known/jwks.json").json()
    assert jwks["keys"] and all("d" not in k for k in jwks["keys"])
    assert {k["kty"] for k in jwks["keys"]} == {"OKP"}


def test_agents_see_result_entries_only(api: Server, tmp_path: Path) -> None:  # noqa: F811
    """Key events and audit runs are operational internals: agents never list or get them."""
    from ledger.facade import Ledger

    with Ledger.open(api.db_url) as ledger:
        (event,) = ledger.trust_issuer("did:test:agent-hidden", {"keys": [{
            "kty": "EC", "crv": "P-256", "kid": "k-agent-hidden",
            "x": "f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU",
            "y": "x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0"}]}, reason="test")
    seq = event.seq
    with api.client("agent") as c:
        assert c.get(f"/v1/entries/{seq}").status_code == 404
        rows = c.get("/v1/entries", params={"after": seq - 1, "limit": 1000}).json()["entries"]
        assert all(r["kind"] == "result" for r in rows) and seq not in [r["seq"] for r in rows]
        assert all(json.loads(x)["kind"] == "result" for x in c.get("/v1/export").text.splitlines())
        r = c.get("/v1/entries", params={"kind": "key_event"})
        assert r.status_code == 403 and r.json()["error"]["code"] == "forbidden_filter"
    with api.client("developer") as c:
        assert c.get(f"/v1/entries/{seq}").json()["entry"]["kind"] == "key_event"
