"""Operations against real processes: a multi-worker ``ledger serve`` scraped by a real
HTTP client, its JSON logs, readiness, background audits and signed alerts received by a
real webhook receiver process, on SQLite and PostgreSQL.

The leak test appends submissions whose subject, query, meta and evidence carry marker
strings (and one rejected submission carrying another), then greps every scrape and the
whole log for the markers and for the bearer tokens used."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import create_engine, text

from ledger.crypto.alert_sign import check_alert
from ledger.demo.samples import realistic
from ledger.ops.tokens import ROLES
from tests import tamper
from tests.api.server import ROOT, Server, prepare_ledger, start_server, stop_process
from tests.conftest import ENGINES, engine_url
from tests.store.pgadmin import own_database, terminate_backends

pytestmark = pytest.mark.slow
MARK = "MARKER" + uuid.uuid4().hex[:8].upper()


def _server(kind: str, request: pytest.FixtureRequest, tmp: Path, *extra: str,
            url: str | None = None, env: dict[str, str] | None = None) -> Server:
    db_url = url or engine_url(kind, request, tmp)
    origin = f"test.example/ops-{uuid.uuid4().hex[:6]}"
    keys = tmp / "keys"
    prepare_ledger(db_url, keys, origin)
    log = tmp / "serve.log"
    proc, base = _start(db_url, keys, log, *extra, env=env)
    srv = Server(kind, db_url, keys, origin, proc, base, log)
    srv.tokens = {role: srv.token(role, f"test-{role}") for role in ROLES}
    request.addfinalizer(srv.stop)
    return srv


def _start(db_url: str, keys: Path, log: Path, *extra: str,
           env: dict[str, str] | None = None) -> tuple[subprocess.Popen[bytes], str]:
    """``start_server``, waiting also while the workers of ``--workers N`` come up (the
    parent reports the address before a worker listens)."""
    if "--workers" not in extra:
        return start_server(db_url, keys, log, *extra, env=env)
    port = _free_port()
    cmd = [sys.executable, "-m", "ledger", "--db", db_url, "serve", "--host", "127.0.0.1",
           "--keys", str(keys), "--no-access-log", *extra, "--port", str(port)]
    with open(log, "wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, cwd=ROOT,
                                env={**os.environ, **(env or {})})
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            if httpx.get(base + "/v1/health", timeout=5).status_code == 200:
                return proc, base
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    stop_process(proc)
    raise RuntimeError(f"ledger serve did not start:\n{log.read_text('utf-8', 'replace')}")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _marked(i: int) -> dict[str, Any]:
    sub = realistic(i + 1)[i]
    sub["subject"] = f"{MARK}-subject-{i}"
    sub["query"] = f"{MARK}-query-{i}"
    sub["meta"] = {"model": f"{MARK}-meta-{i}"}
    return sub


def _scrape(srv: Server) -> str:
    with srv.client("operator") as c:
        r = c.get("/metrics")
    assert r.status_code == 200, r.text
    assert r.headers["content-type"].startswith("text/plain")
    return r.text


def _value(metrics: str, name: str, labels: str = "") -> float:
    m = re.search(rf"^{re.escape(name)}{re.escape(labels)} (\S+)$", metrics, re.M)
    assert m, f"{name}{labels} not in\n{metrics}"
    return float(m.group(1))


@pytest.mark.parametrize("kind", ENGINES)
def test_a_multi_worker_server_is_scraped_and_leaks_nothing(
        kind: str, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    srv = _server(kind, request, tmp_path, "--workers", "2", "--log-format", "json",
                  "--access-log")
    n = 12
    with srv.client("producer") as c:
        for i in range(n):
            r = c.post("/v1/entries", json=_marked(i), headers={"X-Request-ID": f"rid-{i}"})
            assert r.status_code == 201, r.text
            assert r.headers["x-request-id"] == f"rid-{i}"
        bad = _marked(0)
        bad["evidence"]["expression"] = f"{MARK}-rejected-evidence"
        r = c.post("/v1/entries", json=bad, headers={"X-Request-ID": "bad id!"})
        assert r.status_code == 422
        assert re.fullmatch(r"[0-9a-f]{32}", r.headers["x-request-id"])  # replaced
        r = c.post("/v1/entries/batch", json=[_marked(200), _marked(201)])
        assert r.status_code == 200 and all(x["ok"] for x in r.json()["results"])
    # every worker's counters, whichever worker answers: the sums are stable
    scrapes = [_scrape(srv) for _ in range(8)]
    for m in scrapes:
        assert _value(m, "ledger_appends_total", '{code="",outcome="appended"}') == n + 2
        assert _value(m, "ledger_appends_total",
                      '{code="preimage_mismatch",outcome="rejected"}') == 1, m
        assert _value(m, "ledger_append_latency_seconds_count",
                      '{route="/v1/entries"}') == n + 1
        assert _value(m, "ledger_group_commit_batch_size_count") == n + 1
        assert _value(m, "ledger_size") == n + 2
        assert _value(m, "ledger_quarantine_rows") == 1
        assert _value(m, "ledger_append_queue_depth") == 0
        assert _value(m, "ledger_store_up") == 1
        assert "ledger_seconds_since_checkpoint" not in m  # no checkpoint yet
    with srv.client("auditor") as c:
        assert c.get("/v1/checkpoint").status_code == 404
        assert c.get("/v1/entries/0?proof=true").status_code == 200  # signs one
    m = _scrape(srv)
    time.sleep(2.1)  # the database gauges are cached for 2 s
    m = _scrape(srv)
    assert _value(m, "ledger_checkpoint_size") >= 1
    assert 0 <= _value(m, "ledger_seconds_since_checkpoint") < 120
    # the role: only operator scrapes; operator reads nothing else
    for role in ROLES:
        with srv.client(role) as c:
            assert c.get("/metrics").status_code == (200 if role == "operator" else 403)
    with srv.client() as c:
        assert c.get("/metrics").status_code == 401
    with srv.client("operator") as c:
        assert c.get("/v1/entries/0").status_code == 403
    stop_process(srv.proc)
    log = srv.log.read_text("utf-8")
    secrets = [MARK, *srv.tokens.values()]
    for blob in [*scrapes, m, log]:
        for s in secrets:
            assert s not in blob
    lines = [json.loads(x) for x in log.splitlines() if x.startswith("{")]
    assert len(lines) == len([x for x in log.splitlines() if x.strip()]) - 1  # + the banner
    reqs = [x for x in lines if x["event"] == "request"]
    assert {x["request_id"] for x in reqs} >= {f"rid-{i}" for i in range(n)}
    one = next(x for x in reqs if x["request_id"] == "rid-0")
    assert one["route"] == "/v1/entries" and one["status"] == 201
    assert one["producer"] == "test-producer" and one["latency_ms"] > 0
    assert {"time", "level", "event", "method"} <= set(one)
    assert any(x["route"] == "/v1/entries/{seq:int}" for x in reqs)  # templates, not paths
    assert not any("?" in x.get("route", "") for x in reqs)


def test_text_logs_and_no_metrics(request: pytest.FixtureRequest, tmp_path: Path) -> None:
    srv = _server("sqlite", request, tmp_path, "--no-metrics", "--access-log")
    with srv.client("operator") as c:
        assert c.get("/metrics").status_code == 404
        assert c.get("/v1/health/live", headers={"X-Request-ID": "t-1"}).status_code == 200
    stop_process(srv.proc)
    log = srv.log.read_text("utf-8")
    assert re.search(r"^\S+Z info request GET /v1/health/live 200 request_id=t-1 ", log, re.M)


def test_readiness_follows_the_schema_and_the_store(request: pytest.FixtureRequest,
                                                     tmp_path: Path) -> None:
    srv = _server("sqlite", request, tmp_path)
    with srv.client() as c:
        assert c.get("/v1/health/live").json() == {"status": "live"}
        r = c.get("/v1/health/ready")
        assert r.status_code == 200 and r.json()["checks"]["schema"]["ok"] is True
        with tamper.connect(srv.db_url) as conn:
            head = conn.execute(text("SELECT version_num FROM alembic_version")).scalar()
            conn.execute(text("UPDATE alembic_version SET version_num = '0001'"))
        r = c.get("/v1/health/ready")
        assert r.status_code == 503 and r.headers["retry-after"] == "1"
        assert r.json()["failed"] == ["schema"]
        assert r.json()["checks"]["schema"]["current"] == "0001"
        with tamper.connect(srv.db_url) as conn:
            conn.execute(text("UPDATE alembic_version SET version_num = :v"), {"v": head})
        assert c.get("/v1/health/ready").status_code == 200


# -- background audits and alerts -------------------------------------------------------
class Receiver:
    def __init__(self, tmp: Path, fail_first: int = 0) -> None:
        self.out = tmp / f"received-{uuid.uuid4().hex[:6]}.jsonl"
        self.fail_first = fail_first
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.system.webhook_receiver", str(self.out),
             "--fail-first", str(fail_first)], stdout=subprocess.PIPE, cwd=ROOT)
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline().decode()
        self.url = f"http://127.0.0.1:{line.split()[1]}/hook?token=webhook-secret"

    def received(self) -> list[dict[str, Any]]:
        if not self.out.exists():
            return []
        return [json.loads(x) for x in self.out.read_text("utf-8").splitlines()]

    def wait_for(self, kind: str, timeout: float = 60) -> dict[str, Any]:
        """The first delivery (answered 204) of an alert of ``kind``."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for r in self.received():
                if r["n"] <= self.fail_first:
                    continue
                body = json.loads(r["body"])
                if body["alert"]["kind"] == kind:
                    return {**r, "envelope": body}
            time.sleep(0.1)
        raise AssertionError(f"no {kind} alert; received {self.received()}")


