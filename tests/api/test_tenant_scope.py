"""Tenant-scoped tokens against a real server, on both engines (docs/http.md, "Tenants").

A ledger with entries of the tenants ``acme`` and ``globex`` (appended over HTTP by producer
tokens scoped to them) and of ``default`` (an operator-level producer).  For every entries
read a token of ``acme`` sees only acme's entries, counts and values, and is answered about a
globex entry exactly as about a seq (or hash) that does not exist; an operator-level token
sees everything; what spans every tenant refuses a tenant token with one 403 ``tenant_scope``.
Each engine gets a server of its own, shared by the module (its ledger holds exactly what
the module appended, so counts are exact).
"""

from __future__ import annotations

import csv
import io
import json
import random
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from click.testing import CliRunner
from sqlalchemy import create_engine, text

from ledger.cli.main import cli
from ledger.crypto.keys import Keyring
from ledger.crypto.tokens import ledger_signer
from ledger.demo.samples import logic_verified, math_verified
from ledger.ops.tokens import ACCESS_TOKEN_TYP, mint_access_token
from tests.api.server import Server, prepare_ledger, start_server
from tests.conftest import ENGINES, engine_url

A, B = "acme", "globex"
MISSING = 10**6  # a seq no entry has
MISSING_HASH = "sha256:" + "ab" * 32


def sub(tag: str, logic: bool = False) -> dict[str, Any]:
    make = logic_verified if logic else math_verified
    s = make(random.Random(tag).randrange(10**6), random.Random(tag))
    s["subject"] = tag
    return s


class Scoped:
    """The module's server, its tokens, and the seqs of each tenant."""

    def __init__(self, srv: Server) -> None:
        self.srv = srv
        self.seqs: dict[str, list[int]] = {A: [], B: [], "default": []}
        self.hashes: dict[str, list[str]] = {A: [], B: [], "default": []}

    def token(self, role: str, tenant: str | None, subject: str | None = None) -> str:
        signer = ledger_signer(Keyring.load(self.srv.keys_dir), self.srv.origin)
        return mint_access_token(signer, role=role, subject=subject or f"{role}-{tenant}",
                                 ttl_s=3600, issuer=self.srv.origin,
                                 audience=self.srv.origin, now_s=int(time.time()),
                                 tenant=tenant)

    def client(self, role: str, tenant: str | None, subject: str | None = None,
               ) -> httpx.Client:
        return httpx.Client(base_url=self.srv.base_url, timeout=30.0, headers={
            "Authorization": f"Bearer {self.token(role, tenant, subject)}"})

    def stored_tenants(self) -> dict[int, str]:
        eng = create_engine(self.srv.db_url)
        try:
            with eng.connect() as conn:
                return {int(s): str(t) for s, t in
                        conn.execute(text("SELECT seq, tenant FROM entries")).all()}
        finally:
            eng.dispose()


@pytest.fixture(scope="module", params=ENGINES)
def scoped(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory,
           ) -> Iterator[Scoped]:
    kind = request.param
    tmp = tmp_path_factory.mktemp(f"tenant-{kind}")
    db_url = engine_url(kind, request, tmp)
    origin = f"test.example/tenants-{kind}"
    prepare_ledger(db_url, tmp / "keys", origin)
    proc, url = start_server(db_url, tmp / "keys", tmp / "serve.log",
                             "--checkpoint-on-demand-interval", "1s")
    srv = Server(kind, db_url, tmp / "keys", origin, proc, url, tmp / "serve.log")
    s = Scoped(srv)
    try:
        # interleaved: a, b, default, a (batch of 2), b (logic engine: a value only b has)
        plan = [(A, sub("a-0")), (B, sub("b-0")), (None, sub("d-0")), (A, sub("a-1")),
                (B, sub("b-1", logic=True))]
        for tenant, body in plan:
            with s.client("producer", tenant) as c:
                r = c.post("/v1/entries", json=body)
                assert r.status_code == 201, r.text
                s.seqs[tenant or "default"].append(r.json()["seq"])
                s.hashes[tenant or "default"].append(r.json()["entry_hash"])
        with s.client("producer", A) as c:
            r = c.post("/v1/entries/batch", json=[sub("a-2"), sub("a-3")])
            assert r.status_code == 200, r.text
            for item in r.json()["results"]:
                assert item["ok"], item
                s.seqs[A].append(item["seq"])
                s.hashes[A].append(item["entry_hash"])
        yield s
    finally:
        srv.stop()


