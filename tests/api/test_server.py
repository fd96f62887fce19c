"""The shared real server of each engine starts and answers its health check."""

from __future__ import annotations

import httpx

from tests.api.server import Server, api  # noqa: F401 - fixture


def test_server_starts_and_answers_health(api: Server) -> None:  # noqa: F811
    r = httpx.get(api.base_url + "/v1/health", timeout=10)
    assert r.status_code == 200
    body = r.json()
    assert body["status"] == "ok" and body["database"] == "reachable"
    assert body["origin"] == api.origin and body["head_hash"].startswith("sha256:")
