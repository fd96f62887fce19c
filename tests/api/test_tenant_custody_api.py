"""Redactions and legal holds with tenant custodian tokens, against a real server on both
engines (docs/http.md, "Tenants"; docs/tenants.md, "Custody per tenant").

A custodian token of ``acme`` redacts and holds acme's entries only; a seq of ``globex`` is
answered byte for byte as that same seq was answered while it did not exist yet; its redaction
and hold entries join acme's chain; it lists the holds over acme's entries only.  An
operator-level custodian still reaches every tenant.  Each engine gets a server of its own.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from sqlalchemy import create_engine, text

from ledger.demo.samples import math_verified
from ledger.facade import Ledger
from ledger.ops.audit import AuditOptions
from tests.api.server import Server, prepare_ledger, start_server
from tests.conftest import ENGINES, engine_url

A, B = "acme", "globex"
MISSING = 10**6


class Env:
    def __init__(self, srv: Server) -> None:
        self.srv = srv
        self.seqs: dict[str, list[int]] = {A: [], B: [], "default": []}

    def client(self, role: str, tenant: str | None) -> httpx.Client:
        return self.srv.scoped(role, tenant)

    def sql(self, query: str) -> list[Any]:
        eng = create_engine(self.srv.db_url.replace("postgresql://", "postgresql+psycopg://",
                                                    1))
        try:
            with eng.connect() as conn:
                return list(conn.execute(text(query)).all())
        finally:
            eng.dispose()

    def tenant_of(self, seq: int) -> str:
        return str(self.sql(f"SELECT tenant FROM entries WHERE seq = {int(seq)}")[0][0])

    def next_seq(self) -> int:
        return int(self.sql("SELECT coalesce(max(seq), -1) + 1 FROM entries")[0][0])

    def append(self, tenant: str | None, subject: str) -> int:
        s = math_verified(random.Random(subject).randrange(10**6), random.Random(subject))
        s["subject"] = subject
        with self.client("producer", tenant) as c:
            r = c.post("/v1/entries", json=s)
        assert r.status_code == 201, r.text
        seq = int(r.json()["seq"])
        self.seqs[tenant or "default"].append(seq)
        return seq


@pytest.fixture(scope="module", params=ENGINES)
def env(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory,
        ) -> Iterator[Env]:
    kind = request.param
    tmp = tmp_path_factory.mktemp(f"tenant-custody-{kind}")
    db_url = engine_url(kind, request, tmp)
    origin = f"test.example/tenant-custody-{kind}"
    prepare_ledger(db_url, tmp / "keys", origin)
    proc, url = start_server(db_url, tmp / "keys", tmp / "serve.log")
    e = Env(Server(kind, db_url, tmp / "keys", origin, proc, url, tmp / "serve.log"))
    try:
        for i in range(3):
            for tenant in (A, B, None):
                e.append(tenant, f"{tenant or 'default'}-{i}")
        yield e
    finally:
        e.srv.stop()


def audits_clean(env: Env) -> None:
    with Ledger.open(env.srv.db_url) as lg:
        assert lg.audit(AuditOptions()).findings == ()
        for tenant in (A, B):
            assert lg.audit_tenant(tenant).findings == ()


def test_a_tenant_custodian_redacts_its_own_entry(env: Env) -> None:
    seq = env.seqs[A][0]
    with env.client("custodian", A) as c:
        r = c.post("/v1/redactions", json={"seqs": [seq], "payloads": ["query"],
                                           "reason": "DSR", "report": True})
    assert r.status_code == 200, r.text
    body = r.json()
    assert [e["seq"] for e in body["entries"]] == [seq]
    rseq = body["redaction_seqs"][0]
    assert body["report"]["redaction_seqs"] == [rseq]
    assert env.tenant_of(rseq) == A  # the redaction entry is acme's
    with env.client("auditor", A) as c:
        assert c.get(f"/v1/entries/{seq}").json()["entry"]["query"] is None
        assert c.get(f"/v1/entries/{rseq}").json()["entry"]["kind"] == "redaction"
    with env.client("auditor", B) as c:  # globex does not see acme's redaction entry
        hidden, missing = c.get(f"/v1/entries/{rseq}"), c.get(f"/v1/entries/{MISSING}")
        assert hidden.status_code == missing.status_code == 404
    audits_clean(env)


def test_another_tenants_seq_is_answered_as_it_was_before_it_existed(env: Env) -> None:
    """acme asks about seq N while N does not exist, then globex appends N and acme asks
    again: every answer is the same, byte for byte."""
    n = env.next_seq()
    asks: list[tuple[str, str, dict[str, Any] | None]] = [
        ("POST", "/v1/redactions", {"seqs": [n], "reason": "r"}),
        ("POST", "/v1/redactions", {"seqs": [n], "reason": "r", "dry_run": True}),
        ("POST", "/v1/redactions", {"seqs": [env.seqs[A][1], n], "reason": "r"}),
        ("POST", "/v1/holds", {"seqs": [n], "reason": "r"}),
        ("POST", f"/v1/holds/{n}/release", {"reason": "r"}),
        ("GET", "/v1/holds", None),
    ]

    def answers() -> list[tuple[int, str, str]]:
        with env.client("custodian", A) as c:
            out = []
            for method, path, body in asks:
                r = c.request(method, path, json=body)
                out.append((r.status_code, r.headers["content-type"], r.text))
            return out

    before = answers()
    assert [a[0] for a in before] == [404, 404, 404, 404, 404, 200]
    # globex appends seq n, and holds it (so it is also a hold entry's target)
    assert env.append(B, "b-late") == n
    with env.client("custodian", B) as c:
        r = c.post("/v1/holds", json={"seqs": [n], "reason": "b's own"})
        assert r.status_code == 201, r.text
        hold = r.json()["hold_seq"]
    assert answers() == before
    # and globex's hold seq, asked by acme, is the missing hold seq's answer
    with env.client("custodian", A) as c:
        got = c.post(f"/v1/holds/{hold}/release", json={"reason": "r"})
        none = c.post(f"/v1/holds/{MISSING}/release", json={"reason": "r"})
    assert got.status_code == none.status_code == 404
    assert got.text.replace(str(hold), "N") == none.text.replace(str(MISSING), "N")
    with env.client("custodian", B) as c:
        assert c.post(f"/v1/holds/{hold}/release", json={"reason": "r"}).status_code == 200


def test_holds_are_listed_per_tenant(env: Env) -> None:
    with env.client("custodian", A) as c:
        ha = c.post("/v1/holds", json={"seqs": [env.seqs[A][2]], "reason": "a"}).json()
    with env.client("custodian", B) as c:
        hb = c.post("/v1/holds", json={"seqs": [env.seqs[B][2]], "reason": "b"}).json()
    with env.client("custodian", None) as c:
        r = c.post("/v1/holds", json={"seqs": [env.seqs[B][1], env.seqs["default"][1]],
                                      "reason": "operator"})
        assert r.status_code == 201, r.text
        hop = r.json()["hold_seq"]
    ha, hb = ha["hold_seq"], hb["hold_seq"]
    assert env.tenant_of(ha) == A and env.tenant_of(hb) == B
    assert env.tenant_of(hop) == "default"
    for role in ("custodian", "auditor"):
        with env.client(role, A) as c:
            r = c.get("/v1/holds")
        assert r.status_code == 200, r.text
        assert r.json() == {"holds": [{"hold_seq": ha, "entries": [env.seqs[A][2]]}]}
        with env.client(role, B) as c:
            got = c.get("/v1/holds").json()["holds"]
        assert got == [{"hold_seq": hb, "entries": [env.seqs[B][2]]},
                       {"hold_seq": hop, "entries": [env.seqs[B][1]]}]
    with env.client("auditor", None) as c:
        every = {h["hold_seq"]: h["entries"] for h in c.get("/v1/holds").json()["holds"]}
    assert every[hop] == sorted([env.seqs[B][1], env.seqs["default"][1]])
    assert {ha, hb, hop} <= set(every)
    # acme's hold blocks acme's redaction; the operator's hold over globex's entry: globex's
    with env.client("custodian", A) as c:
        r = c.post("/v1/redactions", json={"seqs": [env.seqs[A][2]], "reason": "r"})
    assert r.status_code == 409 and r.json()["code"] == "entry_on_hold", r.text
    with env.client("custodian", B) as c:
        r = c.post("/v1/redactions", json={"seqs": [env.seqs[B][1]], "reason": "r"})
        assert r.status_code == 409 and r.json()["code"] == "entry_on_hold", r.text
        # globex sees the operator's hold but may not release it
        r = c.post(f"/v1/holds/{hop}/release", json={"reason": "r"})
        assert r.status_code == 403 and r.json()["code"] == "tenant_scope", r.text
        assert r.json()["field"] == "hold_seq"
    with env.client("custodian", A) as c:  # acme does not see it: no such hold
        r = c.post(f"/v1/holds/{hop}/release", json={"reason": "r"})
        assert r.status_code == 404 and r.json()["code"] == "no_such_hold", r.text
        r = c.post(f"/v1/holds/{ha}/release", json={"reason": "done"})
        assert r.status_code == 200, r.text
        assert env.tenant_of(r.json()["release_seq"]) == A
        r = c.post("/v1/redactions", json={"seqs": [env.seqs[A][2]], "reason": "r"})
        assert r.status_code == 200, r.text
    with env.client("custodian", None) as c:
        assert c.post(f"/v1/holds/{hop}/release", json={"reason": "r"}).status_code == 200
        assert c.post(f"/v1/holds/{hb}/release", json={"reason": "r"}).status_code == 200
    audits_clean(env)


def test_an_operator_level_custodian_reaches_every_tenant(env: Env) -> None:
    targets = [env.seqs[A][1], env.seqs[B][0], env.seqs["default"][0]]
    with env.client("custodian", None) as c:
        r = c.post("/v1/redactions", json={"seqs": targets, "payloads": ["query"],
                                           "reason": "operator"})
    assert r.status_code == 200, r.text
    assert [e["seq"] for e in r.json()["entries"]] == sorted(targets)
    assert env.tenant_of(r.json()["redaction_seqs"][0]) == "default"
    with env.client("auditor", None) as c:
        for seq in targets:
            assert c.get(f"/v1/entries/{seq}").json()["entry"]["query"] is None
    audits_clean(env)


BAD: list[tuple[str, str, Any, str | None]] = [
    ("/v1/redactions", "seqs", {"seqs": ["x"], "reason": "r"}, "seqs"),
    ("/v1/redactions", "seqs", {"seqs": [-1], "reason": "r"}, "seqs"),
    ("/v1/redactions", "seqs", {"reason": "r"}, "seqs"),
    ("/v1/redactions", "reason", {"seqs": [0]}, "reason"),
    ("/v1/redactions", "payloads", {"seqs": [0], "reason": "r", "payloads": [1]}, "payloads"),
    ("/v1/redactions", "payload", {"seqs": [0], "reason": "r", "payloads": ["x"]}, "payload"),
    ("/v1/redactions", "dry_run", {"seqs": [0], "reason": "r", "dry_run": "yes"}, "dry_run"),
    ("/v1/redactions", "extra", {"seqs": [0], "reason": "r", "tenant": "globex"}, "tenant"),
    ("/v1/redactions", "subject", {"subject": "", "reason": "r"}, "subject"),
    ("/v1/redactions", "reason", {"seqs": [0], "reason": "x" * 5000}, "reason"),
    ("/v1/redactions", "body", [1, 2], None),
    ("/v1/holds", "seqs", {"seqs": [True], "reason": "r"}, "seqs"),
    ("/v1/holds", "reason", {"seqs": [0]}, "reason"),
    ("/v1/holds", "extra", {"seqs": [0], "reason": "r", "hold_seq": 1}, "hold_seq"),
]


@pytest.mark.parametrize(("path", "what", "body", "field"), BAD,
                         ids=[f"{p}-{w}-{i}" for i, (p, w, _, _) in enumerate(BAD)])
def test_bad_input_names_the_field_and_writes_nothing(env: Env, path: str, what: str,
                                                      body: Any, field: str | None) -> None:
    size = env.next_seq()
    with env.client("custodian", A) as c:
        r = c.post(path, json=body)
    assert 400 <= r.status_code < 500, r.text
    assert r.headers["content-type"].startswith("application/problem+json")
    if field is not None:
        assert r.json().get("field") == field, r.text
    assert env.next_seq() == size


def test_a_tenant_may_not_override_the_minimum_retention(env: Env) -> None:
    size = env.next_seq()
    with env.client("custodian", A) as c:
        r = c.post("/v1/redactions", json={"seqs": [env.seqs[A][0]], "reason": "r",
                                           "override_minimum": "court order"})
        bad_release = c.post("/v1/holds/-1/release", json={"reason": "r"})
    assert r.status_code == 403 and r.json()["code"] == "tenant_scope", r.text
    assert r.json()["field"] == "override_minimum"
    assert 400 <= bad_release.status_code < 500
    assert env.next_seq() == size