@pytest.fixture
def receiver(tmp_path: Path) -> Iterator[Receiver]:
    r = Receiver(tmp_path, fail_first=2)
    yield r
    stop_process(r.proc)  # type: ignore[arg-type]
    assert r.proc.stdout is not None
    r.proc.stdout.close()


def test_background_audit_alerts_a_tampered_ledger(receiver: Receiver,
                                                    request: pytest.FixtureRequest,
                                                    tmp_path: Path) -> None:
    srv = _server("sqlite", request, tmp_path, "--audit-every", "1s", "--watch-poll",
                  "200ms", "--alert-webhook", receiver.url, "--alert-backoff", "100ms",
                  "--checkpoint-overdue", "1s", "--log-format", "json", "--access-log")
    with srv.client("producer") as c:
        for i in range(5):
            assert c.post("/v1/entries", json=_marked(i)).status_code == 201
    # entries wait for a checkpoint: alerted once, delivered after two 500s (retries)
    got = receiver.wait_for("checkpoint_overdue")
    jwks = httpx.get(srv.base_url + "/.well-known/jwks.json").json()
    alert = check_alert(got["envelope"], jwks)
    assert alert["detail"]["uncovered_entries"] >= 5 and alert["origin"] == srv.origin
    attempts = [r for r in receiver.received()
                if json.loads(r["body"])["alert"]["id"] == alert["id"]]
    assert len(attempts) == 3 and got["headers"]["Ledger-Alert-Id"] == alert["id"]
    # a passing audit is recorded, then one tampered row fails the next one
    deadline = time.monotonic() + 60
    while "ledger_last_audit_outcome{outcome=\"passed\"} 1.0" not in _scrape(srv):
        assert time.monotonic() < deadline
        time.sleep(0.3)
    with tamper.unlocked(srv.db_url) as conn:
        row = tamper.row(conn, 2)
        tamper.update_entry(conn, 2, recorded_at=row.recorded_at + 1)
    got = receiver.wait_for("audit_failed")
    alert = check_alert(got["envelope"], jwks)
    audit = alert["audit"]
    assert audit["outcome"] == "failed" and audit["findings"] >= 1
    assert any(f["seq"] == 2 for f in audit["first_findings"])
    assert sum(audit["findings_by_class"].values()) == audit["findings"]
    assert alert["head"]["size"] >= 6 and alert["checkpoint"] is None
    assert isinstance(audit["recorded_seq"], int)
    deadline = time.monotonic() + 30
    while True:
        m = _scrape(srv)
        if "ledger_last_audit_outcome{outcome=\"failed\"} 1.0" in m:
            break
        assert time.monotonic() < deadline, m
        time.sleep(0.5)
    assert sum(float(v) for v in re.findall(r"^ledger_last_audit_findings\{class=\"\w+\"\} "
                                            r"(\S+)$", m, re.M)) >= 1
    # the condition never clears: the following failed audits alert no more
    deadline = time.monotonic() + 60
    while _value(m, "ledger_scheduled_audits_total", '{outcome="failed"}') < 4:
        assert time.monotonic() < deadline, m
        time.sleep(0.5)
        m = _scrape(srv)
    failed_ids = {json.loads(r["body"])["alert"]["id"] for r in receiver.received()
                  if json.loads(r["body"])["alert"]["kind"].startswith("audit_")}
    assert len(failed_ids) == 1, receiver.received()
    assert _value(m, "ledger_alerts_total", '{kind="checkpoint_overdue",result="delivered"}') == 1
    stop_process(srv.proc)
    log = srv.log.read_text("utf-8")
    for s in (MARK, "webhook-secret", *srv.tokens.values()):
        assert s not in log and s not in m
    events = [json.loads(x) for x in log.splitlines() if x.startswith("{")]
    assert any(e["event"] == "alert" and e.get("outcome") == "failed" for e in events)
    assert any(e["event"] == "audit" and e.get("outcome") == "failed" for e in events)


