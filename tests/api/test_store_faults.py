"""A real ``ledger serve`` whose PostgreSQL backends die or whose database refuses
connections: 503 ``store_unavailable`` with ``Retry-After`` (never 500), health says
the store is down, and service resumes by itself; a refused value is its item's 422."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from ledger.demo.samples import realistic
from ledger.ops.tokens import ROLES
from tests.api.server import Server, prepare_ledger, start_server
from tests.conftest import PG_ADMIN_URL, _psycopg
from tests.store.pgadmin import own_database, terminate_backends


@pytest.fixture
def pg_server(pg_database: str, tmp_path) -> Iterator[Server]:
    with own_database() as url:
        origin = "test.example/faults"
        keys = tmp_path / "keys"
        prepare_ledger(url, keys, origin)
        proc, base = start_server(url, keys, tmp_path / "serve.log")
        srv = Server("postgresql", url, keys, origin, proc, base, tmp_path / "serve.log")
        srv.tokens = {role: srv.token(role, f"test-{role}") for role in ROLES}
        try:
            yield srv
        finally:
            srv.stop()


def _allow_connections(url: str, allow: bool) -> None:
    admin = create_engine(_psycopg(PG_ADMIN_URL), isolation_level="AUTOCOMMIT")
    name = make_url(url).database
    with admin.connect() as conn:
        conn.execute(text(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS {str(allow).lower()}'))
    admin.dispose()


def test_killed_backends_are_replaced_without_an_error(pg_server: Server) -> None:
    with pg_server.client("producer") as c:
        assert c.post("/v1/entries", json=realistic(1)[0]).status_code == 201
        terminate_backends(pg_server.db_url)
        r = c.post("/v1/entries", json=realistic(2)[1])
        assert r.status_code in (201, 503), r.text  # never a 500
        if r.status_code == 503:
            assert r.headers["Retry-After"] and r.json()["error"]["code"] == "store_unavailable"
        assert c.post("/v1/entries", json=realistic(3)[2]).status_code == 201


def test_an_unreachable_store_is_503_with_retry_after_then_recovers(pg_server: Server,
                                                                   ) -> None:
    subs = realistic(4)
    with pg_server.client("producer") as c, pg_server.client() as anon:
        assert c.post("/v1/entries", json=subs[0]).status_code == 201
        _allow_connections(pg_server.db_url, False)
        try:
            terminate_backends(pg_server.db_url)
            health = anon.get("/v1/health")
            assert health.status_code == 503, health.text
            assert health.headers["Retry-After"]
            assert health.json()["database"] == "unreachable"
            assert health.json()["error"]["code"] == "store_unavailable"
            for body, path in ((subs[1], "/v1/entries"), ([subs[2]], "/v1/entries/batch")):
                r = c.post(path, json=body)
                assert r.status_code == 503, r.text
                assert r.headers["Retry-After"]
                assert r.json()["error"]["code"] == "store_unavailable"
        finally:
            _allow_connections(pg_server.db_url, True)
        deadline = time.monotonic() + 10
        while anon.get("/v1/health").status_code != 200 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert anon.get("/v1/health").json()["size"] == 1
        assert c.post("/v1/entries", json=subs[3]).status_code == 201


def test_a_refused_value_is_its_own_422(pg_server: Server) -> None:
    subs = realistic(2)
    with pg_server.client("producer") as c:
        r = c.post("/v1/entries/batch", json=[subs[0], {**subs[1], "subject": "a\x00b"}])
        assert r.status_code == 200, r.text
        items = r.json()["results"]
        assert items[0]["ok"] and not items[1]["ok"]
        assert items[1]["error"]["code"] == "invalid_text"
        single = c.post("/v1/entries", json={**subs[1], "subject": "x\x00"})
        assert single.status_code == 422 and single.json()["error"]["code"] == "invalid_text"
