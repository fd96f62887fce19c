"""Queries: every filter alone and combined, hostile values, keyset pages under appends,
the three disclosure layers, and the CLI output formats — on SQLite and PostgreSQL."""

from __future__ import annotations

import csv
import datetime as dt
import io
import json
from types import SimpleNamespace
from typing import Any

import pytest
from click.testing import CliRunner
from sqlalchemy import inspect

import tests.tamper as T
from ledger import DiagnosticResult, Ledger
from ledger.cli.main import cli
from ledger.clock import FixedClock, format_us
from ledger.demo.samples import realistic
from ledger.errors import UsageError
from ledger.ops.query import (
    AGENT_FIELDS,
    AUDITOR_FIELDS,
    DEVELOPER_FIELDS,
    STRING_FILTERS,
    explain,
    iter_query,
    make_filters,
)

T0 = T.FIXTURE_TIME_US
MINUTE = 60_000_000
HOSTILE = ["'", "''", '"', "%", "_", "req-%", "req_000001", "'; DROP TABLE entries; --",
           "x' OR '1'='1", "%' OR 1=1 --", "\\", "Ünïcödé 😀 𝔘", "\u202e", " ", "\n", "NULL",
           "null", "*", "[a-z]", "$1", ":after", "?", "%s"]
SECRETS = ("secret.rule_id", "LEAK", "SECRET-EVIDENCE", "SECRET-QUERY", "sha256:")


def hostile_sub(i: int, text: str) -> dict[str, Any]:
    r = DiagnosticResult.blocked(f"Blocked {i}", {"constraint_id": text, "detail": text})
    return {"result": r.to_dict(), "engine": "sql", "subject": text}


def leaky_subs() -> list[dict[str, Any]]:
    """Results whose developer-only parts try to reach the agent layer."""
    dev = {"constraint_id": "secret.rule_id.X9", "agent_message": "LEAK-dev", "status": "LEAK",
           "evidence": "SECRET-EVIDENCE-dev", "proof_ref": "sha256:" + "ee" * 32,
           "seq": "LEAK-seq", "recorded_at": "LEAK-time", "kind": "LEAK-kind"}
    nested = DiagnosticResult.verified("Claim verified", dev, "SECRET-EVIDENCE-text")
    flat_dev = {k: v for k, v in dev.items() if k not in ("status", "agent_message",
                                                          "proof_ref")}
    flat = DiagnosticResult.verified("Claim verified", flat_dev, {"SECRET-EVIDENCE": 1})
    flattened = {**flat.to_dict(), **flat_dev, "admission": "ADMIT"}
    return [
        {"result": nested.to_dict(), "engine": "math", "evidence": "SECRET-EVIDENCE-text",
         "evidence_kind": "string", "query": "SECRET-QUERY", "meta": {"LEAK": True},
         "subject": "LEAK-subject"},
        {"result": flattened, "engine": "logic", "evidence": {"SECRET-EVIDENCE": 1},
         "evidence_kind": "json", "query": "SECRET-QUERY 2"},
    ]


def build(url: str) -> Ledger:
    """Four batches a minute apart: results, a key event, attested + hostile rows, results."""
    clock = FixedClock(T0)
    led = Ledger.init(url, clock=clock)
    assert all(r.ok for r in led.append_many(realistic(12), producer="p-one"))
    clock.advance(MINUTE)
    led.trust_issuer(T.ISSUER, T.JWKS, reason="test")
    clock.advance(MINUTE)
    other = T.new_key()
    batch = [T.signed_sub(i, T0) for i in range(3)]
    batch += [T.signed_sub(9, T0, key=other, kid="did:other#k1", iss="did:other")]
    batch += [hostile_sub(i, h) for i, h in enumerate(HOSTILE)] + leaky_subs()
    res = led.append_many(batch, producer="p-two")
    assert all(r.ok for r in res), [r.error for r in res if not r.ok]
    clock.advance(MINUTE)
    assert all(r.ok for r in led.append_many(realistic(12, start=100), producer="p-one"))
    return led