def all_seqs(s: Scoped) -> list[int]:
    return sorted(s.seqs[A] + s.seqs[B] + s.seqs["default"])


def listed(c: httpx.Client, **params: Any) -> list[int]:
    r = c.get("/v1/entries", params={"limit": 1000, **params})
    assert r.status_code == 200, r.text
    return [e["seq"] for e in r.json()["entries"]]


def same_answer(x: httpx.Response, y: httpx.Response, x_seq: int, y_seq: int) -> None:
    """The two responses are the same but for the seq each asked about."""
    assert x.status_code == y.status_code
    assert x.headers.get("content-type") == y.headers.get("content-type")
    assert x.text.replace(str(x_seq), "N") == y.text.replace(str(y_seq), "N")


# -- writes ---------------------------------------------------------------------------------
def test_tenant_tokens_append_into_their_tenant(scoped: Scoped) -> None:
    stored = scoped.stored_tenants()
    assert len(stored) == len(all_seqs(scoped))
    for tenant in (A, B, "default"):
        assert sorted(s for s, t in stored.items() if t == tenant) == scoped.seqs[tenant]


def test_an_idempotency_key_used_in_another_tenant_names_no_entry(scoped: Scoped) -> None:
    """The same producer subject in two tenants: keys are unique per producer, so B's use of
    A's key is a conflict that names neither A's seq nor A's hash."""
    body = sub("shared-key")
    with scoped.client("producer", A, subject="shared") as c:
        first = c.post("/v1/entries", json=body, headers={"Idempotency-Key": "k-1"})
        assert first.status_code == 201, first.text
        again = c.post("/v1/entries", json=body, headers={"Idempotency-Key": "k-1"})
        assert again.status_code == 200 and again.json()["replayed"] is True
    scoped.seqs[A].append(first.json()["seq"])
    scoped.hashes[A].append(first.json()["entry_hash"])
    with scoped.client("producer", B, subject="shared") as c:
        r = c.post("/v1/entries", json=body, headers={"Idempotency-Key": "k-1"})
    assert r.status_code == 409, r.text
    assert r.json()["code"] == "idempotency_conflict"
    assert str(first.json()["seq"]) not in r.text
    assert first.json()["entry_hash"].split(":")[1] not in r.text
    assert "detail" not in r.json()["error"]


# -- reads: scoped --------------------------------------------------------------------------
@pytest.mark.parametrize("role", ["auditor", "developer", "agent"])
def test_lists_and_counts_are_the_tenants_own(scoped: Scoped, role: str) -> None:
    with scoped.client(role, A) as c:
        assert listed(c) == scoped.seqs[A]
        assert listed(c, order="desc") == scoped.seqs[A][::-1]
        assert listed(c, limit=2) == scoped.seqs[A][:2]
        r = c.get("/v1/entries", params={"count": "true", "limit": 1})
        assert r.status_code == 200 and r.json()["index_total"] == len(scoped.seqs[A])
        assert r.json()["next_after"] == scoped.seqs[A][0]
        r = c.get("/v1/entries", params={"count": "true", "status": "VERIFIED"})
        assert r.json()["index_total"] == len(scoped.seqs[A])
        # a filter that only B's entries match: nothing, counted as nothing
        if role != "agent":
            r = c.get("/v1/entries", params={"count": "true", "engine": "logic"})
            assert r.json()["entries"] == [] and r.json()["index_total"] == 0
    with scoped.client(role, B) as c:
        assert listed(c) == scoped.seqs[B]


@pytest.mark.parametrize("role", ["auditor", "developer", "agent"])
def test_another_tenants_seq_is_answered_as_a_missing_one(scoped: Scoped, role: str) -> None:
    b = scoped.seqs[B][0]
    with scoped.client(role, A) as c:
        for q in ("", "?proof=true", "?proof=true&tree_size=1000000000"):
            got, missing = c.get(f"/v1/entries/{b}{q}"), c.get(f"/v1/entries/{MISSING}{q}")
            assert got.status_code == 404, got.text
            same_answer(got, missing, b, MISSING)
        own = c.get(f"/v1/entries/{scoped.seqs[A][0]}")
        assert own.status_code == 200 and own.json()["entry"]["seq"] == scoped.seqs[A][0]
        # the default tenant's entries are another tenant's too
        d = scoped.seqs["default"][0]
        same_answer(c.get(f"/v1/entries/{d}"), c.get(f"/v1/entries/{MISSING}"), d, MISSING)


