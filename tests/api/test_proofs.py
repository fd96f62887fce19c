"""Proof serving against a real server: ``?proof=true&tree_size=N``, ``GET
/v1/proofs/consistency``, and the bound on the checkpoints that proof requests can make."""

from __future__ import annotations

import random
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from ledger.crypto.keys import Keyring, load_public_keys
from ledger.demo.samples import math_verified
from ledger.facade import Ledger
from ledger.verify.proof import verify_consistency_bundle, verify_inclusion_bundle
from tests.api.server import Server, prepare_ledger, start_server, stop_process
from tests.conftest import ENGINES, engine_url


@pytest.fixture(scope="module", params=ENGINES)
def srv(request: pytest.FixtureRequest,
        tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """A server of its own, with the default on-demand interval (30 s)."""
    kind = request.param
    tmp = tmp_path_factory.mktemp(f"proofs-{kind}")
    db_url = engine_url(kind, request, tmp)
    origin = f"test.example/proofs-{kind}"
    keys = tmp / "keys"
    prepare_ledger(db_url, keys, origin)
    proc, url = start_server(db_url, keys, tmp / "serve.log")
    s = Server(kind, db_url, keys, origin, proc, url, tmp / "serve.log")
    s.tokens = {r: s.token(r, f"t-{r}") for r in ("producer", "auditor", "agent")}
    yield s
    stop_process(proc)


def _append(s: Server, n: int) -> int:
    with s.client("producer") as c:
        for _ in range(n):
            r = c.post("/v1/entries", json=math_verified(random.randrange(10**6),
                                                         random.Random()))
            assert r.status_code == 201, r.text
            seq = int(r.json()["seq"])
    return seq


def _sign(s: Server) -> int:
    """Sign a checkpoint of the whole ledger as `ledger checkpoint` does; its size."""
    with Ledger.open(s.db_url) as ledger:
        ledger.checkpoint(Keyring.load(s.keys_dir))
        row = ledger.latest_checkpoint()
        assert row is not None
        return row.size


def _checkpoint_count(s: Server) -> int:
    with s.client("auditor") as c:
        return len(c.get("/v1/checkpoints", params={"limit": 1000}).json()["checkpoints"])


def test_a_loop_of_proof_requests_signs_at_most_one_checkpoint_per_interval(srv: Server):
    """Before: every request for the newest entry signed one (at most one a second, kept
    forever); now at most one per 30 s for the whole ledger, the others 404 with
    Retry-After."""
    before = _checkpoint_count(srv)
    answers = []
    start = time.monotonic()
    with srv.client("agent") as c:
        while time.monotonic() - start < 2.5:
            seq = _append(srv, 1)
            answers.append(c.get(f"/v1/entries/{seq}", params={"proof": "true"}))
            time.sleep(0.2)
    made = _checkpoint_count(srv) - before
    assert made <= 1, f"{made} checkpoints for {len(answers)} proof requests"
    refused = [r for r in answers if r.status_code == 404]
    assert len(refused) >= len(answers) - 1
    for r in refused:
        assert r.json()["code"] == "not_checkpointed" and r.json()["field"] == "proof"
        assert 1 <= int(r.headers["retry-after"]) <= 30
        assert r.json()["error"]["detail"]["retry_after_s"] == int(r.headers["retry-after"])


def test_proof_to_a_stored_checkpoint_of_a_given_size(srv: Server, tmp_path: Path):
    seq = _append(srv, 3)
    size = _sign(srv)
    _append(srv, 2)
    bigger = _sign(srv)
    assert bigger > size
    keys = _keys(srv, tmp_path)
    with srv.client("auditor") as c:
        for n in (size, bigger):
            r = c.get(f"/v1/entries/{seq}", params={"proof": "true", "tree_size": n})
            assert r.status_code == 200, r.text
            proof = verify_inclusion_bundle(r.json()["proof"], keys)
            assert (proof.seq, proof.tree_size) == (seq, n)
    with srv.client("agent") as c:
        r = c.get(f"/v1/entries/{seq}", params={"proof": "true", "tree_size": size})
    assert r.json()["proof"]["format"] == "ledger-inclusion-path/1"
    assert r.json()["proof"]["tree_size"] == size


@pytest.mark.parametrize(("params", "status", "code", "field"), [
    ({"proof": "true", "tree_size": "0"}, 400, "bad_request", "tree_size"),
    ({"proof": "true", "tree_size": "x"}, 400, "bad_request", "tree_size"),
    ({"proof": "true", "tree_size": str(2**60)}, 400, "bad_request", "tree_size"),
    ({"tree_size": "1"}, 400, "bad_request", "tree_size"),
    ({"proof": "true", "tree_size": "1"}, 400, "seq_out_of_range", "tree_size"),
])
def test_bad_tree_size_is_4xx_naming_it(srv: Server, params: dict[str, str], status: int,
                                        code: str, field: str):
    seq = _append(srv, 1)
    _sign(srv)
    with srv.client("auditor") as c:
        r = c.get(f"/v1/entries/{seq}", params=params)
    assert r.status_code == status, r.text
    assert r.json()["code"] == code and r.json()["field"].endswith(field)


def test_no_stored_checkpoint_of_that_size_is_404_and_signs_nothing(srv: Server):
    seq = _append(srv, 2)
    size = _sign(srv)
    before = _checkpoint_count(srv)
    with srv.client("auditor") as c:
        r = c.get(f"/v1/entries/{seq - 1}", params={"proof": "true", "tree_size": size - 1})
    assert r.status_code == 404 and r.json()["code"] == "not_checkpointed"
    assert r.json()["field"] == "tree_size"
    assert _checkpoint_count(srv) == before


def test_consistency_between_stored_checkpoints(srv: Server, tmp_path: Path):
    _append(srv, 2)
    old = _sign(srv)
    _append(srv, 3)
    new = _sign(srv)
    keys = _keys(srv, tmp_path)
    for role in ("auditor", "agent"):
        with srv.client(role) as c:
            r = c.get("/v1/proofs/consistency", params={"from": old, "to": new})
        assert r.status_code == 200, r.text
        got = verify_consistency_bundle(r.json(), keys)
        assert (got.old_size, got.tree_size) == (old, new)
    with srv.client("agent") as c:
        same = c.get("/v1/proofs/consistency", params={"from": new, "to": new})
    assert same.status_code == 200 and same.json()["path"] == []


@pytest.mark.parametrize(("params", "status", "code", "field"), [
    ({"from": "0", "to": "1"}, 400, "bad_request", "from"),
    ({"from": "-3", "to": "1"}, 400, "bad_request", "from"),
    ({"to": "1"}, 400, "bad_request", "from"),
    ({"from": "1"}, 400, "bad_request", "to"),
    ({"from": "1", "to": "y"}, 400, "bad_request", "to"),
    ({"from": "1", "to": str(2**62)}, 400, "bad_request", "to"),
    ({"from": "3", "to": "2"}, 400, "size_out_of_range", "from"),
    ({"from": "1", "to": "1", "x": "1"}, 400, "unknown_parameter", "x"),
])
def test_bad_consistency_parameters_are_4xx_naming_the_field(
        srv: Server, params: dict[str, str], status: int, code: str, field: str):
    with srv.client("agent") as c:
        r = c.get("/v1/proofs/consistency", params=params)
    assert r.status_code == status, r.text
    assert r.json()["code"] == code and r.json()["field"].endswith(field)


def test_consistency_to_a_size_never_stored_is_404_naming_it(srv: Server):
    _append(srv, 1)
    size = _sign(srv)
    with srv.client("developer" if "developer" in srv.tokens else "agent") as c:
        r = c.get("/v1/proofs/consistency", params={"from": size, "to": size + 1000})
        assert r.status_code == 404 and r.json()["code"] == "not_checkpointed"
        assert r.json()["field"] == "to"
        r = c.get("/v1/proofs/consistency", params={"from": size + 1000, "to": size + 1000})
        assert r.status_code == 404 and r.json()["field"] == "from"


def _keys(s: Server, tmp_path: Path) -> list[Any]:
    path = tmp_path / "jwks.json"
    path.write_text(httpx.get(s.base_url + "/.well-known/jwks.json").text)
    return load_public_keys(path)
