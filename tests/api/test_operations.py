"""docs/operations.md, checked: the SQL block of least-privilege roles is run as written
(names substituted), a real server runs as ``ledger_service`` and works, that role is refused
every rewrite, and a ``ledger_reader`` service (a replica stand-in) reads but cannot append."""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import psycopg
import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from ledger.clock import SystemClock
from ledger.crypto.keys import Keyring
from ledger.facade import Ledger
from ledger.ops.audit import AuditOptions
from tests.api.server import ROOT, Server, start_server, stop_process
from tests.api.test_append import unverifiable, valid

DOC = ROOT / "docs" / "operations.md"


def role_sql() -> str:
    """The ```sql block of docs/operations.md that creates the roles and grants."""
    blocks = re.findall(r"```sql\n(.*?)```", DOC.read_text("utf-8"), re.DOTALL)
    block = next(b for b in blocks if "CREATE ROLE ledger_service" in b)
    return "\n".join(line for line in block.splitlines() if not line.startswith("--"))


@pytest.fixture
def roles(pg_database: str) -> Iterator[dict[str, str]]:
    tag = uuid.uuid4().hex[:8]
    names = {"ledger_owner": f"lo_{tag}", "ledger_service": f"ls_{tag}",
             "ledger_reader": f"lr_{tag}", "ledger": f"ops_{tag}"}
    sql = role_sql()
    for old, new in sorted(names.items(), key=lambda kv: -len(kv[0])):
        sql = re.sub(rf"\b{old}\b", new, sql)
    admin = create_engine(pg_database, isolation_level="AUTOCOMMIT")
    create, grants = sql.split("GRANT", 1)
    with admin.connect() as conn:
        conn.exec_driver_sql(create)
    owner_url = make_url(pg_database).set(username=names["ledger_owner"]).update_query_dict(
        {"options": f"-csearch_path={names['ledger']}"})
    with admin.connect() as conn:  # the owner needs to connect to the test database
        conn.execute(text(f'GRANT CONNECT, TEMP ON DATABASE "{owner_url.database}" TO '
                          f'{names["ledger_owner"]}'))
    Ledger.init(owner_url.render_as_string(hide_password=False),
                origin=f"test.example/ops-{tag}").close()
    with admin.connect() as conn:
        conn.exec_driver_sql("GRANT" + grants)
    urls = {role: owner_url.set(username=names[role]).render_as_string(hide_password=False)
            for role in ("ledger_owner", "ledger_service", "ledger_reader")}
    try:
        yield urls
    finally:
        with admin.connect() as conn:
            conn.exec_driver_sql(f'DROP SCHEMA {names["ledger"]} CASCADE')
            for role in ("ledger_service", "ledger_reader", "ledger_owner"):
                conn.exec_driver_sql(f"DROP OWNED BY {names[role]}")
                conn.exec_driver_sql(f"DROP ROLE {names[role]}")
        admin.dispose()


def _psycopg(url: str) -> str:
    return url.replace("postgresql+psycopg://", "postgresql://", 1)