def test_own_entry_with_its_proof(scoped: Scoped) -> None:
    a = scoped.seqs[A][0]
    with scoped.client("auditor", A) as c:
        r = c.get(f"/v1/entries/{a}", params={"proof": "true"})
    assert r.status_code == 200, r.text
    assert r.json()["proof"]["seq"] == a


def test_by_hash_finds_only_the_tenants_own(scoped: Scoped) -> None:
    with scoped.client("auditor", A) as c:
        own = c.get(f"/v1/entries/by-hash/{scoped.hashes[A][0]}")
        assert own.status_code == 200 and own.json() == {"seq": scoped.seqs[A][0]}
        other = c.get(f"/v1/entries/by-hash/{scoped.hashes[B][0]}")
        missing = c.get(f"/v1/entries/by-hash/{MISSING_HASH}")
    assert other.status_code == 404
    same_answer(other, missing, 0, 0)
    with scoped.client("auditor", None) as c:
        assert c.get(f"/v1/entries/by-hash/{scoped.hashes[B][0]}").json() == \
            {"seq": scoped.seqs[B][0]}


@pytest.mark.parametrize("field", ["kind", "status", "engine", "producer"])
def test_pick_lists_hold_the_tenants_values_only(scoped: Scoped, field: str) -> None:
    with scoped.client("auditor", A) as c:
        mine = c.get("/v1/entries/values", params={"field": field}).json()["values"]
    with scoped.client("auditor", None) as c:
        every = c.get("/v1/entries/values", params={"field": field}).json()["values"]
    if field == "engine":
        assert mine == ["math"] and "logic" in every
    if field == "producer":
        # ("shared" too once the idempotency test has appended as it)
        assert "producer-acme" in mine and set(mine) <= {"producer-acme", "shared"}
        assert {"producer-globex", "producer-None"} <= set(every)
    assert set(mine) <= set(every)


@pytest.mark.parametrize("fmt", ["rows", "csv", "json"])
def test_exports_are_the_tenants_own(scoped: Scoped, fmt: str) -> None:
    with scoped.client("auditor", A) as c:
        r = c.get("/v1/export", params={"format": fmt})
    assert r.status_code == 200, r.text
    if fmt == "rows":
        seqs = [json.loads(line)["seq"] for line in r.text.splitlines()]
    elif fmt == "json":
        seqs = [e["seq"] for e in r.json()]
    else:
        seqs = [int(row["seq"]) for row in csv.DictReader(io.StringIO(r.text))]
    assert seqs == scoped.seqs[A]


def test_an_operator_level_token_reads_every_tenant(scoped: Scoped) -> None:
    with scoped.client("auditor", None) as c:
        assert listed(c) == all_seqs(scoped)
        r = c.get("/v1/entries", params={"count": "true", "limit": 1})
        assert r.json()["index_total"] == len(all_seqs(scoped))
        for seq in all_seqs(scoped):
            assert c.get(f"/v1/entries/{seq}").status_code == 200
        rows = c.get("/v1/export").text.splitlines()
        assert [json.loads(line)["seq"] for line in rows] == all_seqs(scoped)
        assert c.get("/v1/aggregates").status_code == 200
        assert c.get("/v1/export", params={"format": "records"}).status_code == 200


def test_scoping_changes_no_rows_verdict(scoped: Scoped) -> None:
    """A row read through a tenant's token is checked exactly as through an operator-level
    one: the rows of other tenants between its rows change no verdict."""
    with scoped.client("auditor", None) as c:
        every = {e["seq"]: e["integrity"] for e in listed_rows(c)}
    for tenant in (A, B):
        with scoped.client("auditor", tenant) as c:
            for e in listed_rows(c):
                assert e["integrity"] == every[e["seq"]]


def listed_rows(c: httpx.Client) -> list[dict[str, Any]]:
    r = c.get("/v1/entries", params={"limit": 1000})
    assert r.status_code == 200, r.text
    return list(r.json()["entries"])