@pytest.fixture
def led(db_url):
    with build(db_url) as led:
        yield led


def all_rows(led: Ledger) -> list[Any]:
    """The stored rows; ``subject`` is the entry's subject (a v2 row's is its subject
    payload, revision 0005)."""
    out = []
    for r in led.iter_entries():
        subject = r.subject if r.subject is not None else led.get(r.seq)["subject"]
        out.append(SimpleNamespace(**{**r._asdict(), "subject": subject}))
    return out


def seqs(page_or_rows: Any) -> list[int]:
    rows = page_or_rows.rows if hasattr(page_or_rows, "rows") else page_or_rows
    return [r["seq"] for r in rows]


def everything(led: Ledger, **filters: Any) -> list[int]:
    return seqs(iter_query(led.ctx, make_filters(**filters), page=7))


def test_every_text_filter_alone_returns_exactly_the_matching_rows(led):
    rows = all_rows(led)
    for name in STRING_FILTERS:
        values = {getattr(r, name) for r in rows} - {None}
        assert values, name
        for value in values:
            want = [r.seq for r in rows if getattr(r, name) == value]
            assert everything(led, **{name: value}) == want, (name, value)
            assert seqs(led.query(**{name: value}, limit=10_000)) == want


def test_time_filters_are_half_open_rfc3339_windows(led):
    rows = all_rows(led)
    for since in (T0, T0 + MINUTE, T0 + 90_000_000, T0 + 3 * MINUTE, T0 + 4 * MINUTE):
        for until in (None, T0 + MINUTE, T0 + 3 * MINUTE, T0 + 10 * MINUTE):
            want = [r.seq for r in rows if r.recorded_at >= since
                    and (until is None or r.recorded_at < until)]
            got = everything(led, since=format_us(since),
                             until=format_us(until) if until else None)
            assert got == want, (since, until)
    assert everything(led, since="2000-01-01") == [r.seq for r in rows]
    assert everything(led, until="2000-01-01T00:00:00+02:00") == []
    assert led.query(since=format_us(T0 + MINUTE), limit=1).rows[0]["recorded_at"] == \
        format_us(T0 + MINUTE)


def test_filters_combine_with_and_and_repeat_with_or(led):
    rows = all_rows(led)
    want = [r.seq for r in rows if r.engine == "math" and r.status == "VERIFIED"
            and T0 + 2 * MINUTE <= r.recorded_at < T0 + 4 * MINUTE]
    assert want
    assert everything(led, engine="math", status="VERIFIED", since=format_us(T0 + 2 * MINUTE),
                      until=format_us(T0 + 4 * MINUTE)) == want
    want = [r.seq for r in rows if r.status in ("BLOCKED", "UNVERIFIABLE") and
            r.producer == "p-one"]
    assert everything(led, status=["BLOCKED", "UNVERIFIABLE"], producer="p-one") == want
    want = [r.seq for r in rows if r.att_verdict == "valid" and r.att_kid == T.KID]
    assert len(want) == 3
    assert everything(led, att_verdict="valid", att_kid=T.KID, kind="result") == want
    assert everything(led, att_verdict="unchecked") == [r.seq for r in rows
                                                        if r.att_verdict == "unchecked"]
    assert everything(led, engine="math", start=5, end=20) == [
        r.seq for r in rows if r.engine == "math" and 5 <= r.seq < 20]


def test_hostile_values_are_data_never_sql(led, db_url):
    rows = all_rows(led)
    size = len(rows)
    for text in HOSTILE:
        want = [r.seq for r in rows if r.subject == text]
        assert len(want) == 1, text
        assert everything(led, subject=text) == want
        assert everything(led, constraint_id=text) == want
        for name in ("engine", "status", "kind", "proof_ref", "att_kid", "producer"):
            assert everything(led, **{name: text}) == [], (name, text)
        assert everything(led, subject=[text, "req-000001"]) == sorted(
            want + [r.seq for r in rows if r.subject == "req-000001"])
    assert everything(led, subject="req-%") == [r.seq for r in rows if r.subject == "req-%"]
    assert everything(led, subject="req-00000_") == []
    with Ledger.open(db_url) as again:
        assert again.head()["size"] == size
        assert [r.entry_hash for r in again.iter_entries()] == [r.entry_hash for r in rows]
        assert {"entries", "payloads", "head"} <= set(inspect(again.engine).get_table_names())