@pytest.mark.postgres
def test_a_store_down_too_long_is_alerted(receiver: Receiver, pg_database: str,
                                          request: pytest.FixtureRequest,
                                          tmp_path: Path) -> None:
    from tests.api.test_store_faults import _allow_connections

    with own_database() as url:
        srv = _server("postgresql", request, tmp_path, "--store-down-after", "1s",
                      "--watch-poll", "200ms", "--alert-webhook", receiver.url,
                      "--alert-backoff", "100ms", url=url)
        with srv.client("producer") as c:
            assert c.post("/v1/entries", json=_marked(0)).status_code == 201
        time.sleep(0.5)  # one good snapshot for the alert's head
        _allow_connections(url, False)
        try:
            terminate_backends(url)
            got = receiver.wait_for("store_unavailable")
            with srv.client() as c:
                r = c.get("/v1/health/ready")
                assert r.status_code == 503 and "store" in r.json()["failed"]
        finally:
            _allow_connections(url, True)
        alert = check_alert(got["envelope"], json.loads((srv.keys_dir / "jwks.json")
                                                        .read_text()))
        assert alert["detail"]["down_for_s"] >= 1
        assert alert["head"]["size"] == 1
        deadline = time.monotonic() + 30
        with srv.client() as c:
            while c.get("/v1/health/ready").status_code != 200:
                assert time.monotonic() < deadline
                time.sleep(0.2)
        srv.stop()
        eng = create_engine(url.replace("postgresql://", "postgresql+psycopg://", 1))
        eng.dispose()
