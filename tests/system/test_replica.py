"""Auditors and readers on a real PostgreSQL streaming replica (hot standby).

The replica is made by ``pg_basebackup`` from the test server and started on another port
(tests/replica.py); the primary is never restarted.  ``ledger audit --db REPLICA`` audits
what the replica holds and saves nothing there; ``ledger serve --read-db REPLICA`` answers
reads from it and writes on the primary.  A replica that lags (replay paused on purpose)
answers 503 ``replica_behind`` with ``Retry-After`` for what it has not replayed, never a
404; a stopped replica answers 503 ``store_unavailable`` while appends go on.
"""

from __future__ import annotations

import json
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from ledger.cli.main import cli
from ledger.crypto.keys import Keyring
from ledger.demo.samples import realistic
from ledger.facade import Ledger
from ledger.ops.tokens import ROLES
from tests.api.server import Server, prepare_ledger, start_server
from tests.conftest import PG_ADMIN_URL
from tests.replica import Replica, remove_replica, start_replica
from tests.store.pgadmin import own_database

pytestmark = [pytest.mark.slow, pytest.mark.postgres]

ORIGIN = "test.example/replica"


@pytest.fixture(scope="module")
def replica() -> Iterator[Replica]:
    # not under pytest's temporary folder: the server runs as the postgres user when the
    # tests run as root, and pytest's folders are private to the user running the tests
    made = start_replica(Path(tempfile.mkdtemp(prefix="ledger-replica-")), PG_ADMIN_URL)
    if isinstance(made, str):
        pytest.skip(f"no streaming replica of {PG_ADMIN_URL}: {made}")
    yield made
    remove_replica(made)


