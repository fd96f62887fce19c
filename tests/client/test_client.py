"""LedgerClient and AsyncLedgerClient against a real ``ledger serve`` (SQLite, PostgreSQL):
verified receipts, replays, refusals, spooling while the server is down, in-order drain
with nothing stored twice, batching, back-off, and a receipt that does not verify."""

from __future__ import annotations

import asyncio
import json
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from ledger.client import (
    AccessDenied,
    AsyncLedgerClient,
    LedgerClient,
    LedgerUnavailable,
    ReceiptInvalid,
    Rejected,
    Spool,
    framing,
)
from ledger.errors import ClientUsage
from tests.client.conftest import audit_exit, result_keys
from tests.client.server import LedgerServer
from tests.client.submissions import blocked, mixed, verified


class Counting(httpx.HTTPTransport):
    """The real transport, counting the requests that reach the network."""

    def __init__(self) -> None:
        super().__init__()
        self.paths: list[str] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        self.paths.append(request.url.path)
        return super().handle_request(request)


class Tampering(httpx.HTTPTransport):
    """A man in the middle that changes the entry_hash of an append answer."""

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        r = super().handle_request(request)
        if request.url.path != "/v1/entries":
            return r
        body = json.loads(r.read())
        body["entry_hash"] = "sha256:" + "0" * 64
        return httpx.Response(r.status_code, json=body)


def test_append_returns_a_verified_receipt_and_a_retry_replays(server: LedgerServer) -> None:
    with LedgerClient(server.url, server.token()) as client:
        out = client.append(verified(1, "rcpt"))
        assert out.status == "appended" and out.stored
        assert out.claims["seq"] == out.seq and out.claims["entry_hash"] == out.entry_hash
        assert out.claims["origin"] == server.origin and out.idempotency_key.startswith("lc-")
        again = client.append({**verified(1, "rcpt"), "idempotency_key": out.idempotency_key})
        assert again.status == "replayed" and again.seq == out.seq
    assert result_keys(server.db_url).count(out.idempotency_key) == 1


def test_refusals_raise_and_are_never_spooled(server: LedgerServer, tmp_path: Path) -> None:
    bad = {**verified(2, "bad"), "evidence": {"something": "else"}}
    with LedgerClient(server.url, server.token(), spool_dir=str(tmp_path / "sp")) as client:
        with pytest.raises(Rejected) as err:
            client.append(bad)
        assert err.value.code == "preimage_mismatch" and err.value.status == 422
        outs = client.append_many([blocked(1, "many"), bad])
        assert [o.status for o in outs] == ["appended", "rejected"]
        assert outs[1].error["code"] == "preimage_mismatch"
        assert len(client.spool) == 0
    with LedgerClient(server.url, server.token(role="agent")) as client, \
            pytest.raises(AccessDenied):
        client.append(blocked(3, "agent"))


def test_a_receipt_that_does_not_match_the_answer_is_refused(server: LedgerServer) -> None:
    with LedgerClient(server.url, server.token(), transport=Tampering()) as client, \
            pytest.raises(ReceiptInvalid, match="does not sign"):
        client.append(blocked(1, "mitm"))
    with LedgerClient(server.url, server.token(), origin="someone.else/ledger") as client, \
            pytest.raises(ReceiptInvalid, match="not 'someone.else/ledger'"):
        client.append(blocked(2, "mitm"))


def test_down_server_spools_then_drain_appends_each_once_in_order(server: LedgerServer,
                                                                  tmp_path: Path) -> None:
    spool = str(tmp_path / "spool")
    with LedgerClient(server.url, server.token(), spool_dir=spool, timeout=2) as client:
        first = client.append(blocked(0, "down"))
        assert first.status == "appended"
        server.kill()
        outs = [client.append(mixed(i, "down")) for i in range(1, 7)]
        assert [o.status for o in outs] == ["spooled"] * 6
        assert client.drain().error is not None  # still down: nothing lost, nothing sent
        assert len(client.spool) == 6
    server.start()
    with LedgerClient(server.url, server.token(), spool_dir=spool) as client:
        report = client.drain()
        assert (report.sent, report.appended, report.remaining) == (6, 6, 0)
        seqs = [o.seq for o in report.outcomes]
        assert seqs == sorted(seqs)
    keys = result_keys(server.db_url)
    assert [keys.count(o.idempotency_key) for o in outs] == [1] * 6
    assert keys.index(outs[0].idempotency_key) < keys.index(outs[-1].idempotency_key)
    assert audit_exit(server.db_url) == 0