def test_a_tenants_charts_count_its_entries_only(scoped: Scoped) -> None:
    """``/v1/aggregates`` with a tenant token: its results only (globex's include the logic
    engine's), no producer, engine or count of the others, no size of the ledger."""
    rows = {}
    for tenant in (A, B):
        with scoped.client("auditor", tenant) as c:
            rows[tenant] = listed_rows(c)
    for tenant, role in ((A, "auditor"), (B, "auditor"), (A, "agent"), (B, "developer")):
        with scoped.client(role, tenant) as c:
            r = c.get("/v1/aggregates", params={"bucket": "day"})
        assert r.status_code == 200, r.text
        doc = r.json()
        mine, other = rows[tenant], rows[B if tenant == A else A]
        n = sum(row[-1] for b in doc["buckets"] for row in b["results"])
        assert n == len(mine) == len(scoped.seqs[tenant]) and doc["covers"]["tenant"] == tenant
        assert doc["covers"]["live"]["rows"] == n and "head" not in doc["covers"]
        theirs = {e["producer"] for e in other} - {e["producer"] for e in mine}
        assert theirs and not any(f'"{p}"' in r.text for p in theirs)
        if role == "auditor":
            assert set(doc["producers"]) == {e["producer"] for e in mine}
        if role != "agent":
            assert set(doc["engines"]) == {e["engine"] for e in mine}
            only = {e["engine"] for e in other} - {e["engine"] for e in mine}
            assert not any(f'"{e}"' in r.text for e in only)
    assert {e["engine"] for e in rows[B]} - {e["engine"] for e in rows[A]}  # logic: globex's