@pytest.mark.parametrize("bad", [
    {"subject": "a\x00b"}, {"subject": "\ud800"}, {"subject": "x" * 1025},
    {"status": 5}, {"since": "yesterday"}, {"until": "2026-13-01"}, {"nope": "x"},
    {"limit": 0}, {"limit": 10_001}, {"after": -2}, {"layer": "root"}, {"start": -1}])
def test_bad_filters_and_pages_are_usage_errors(led, bad):
    with pytest.raises(UsageError):
        led.query(**bad)


def test_keyset_pages_are_stable_under_concurrent_appends(led):
    got, after, added = [], -1, 0
    first = led.query(status="BLOCKED", limit=4, layer="auditor")
    while True:
        page = led.query(status="BLOCKED", after=after, limit=4, layer="auditor")
        got += page.rows
        if page.next_after is None:
            break
        after = page.next_after
        if added < 3:  # a writer appends between every page
            led.append_many(realistic(6, start=1000 + added))
            added += 1
    again = led.query(status="BLOCKED", limit=4, layer="auditor")
    assert again.rows == first.rows and again.next_after == first.next_after
    want = [r.seq for r in all_rows(led) if r.status == "BLOCKED"]
    assert seqs(got) == want and len(set(seqs(got))) == len(got)
    last = led.query(status="BLOCKED", after=want[-1])
    assert last.rows == [] and last.next_after is None


def test_next_after_is_none_exactly_when_nothing_follows(led):
    n = len(everything(led, engine="math"))
    page = led.query(engine="math", limit=n)
    assert len(page.rows) == n and page.next_after is None
    page = led.query(engine="math", limit=n - 1)
    assert page.next_after == page.rows[-1]["seq"]


def test_layers_are_allow_lists_and_agent_never_sees_developer_data(led):
    for layer, allowed in (("agent", AGENT_FIELDS), ("developer", DEVELOPER_FIELDS),
                           ("auditor", AUDITOR_FIELDS)):
        rows = list(iter_query(led.ctx, make_filters(), layer=layer))
        assert rows and all(tuple(r) == allowed for r in rows)
    agent = json.dumps(list(iter_query(led.ctx, make_filters(), layer="agent")),
                       ensure_ascii=False)
    for secret in SECRETS + tuple(h for h in HOSTILE if len(h) > 3 and h.lower() != "null"):
        assert secret not in agent, secret
    dev = list(iter_query(led.ctx, make_filters(subject="LEAK-subject"), layer="developer"))
    assert dev[0]["developer_fields"]["constraint_id"] == "secret.rule_id.X9"
    assert dev[0]["agent_message"] == "Claim verified" and dev[0]["status"] == "VERIFIED"
    text = json.dumps(dev, ensure_ascii=False)
    assert "SECRET-EVIDENCE-text" not in text and "SECRET-QUERY" not in text
    aud = list(iter_query(led.ctx, make_filters(subject="LEAK-subject"), layer="auditor"))
    assert aud[0]["preimage"] == "SECRET-EVIDENCE-text" and aud[0]["query"] == "SECRET-QUERY"
    assert aud[0]["proof_ref"].startswith("sha256:") and aud[0]["meta"] == {"LEAK": True}
    events = list(iter_query(led.ctx, make_filters(kind="key_event"), layer="auditor"))
    assert events[0]["document"]["issuer"] == T.ISSUER and events[0]["agent_message"] is None
    attested = list(iter_query(led.ctx, make_filters(att_kid=T.KID, kind="result"),
                               layer="auditor"))
    assert attested[0]["attestation"].count(".") == 2