def test_a_spooled_item_the_ledger_already_holds_is_replayed_not_stored_twice(
        server: LedgerServer, tmp_path: Path) -> None:
    """The first try reached the ledger but its answer was lost (a timeout after the
    commit): the spooled copy carries the same key, so the drain replays it."""
    with LedgerClient(server.url, server.token()) as client:
        stored = client.append(verified(5, "lost-answer"))
    body = json.dumps({**verified(5, "lost-answer"), "idempotency_key": stored.idempotency_key})
    with Spool(tmp_path / "sp") as sp:
        sp.put(body.encode(), stored.idempotency_key)
    with LedgerClient(server.url, server.token(), spool_dir=str(tmp_path / "sp")) as client:
        report = client.drain()
    assert (report.replayed, report.appended) == (1, 0)
    assert report.outcomes[0].seq == stored.seq
    assert result_keys(server.db_url).count(stored.idempotency_key) == 1


def test_without_a_spool_an_unreachable_ledger_raises(server: LedgerServer) -> None:
    server.kill()
    with LedgerClient(server.url, server.token(), timeout=2) as client, \
            pytest.raises(LedgerUnavailable, match="no spool_dir"):
        client.append(blocked(1, "nospool"))


def test_back_off_keeps_appends_off_the_network(server: LedgerServer, tmp_path: Path) -> None:
    server.kill()
    transport = Counting()
    with LedgerClient(server.url, server.token(), spool_dir=str(tmp_path / "sp"),
                      transport=transport, timeout=2) as client:
        assert all(client.append(blocked(i, "backoff")).spooled for i in range(20))
        assert len(transport.paths) <= 2  # the first failure, then spooled without trying


def test_concurrent_appends_are_batched(server: LedgerServer) -> None:
    transport = Counting()
    with LedgerClient(server.url, server.token(), batch_max=16, batch_wait_ms=50,
                      transport=transport) as client, ThreadPoolExecutor(24) as pool:
        outs = list(pool.map(lambda i: client.append(mixed(i, "batched")), range(48)))
    assert all(o.status == "appended" for o in outs)
    assert len({o.seq for o in outs}) == 48
    posts = [p for p in transport.paths if p.startswith("/v1/entries")]
    assert len(posts) < 48 / 2 and "/v1/entries/batch" in posts


def test_background_drain_empties_the_spool_when_the_server_is_back(
        server: LedgerServer, tmp_path: Path) -> None:
    server.kill()
    with LedgerClient(server.url, server.token(), spool_dir=str(tmp_path / "sp"),
                      drain_interval_s=0.2, timeout=2) as client:
        outs = [client.append(blocked(i, "bg")) for i in range(4)]
        assert all(o.spooled for o in outs)
        server.start()
        client.core.succeeded()  # skip the remaining back-off
        done = threading.Event()
        for _ in range(100):
            if len(client.spool) == 0:
                done.set()
                break
            done.wait(0.1)
        assert done.is_set()
    keys = result_keys(server.db_url)
    assert all(keys.count(o.idempotency_key) == 1 for o in outs)