# -- the tenant's bundle: its complete export -------------------------------------------------
def test_a_tenant_auditors_bundle_is_its_complete_chain(scoped: Scoped, tmp_path: Path) -> None:
    import io
    import zipfile

    from ledger.verify.export import verify_export

    with scoped.client("auditor", A) as c:
        r = c.get("/v1/export/bundle")
        refused = c.get("/v1/export/bundle", params={"status": "VERIFIED"})
    assert r.status_code == 200, r.text
    assert refused.status_code == 400 and refused.json()["code"] == "tenant_export_filtered"
    with zipfile.ZipFile(io.BytesIO(r.content)) as z:
        z.extractall(tmp_path)
    (folder,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    report = verify_export(folder, scoped.srv.keys_dir / "jwks.json")
    assert report["findings"] == [] and report["complete"] is True
    assert report["tenant"] == A
    seqs = [json.loads(x)["seq"] for x in (folder / "entries.jsonl").read_text().splitlines()]
    assert seqs == sorted(scoped.seqs[A])


def test_an_empty_tenants_bundle_over_http_withholds_its_absence_proof(
        scoped: Scoped, tmp_path: Path) -> None:
    """A tenant without entries gets its (empty) bundle without the absence proof, which
    would name the tenants next to it: it verifies with no finding, not complete."""
    import io
    import zipfile

    from ledger.verify.export import verify_export

    with scoped.client("auditor", "hooli") as c:
        r = c.get("/v1/export/bundle")
    assert r.status_code == 200, r.text
    with zipfile.ZipFile(io.BytesIO(r.content)) as z:
        z.extractall(tmp_path)
    (folder,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["tenant"] == {"id": "hooli", "count": 0, "head_hash": None, "heads": None}
    assert A not in r.content.decode("latin-1") and B not in r.content.decode("latin-1")
    report = verify_export(folder, scoped.srv.keys_dir / "jwks.json")
    assert report["findings"] == [] and report["complete"] is False
    assert [a["reason"] for a in report["abstentions"]] == ["tenant_absence_unproven"]


# -- what spans every tenant: one uniform 403 ----------------------------------------------
# (recorded audit and re-verification runs are scoped instead: test_tenant_runs.py)
REFUSED = [
    ("auditor", "/v1/export?format=records"),
    ("auditor", "/tile/entries/000"),
]


@pytest.mark.parametrize(("role", "path"), REFUSED)
def test_what_spans_every_tenant_refuses_a_tenant_token(scoped: Scoped, role: str,
                                                        path: str) -> None:
    answers = []
    for tenant in (A, B):
        with scoped.client(role, tenant) as c:
            r = c.get(path)
        assert r.status_code == 403, r.text
        assert r.headers["content-type"].startswith("application/problem+json")
        assert r.json()["code"] == "tenant_scope"
        assert "tenant" in r.json()["detail"]
        answers.append(r.text)
    assert answers[0] == answers[1]  # nothing of the tenant or the ledger in it


def test_a_tenant_custodian_redacts_and_holds_its_own_entries(scoped: Scoped) -> None:
    """Custody is scoped, not refused (tests/api/test_tenant_custody_api.py has the rest)."""
    with scoped.client("custodian", A) as c:
        r = c.post("/v1/redactions", json={"seqs": [scoped.seqs[A][0]], "reason": "r",
                                           "dry_run": True})
        assert r.status_code == 200, r.text
        mine = c.get("/v1/holds")
        assert mine.status_code == 200 and mine.json() == {"holds": []}, mine.text


def test_the_global_tree_stays_readable(scoped: Scoped) -> None:
    with scoped.client("auditor", A) as c:
        assert c.get(f"/v1/entries/{scoped.seqs[A][0]}?proof=true").status_code == 200
        cps = c.get("/v1/checkpoints").json()["checkpoints"]
        assert cps
        size = cps[-1]["size"]
        assert c.get("/v1/checkpoint").status_code == 200
        assert c.get("/checkpoint").status_code == 200
        assert c.get(f"/v1/proofs/consistency?from={size}&to={size}").status_code == 200
        if size < 256:
            assert c.get(f"/tile/0/000.p/{size}").status_code == 200


# -- tokens ---------------------------------------------------------------------------------
@pytest.mark.parametrize("claim", ["", "Acme", "-acme", "a" * 64, 7, ["acme"], None])
def test_a_malformed_tenant_claim_is_no_token(scoped: Scoped, claim: Any) -> None:
    """Never read as operator-level: 401 (a null claim too: only a token without the claim
    is operator-level)."""
    srv = scoped.srv
    signer = ledger_signer(Keyring.load(srv.keys_dir), srv.origin)
    now = int(time.time())
    claims = {"iss": srv.origin, "aud": srv.origin, "sub": "x", "role": "auditor",
              "tenant": claim, "iat": now, "nbf": now, "exp": now + 600, "jti": "j"}
    token = signer.sign_jwt(claims, ACCESS_TOKEN_TYP)
    r = httpx.get(srv.base_url + "/v1/entries", headers={"Authorization": f"Bearer {token}"})
    assert r.status_code == 401 and r.json()["code"] == "invalid_token", r.text
    assert "tenant" in r.json()["detail"]


def test_token_issue_with_a_tenant(sqlite_url: str, tmp_path: Path) -> None:
    import jwt

    from ledger.facade import Ledger

    Ledger.init(sqlite_url, origin="test.example/tenant-token").close()
    keys = str(tmp_path / "keys")
    run = CliRunner().invoke
    assert run(cli, ["--db", sqlite_url, "keys", "generate", "--keys", keys]).exit_code == 0
    base = ["--db", sqlite_url, "token", "issue", "--subject", "s", "--keys", keys,
            "--format", "json"]
    res = run(cli, [*base, "--role", "producer", "--tenant", "acme"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["tenant"] == "acme"
    assert jwt.decode(doc["token"], options={"verify_signature": False})["tenant"] == "acme"
    res = run(cli, [*base, "--role", "auditor"])
    assert json.loads(res.stdout)["tenant"] is None
    assert "tenant" not in jwt.decode(json.loads(res.stdout)["token"],
                                      options={"verify_signature": False})
    for bad in ("Acme", "", "-x", "a" * 64, "a b"):
        res = run(cli, [*base, "--role", "producer", "--tenant", bad])
        assert res.exit_code == 2, (bad, res.output)
        assert "tenant" in res.output and "Traceback" not in res.output
    res = run(cli, [*base, "--role", "operator", "--tenant", "acme"])
    assert res.exit_code == 2 and "tenant" in res.output


def test_cli_append_into_a_tenant(sqlite_url: str, tmp_path: Path) -> None:
    from ledger.facade import Ledger

    Ledger.init(sqlite_url, origin="test.example/tenant-append").close()
    path = tmp_path / "one.json"
    path.write_text(json.dumps(sub("cli-1")))
    run = CliRunner().invoke
    res = run(cli, ["--db", sqlite_url, "append", "--tenant", "acme", str(path)])
    assert res.exit_code == 0, res.output
    seq = json.loads(res.stdout)["seq"]
    eng = create_engine(sqlite_url)
    with eng.connect() as conn:
        assert conn.execute(text("SELECT tenant FROM entries WHERE seq = :s"),
                            {"s": seq}).scalar() == "acme"
    eng.dispose()
    for bad in ("Acme", "", "_x", "a" * 64):
        res = run(cli, ["--db", sqlite_url, "append", "--tenant", bad, str(path)])
        assert res.exit_code == 2, (bad, res.output)
        assert "tenant" in res.output and "Traceback" not in res.output
        assert res.stdout == ""  # nothing appended, nothing printed