@pytest.fixture(scope="module")
def ledger_keys(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("keys")


@pytest.fixture(scope="module")
def primary(replica: Replica, ledger_keys: Path) -> Iterator[str]:
    """A ledger of 40 entries with a checkpoint of size 40, replayed by the replica."""
    with own_database() as url:
        prepare_ledger(url, ledger_keys, ORIGIN)
        with Ledger.open(url) as ledger:
            assert all(r.ok for r in ledger.append_many(realistic(40)))
            ledger.checkpoint(Keyring.load(ledger_keys))
        replica.wait_caught_up(PG_ADMIN_URL)
        yield url


@pytest.fixture
def served(primary: str, replica: Replica, ledger_keys: Path, tmp_path: Path,
           ) -> Iterator[Server]:
    """``ledger serve --db PRIMARY --read-db REPLICA`` (signs a proof's checkpoint when
    asked, at most one a second)."""
    keys = ledger_keys
    log = tmp_path / "serve.log"
    proc, base = start_server(primary, keys, log, "--read-db", replica.url_for(primary),
                              "--checkpoint-on-demand-interval", "1s")
    srv = Server("postgresql", primary, keys, ORIGIN, proc, base, log)
    srv.tokens = {role: srv.token(role, f"test-{role}") for role in ROLES}
    try:
        yield srv
    finally:
        srv.stop()
        replica.resume()


def _audit(url: str, *args: str) -> tuple[int, str, str]:
    res = CliRunner().invoke(cli, ["--db", url, "audit", *args])
    return res.exit_code, res.stdout, res.stderr


def _metric(text: str, name: str) -> float:
    (line,) = [ln for ln in text.splitlines() if ln.startswith(name + " ")]
    return float(line.split()[1])


# -- ledger audit --db REPLICA -------------------------------------------------------

@pytest.mark.parametrize("workers", ["1", "2"])
def test_audit_on_the_replica_verifies_every_row_and_saves_nothing(
        primary: str, replica: Replica, workers: str) -> None:
    code, out, err = _audit(replica.url_for(primary), "--workers", workers,
                            "--json-report", "-")
    assert code == 0, err
    assert "audit complete: 40 rows, 40 verified, 0 failed, 0 unverified" in err
    report = json.loads(out)
    assert report["run_id"] is None and report["read_only_replica"] is True
    assert report["summary"]["rows"] == 40
    with Ledger.open(primary) as ledger:  # the primary has no audit run either
        assert ledger.audit_runs(None, 10)["runs"] == []


@pytest.mark.parametrize("flag", ["--record", "--resume"])
def test_audit_writes_on_a_replica_are_refused_with_exit_2_naming_the_flag(
        primary: str, replica: Replica, flag: str) -> None:
    code, _, err = _audit(replica.url_for(primary), flag)
    assert code == 2
    assert f"read_only_replica [{flag[2:]}]" in err and "primary" in err


# -- ledger serve --read-db REPLICA ----------------------------------------------------

def test_a_read_db_of_another_ledger_is_refused_at_start(primary: str, tmp_path: Path,
                                                         ledger_keys: Path) -> None:
    other = f"sqlite:///{tmp_path / 'other.db'}"
    Ledger.init(other).close()
    res = CliRunner().invoke(cli, ["--db", primary, "serve", "--keys",
                                   str(ledger_keys),
                                   "--read-db", other])
    assert res.exit_code == 2
    assert "not_a_replica [read_db]" in res.stderr


def test_reads_come_from_the_replica_and_health_reports_its_lag(
        served: Server, replica: Replica) -> None:
    with served.client("auditor") as c, served.client("producer") as p, \
            served.client("operator") as op, served.client() as anon:
        health = anon.get("/v1/health").json()
        assert health["size"] == 40
        r = health["read_database"]
        assert (r["status"], r["standby"], r["size"], r["entries_behind"],
                r["checkpoint_size"], r["receiver"]) == ("reachable", True, 40, 0, 40,
                                                         "streaming")
        assert c.get("/v1/entries/39", params={"proof": "true"}).status_code == 200

        replica.pause()  # the standby receives WAL and replays none of it
        seq = p.post("/v1/entries", json=realistic(41)[40]).json()["seq"]  # on the primary
        assert seq == 40
        for path, params in ((f"/v1/entries/{seq}", {}), (f"/v1/entries/{seq}",
                                                           {"proof": "true"})):
            got = c.get(path, params=params)
            assert got.status_code == 503, got.text
            assert got.json()["code"] == "replica_behind" and got.headers["Retry-After"]
        # what the replica has is still served, as of what it has replayed
        assert c.get("/v1/entries/39").status_code == 200
        assert c.get("/v1/entries", params={"after": 35}).json()["next_after"] is None
        r = anon.get("/v1/health").json()["read_database"]
        assert r["size"] == 40 and r["entries_behind"] == 1 and r["replay_paused"] is True
        assert r["checkpoint_behind"] == 0
        with Ledger.open(served.db_url) as ledger:  # a checkpoint the replica lacks
            ledger.checkpoint(Keyring.load(served.keys_dir))
        for path in ("/v1/proofs/consistency?from=40&to=41",
                     "/v1/entries/39?proof=true&tree_size=41"):
            got = c.get(path)
            assert got.status_code == 503, got.text
            assert got.json()["code"] == "replica_behind" and got.headers["Retry-After"]
        assert anon.get("/v1/health").json()["read_database"]["checkpoint_behind"] == 1
        metrics = op.get("/metrics").text
        assert _metric(metrics, "ledger_replica_up") == 1
        assert _metric(metrics, "ledger_replica_entries_behind") == 1

        replica.resume()
        replica.wait_caught_up(PG_ADMIN_URL)
        got = c.get(f"/v1/entries/{seq}", params={"proof": "true"})
        assert got.status_code == 200, got.text
        assert got.json()["proof"]["tree_size"] == 41
        assert anon.get("/v1/health").json()["read_database"]["entries_behind"] == 0
        # caught up, a seq that exists nowhere is a plain 404
        missing = c.get("/v1/entries/4000")
        assert missing.status_code == 404 and missing.json()["code"] == "not_found"


def test_a_stopped_replica_is_503_with_retry_after_and_appends_go_on(
        served: Server, replica: Replica) -> None:
    with served.client("auditor") as c, served.client("producer") as p, \
            served.client("operator") as op, served.client() as anon:
        assert c.get("/v1/entries/0").status_code == 200
        replica.stop()
        try:
            for path in ("/v1/entries/0", "/v1/entries", "/v1/checkpoint",
                         "/v1/proofs/consistency?from=40&to=41"):
                got = c.get(path)
                assert got.status_code == 503, (path, got.text)
                assert got.json()["code"] == "store_unavailable"
                assert got.headers["Retry-After"]
            health = anon.get("/v1/health")
            assert health.status_code == 200  # the primary takes appends
            assert health.json()["read_database"]["status"] == "unreachable"
            assert p.post("/v1/entries", json=realistic(43)[42]).status_code == 201
            assert _metric(op.get("/metrics").text, "ledger_replica_up") == 0
        finally:
            replica.start()
        deadline = time.monotonic() + 30
        while c.get("/v1/entries/0").status_code != 200:  # reconnects by itself
            assert time.monotonic() < deadline
            time.sleep(0.1)

