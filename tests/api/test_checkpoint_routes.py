"""GET /v1/checkpoint before the first checkpoint, and ?proof=true on a server started with
``--no-checkpoint-on-demand``: 404 with their own codes, never a signature made for them."""

from __future__ import annotations

import random

import httpx

from ledger.demo.samples import math_verified
from tests.api.server import Server, prepare_ledger, start_server, stop_process


def test_no_checkpoint_yet_is_404_and_proofs_wait_for_one(sqlite_url, tmp_path):
    origin = "test.example/no-on-demand"
    keys = tmp_path / "keys"
    prepare_ledger(sqlite_url, keys, origin)
    proc, url = start_server(sqlite_url, keys, tmp_path / "serve.log",
                             "--no-checkpoint-on-demand")
    try:
        srv = Server("sqlite", sqlite_url, keys, origin, proc, url, tmp_path / "serve.log")
        prod = {"Authorization": f"Bearer {srv.token('producer', 'p')}"}
        aud = {"Authorization": f"Bearer {srv.token('auditor', 'a')}"}
        with httpx.Client(base_url=url, timeout=30) as c:
            r = c.get("/v1/checkpoint", headers=aud)
            assert r.status_code == 404 and r.json()["code"] == "no_checkpoint"
            r = c.post("/v1/entries", json=math_verified(1, random.Random(1)), headers=prod)
            assert r.status_code == 201, r.text
            r = c.get("/v1/entries/0", params={"proof": "true"}, headers=aud)
            assert r.status_code == 404 and r.json()["code"] == "not_checkpointed"
            # nothing was signed for it
            assert c.get("/v1/checkpoint", headers=aud).status_code == 404
    finally:
        stop_process(proc)