# SQLite only: PostgreSQL plans depend on table statistics, so its plan is shown at 1M
# rows by bench/query.py (docs/performance.md) rather than asserted on a small table.
@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_the_filtered_page_is_answered_from_an_index(db_url):
    with build(db_url) as led:
        plan = " ".join(explain(led.engine, make_filters(engine="math", status="VERIFIED",
                                                         since=format_us(T0))))
        assert "ix_entries_engine_status_seq" in plan and "TEMP B-TREE" not in plan
        plan = " ".join(explain(led.engine, make_filters(subject="x")))
        assert "ix_entries_subject_seq" in plan


def test_the_query_indexes_exist_on_both_engines(db_url):
    with Ledger.init(db_url) as led:
        names = {ix["name"] for ix in inspect(led.engine).get_indexes("entries")}
    assert {"ix_entries_engine_status_seq", "ix_entries_subject_seq", "ix_entries_proof_ref_seq",
            "ix_entries_constraint_id_seq", "ix_entries_att_kid_seq"} <= names


# -- the CLI -------------------------------------------------------------------------------
def run(url: str, *args: str) -> Any:
    return CliRunner().invoke(cli, ["--db", url, "query", *args])


def test_cli_formats(led, db_url):
    want = everything(led, engine="math")
    res = run(db_url, "--engine", "math", "--format", "json", "--layer", "developer",
              "--limit", "1000")
    assert res.exit_code == 0, res.stdout
    rows = json.loads(res.stdout)
    assert seqs(rows) == want and tuple(rows[0]) == DEVELOPER_FIELDS
    res = run(db_url, "--engine", "math", "--format", "jsonl", "--all", "--layer", "agent")
    assert [json.loads(line)["seq"] for line in res.stdout.splitlines()] == want
    res = run(db_url, "--engine", "math", "--format", "csv", "--limit", "1000",
              "--layer", "auditor")
    table = list(csv.DictReader(io.StringIO(res.stdout)))
    assert [int(r["seq"]) for r in table] == want
    assert json.loads(table[0]["developer_fields"])["constraint_id"]
    res = run(db_url, "--engine", "math", "--format", "table", "--limit", "2")
    lines = res.stdout.splitlines()
    assert lines[0].split() == list(AGENT_FIELDS) and len(lines) == 3
    assert f"--after {want[1]}" in res.stderr


def test_cli_hostile_values_and_usage_errors(led, db_url):
    res = run(db_url, "--subject", "'; DROP TABLE entries; --", "--format", "jsonl")
    assert res.exit_code == 0 and len(res.stdout.splitlines()) == 1
    res = run(db_url, "--since", "not a time")
    assert res.exit_code == 2 and "since" in res.stderr
    res = run(db_url, "--layer", "root")
    assert res.exit_code == 2
    assert "secret.rule_id" not in run(db_url, "--all", "--format", "csv").stdout


@pytest.mark.parametrize("kw, field", [
    ({"engine": [1]}, "engine"),
    ({"since": dt.datetime(2026, 1, 1)}, "since"),
    ({"until": 1.5}, "until"),
], ids=["not text", "naive datetime", "float time"])
def test_python_filter_values_of_the_wrong_kind_are_usage_errors(kw, field):
    with pytest.raises(UsageError) as caught:
        make_filters(**kw)
    assert caught.value.field == field


def test_aware_datetimes_filter_like_rfc3339_and_the_manifest_names_both_bounds():
    since = dt.datetime(2026, 1, 1, 1, 0, tzinfo=dt.timezone(dt.timedelta(hours=1)))
    f = make_filters(since=since, until="2026-01-02T00:00:00Z", engine="math")
    assert f == make_filters(since="2026-01-01T00:00:00Z", until="2026-01-02T00:00:00Z",
                             engine=["math"])
    assert f.to_doc() == {"engine": ["math"], "since": "2026-01-01T00:00:00.000000Z",
                          "until": "2026-01-02T00:00:00.000000Z"}