def test_async_client_appends_spools_and_drains(server: LedgerServer, tmp_path: Path) -> None:
    spool = str(tmp_path / "sp")

    async def produce() -> list[str]:
        async with AsyncLedgerClient(server.url, server.token(), spool_dir=spool,
                                     batch_max=8, batch_wait_ms=20, timeout=2) as client:
            outs = await asyncio.gather(*(client.append(mixed(i, "aio")) for i in range(10)))
            assert all(o.status == "appended" for o in outs)
            server.kill()
            late = await asyncio.gather(*(client.append(mixed(i, "aio-late"))
                                          for i in range(5)))
            assert all(o.spooled for o in late)
            return [o.idempotency_key for o in late]

    keys = asyncio.run(produce())
    server.start()

    async def drain() -> None:
        async with AsyncLedgerClient(server.url, server.token(), spool_dir=spool) as client:
            report = await client.drain()
            assert (report.appended, report.remaining) == (5, 0)

    asyncio.run(drain())
    stored = result_keys(server.db_url)
    assert all(stored.count(k) == 1 for k in keys)


def test_a_bad_body_in_a_live_batch_fails_alone(server: LedgerServer) -> None:
    """A body with a UTF-8 byte order mark (json.loads takes it) used to fail every
    caller of its batch with invalid_json; now its own caller gets ClientUsage before
    anything is sent and the seven others are appended."""
    bom = b"\xef\xbb\xbf" + json.dumps({**blocked(0, "bom"), "idempotency_key": "bom-1"}).encode()
    subs: list[object] = [mixed(i, "bom-batch") for i in range(1, 8)] + [bom]
    start = threading.Barrier(8)

    def one(s: object) -> object:
        start.wait()
        try:
            return client.append(s)
        except ClientUsage as exc:
            return exc

    with LedgerClient(server.url, server.token(), batch_max=8, batch_wait_ms=300) as client, \
            ThreadPoolExecutor(8) as pool:
        client.append(blocked(99, "warm-up"))  # identity and keys learnt before the race
        outs = list(pool.map(one, subs))
    assert isinstance(outs[-1], ClientUsage) and "byte order mark" in str(outs[-1])
    assert [getattr(o, "status", None) for o in outs[:-1]] == ["appended"] * 7
    assert "bom-1" not in result_keys(server.db_url)


def _raw_spool(directory: Path, bodies: list[bytes]) -> list[str]:
    """A spool holding ``bodies`` as an older client wrote them (no body check)."""
    Spool(directory).close()
    seg = next(directory.glob("*.seg"))
    keys = [f"raw-{directory.name}-{i}" for i in range(len(bodies))]
    with open(seg, "ab") as fh:
        for i, (body, key) in enumerate(zip(bodies, keys, strict=True)):
            fh.write(framing.encode(framing.KIND_APPEND, {
                "id": i + 1, "key": key, "t": 1, "body": body.decode("utf-8")}))
    return keys


def test_a_spooled_body_that_is_not_one_object_is_refused_alone(server: LedgerServer,
                                                                tmp_path: Path) -> None:
    """Spooled before bodies were checked: a BOM body used to block every drain
    (0 of 20 delivered) and a forged ``{...},{...}`` made the ledger append 51 items for
    50 and the spool never empty.  Each is now refused here, the others delivered."""
    bodies = [json.dumps({**mixed(i, "poison"), "idempotency_key": f"p-{i}"}).encode()
              for i in range(20)]
    bodies[3] = "\ufeff".encode() + bodies[3]
    bodies[7] = bodies[7] + b"," + json.dumps({**blocked(70, "forged"),
                                               "idempotency_key": "forged-70"}).encode()
    keys = _raw_spool(tmp_path / "sp", bodies)
    with LedgerClient(server.url, server.token(), spool_dir=str(tmp_path / "sp"),
                      drain_batch=50) as client:
        report = client.drain()
        assert (report.sent, report.appended, report.rejected, report.remaining) == (20, 18, 2, 0)
        assert [o.status for o in report.outcomes][3] == "rejected"
        assert report.outcomes[7].error["code"] == "invalid_json"
    stored = result_keys(server.db_url)
    assert [f"p-{i}" in stored for i in range(20)] == [i not in (3, 7) for i in range(20)]
    assert "forged-70" not in stored
    refused = [json.loads(x) for x in (tmp_path / "sp" / "rejected.jsonl").read_text().splitlines()]
    assert [r["key"] for r in refused] == [keys[3], keys[7]]