@pytest.mark.postgres
def test_least_privilege_roles_from_the_operations_doc(roles: dict[str, str],
                                                       tmp_path: Path) -> None:
    keys = tmp_path / "keys"
    with Ledger.open(roles["ledger_owner"]) as ledger:
        origin = ledger.meta.origin
    Keyring.load(keys).generate(origin, SystemClock().now_us())
    proc, url = start_server(roles["ledger_service"], keys, tmp_path / "svc.log")
    try:
        srv = Server("postgresql", roles["ledger_service"], keys, origin, proc, url,
                     tmp_path / "svc.log")
        srv.tokens = {r: srv.token(r, f"ops-{r}") for r in ("producer", "auditor",
                                                              "custodian")}
        with srv.client("producer") as c:
            assert c.post("/v1/entries", json=valid()).status_code == 201
            assert c.post("/v1/entries", json=unverifiable("x"),
                          headers={"Idempotency-Key": "ops-1"}).status_code == 201
            res = c.post("/v1/entries/batch", json=[valid(), {"engine": "math"}]).json()
            assert [r["ok"] for r in res["results"]] == [True, False]  # quarantine INSERT
        with srv.client("auditor") as c:
            assert c.get("/v1/entries/0", params={"proof": "true"}).json()["proof"]
            assert c.get("/v1/checkpoint").status_code == 200
            assert len(c.get("/v1/export").text.splitlines()) == 3
        with srv.client("custodian") as c:  # holds, redactions and their report
            r = c.post("/v1/holds", json={"seqs": [0], "reason": "case 1"})
            assert r.status_code == 201, r.text
            hold = r.json()["hold_seq"]
            r = c.post("/v1/redactions", json={"seqs": [0], "reason": "DSR"})
            assert r.status_code == 409 and r.json()["code"] == "entry_on_hold", r.text
            r = c.post("/v1/redactions", json={"seqs": [1],
                                               "reason": "DSR", "report": True})
            assert r.status_code == 200, r.text
            assert r.json()["entries"][0]["payloads"] and r.json()["report"]["signature"]
            r = c.post(f"/v1/holds/{hold}/release", json={"reason": "closed"})
            assert r.status_code == 200, r.text
            assert c.get("/v1/holds").json() == {"holds": []}
        with srv.client("producer") as c:
            assert c.post("/v1/entries", json=valid()).status_code == 201
    finally:
        stop_process(proc)
    with Ledger.open(roles["ledger_owner"]) as ledger:
        report = ledger.audit(AuditOptions(keys=(str(keys / "jwks.json"),)))
        assert report.findings == (), report.findings
        assert {a.reason for a in report.abstentions} == {"redacted"}
    # the service role is refused every rewrite (before any trigger: no privilege)
    with psycopg.connect(_psycopg(roles["ledger_service"]), autocommit=True) as conn:
        for stmt in ("UPDATE entries SET status = 'VERIFIED'", "DELETE FROM entries",
                     "TRUNCATE entries", "DELETE FROM payloads", "UPDATE payloads SET data = ''",
                     "DELETE FROM checkpoints", "DELETE FROM merkle_nodes",
                     "DELETE FROM redacted_payloads", "UPDATE redacted_payloads SET slot = 0",
                     "ALTER TABLE entries DISABLE TRIGGER entries_append_only",
                     "ALTER TABLE payloads DISABLE TRIGGER USER",
                     "DROP TABLE entries"):
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute(stmt)

    # a reader-role service: reads work; an append is refused for lack of privilege, which
    # is permanent (500 store_permission_denied, never a 503 that invites retries)
    proc, url = start_server(roles["ledger_reader"], keys, tmp_path / "rd.log",
                             "--no-checkpoint-on-demand")
    try:
        rd = Server("postgresql", roles["ledger_reader"], keys, origin, proc, url,
                    tmp_path / "rd.log")
        with httpx.Client(base_url=url, headers={
                "Authorization": f"Bearer {rd.token('auditor', 'replica-auditor')}"}) as c:
            assert c.get("/v1/entries").json()["entries"]
            assert c.get("/v1/entries/0", params={"proof": "true"}).status_code == 200
            for body, key in ((valid(), None), (valid(), "ops-2")):
                r = c.post("/v1/entries", json=body,
                           headers={"Idempotency-Key": key} if key else {})
                assert r.status_code == 500, r.text
                assert r.json()["code"] == "store_permission_denied"
                assert "42501" in r.json()["detail"] and "retrying will not" in r.json()["detail"]
            r = c.post("/v1/entries/batch", json=[valid()])
            assert r.status_code == 500 and r.json()["code"] == "store_permission_denied"
            r = c.get(f"/v1/entries/{2}", params={"proof": "true"})
            assert r.status_code in (200, 404) and r.status_code < 500
        assert httpx.get(url + "/v1/health").json()["size"] == 7  # nothing appended
    finally:
        stop_process(proc)
