"""Verified reads: every column of the entries table and every payload kind, tampered with
raw SQL on SQLite and PostgreSQL, is flagged on every read path -- the HTTP API in each
layer (one entry, a page, a filtered page, the export stream), ``ledger show``,
``ledger query`` and the HTML report -- which show the envelope's value where one exists and
never count the row as clean; an untampered ledger shows no flag anywhere
(docs/reads.md).  One real ``ledger serve`` per engine; each tamper is undone before the
next."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from sqlalchemy import Connection, text

from ledger.cli.main import cli
from ledger.client import EntryUnverified, LedgerReader, ReadUnverified
from ledger.crypto.keys import Keyring
from ledger.demo.samples import realistic
from ledger.facade import Ledger
from tests import tamper as T
from tests.api.server import Server, prepare_ledger, start_server, stop_process
from tests.conftest import ENGINES, engine_url

pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning")

COLUMNS = ("engine", "status", "constraint_id", "proof_ref", "subject", "producer",
           "idempotency_key", "admission", "att_verdict", "att_kid", "att_iss")
SHOW_NAME = {"att_verdict": "attestation_verdict", "att_kid": "attestation_kid",
             "att_iss": "attestation_iss"}


# -- the ledger and its server -------------------------------------------------------------
def _full_result() -> dict[str, Any]:
    """A VERIFIED result with every payload: result, preimage, attestation, query, meta,
    subject."""
    sub = T.verified_sub(900, query="x > 900 and y < 10", subject="subject-900",
                         meta={"run": "r-900"})
    claims = T.claims_for(sub["result"]["proof_ref"], iat=int(time.time()) - 60,
                          query="x > 900 and y < 10")
    return T.attested(sub, T.sign(claims))


@pytest.fixture(scope="module", params=ENGINES)
def world(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory,
          ) -> Iterator[dict[str, Any]]:
    kind = request.param
    tmp = tmp_path_factory.mktemp(f"verified-reads-{kind}")
    url = engine_url(kind, request, tmp)
    origin = f"test.example/verified-reads-{kind}"
    keys = tmp / "keys"
    prepare_ledger(url, keys, origin)
    with Ledger.open(url) as L:
        L.trust_issuer(T.ISSUER, T.JWKS, reason="test issuer")
        L.append_many(realistic(6), producer="p")
        full = L.append(_full_result(), producer="p").seq
        blocked = next(r.seq for r in L.append_many(
            [s for s in realistic(12, seed=3) if s["result"]["status"] == "BLOCKED"][:1],
            producer="p"))
        L.append_many(realistic(3, seed=9), producer="p")
        event = L.query(kind="key_event", layer="auditor").rows[0]["seq"]
        L.checkpoint(Keyring.load(keys))  # what the reader client's proofs lead to
    log = tmp / "serve.log"
    proc, base = start_server(url, keys, log)
    srv = Server(kind, url, keys, origin, proc, base, log)
    srv.tokens = {r: srv.token(r, f"test-{r}") for r in ("auditor", "developer", "agent")}
    jwks = json.loads((keys / "jwks.json").read_text("utf-8"))
    yield {"server": srv, "url": url, "full": full, "blocked": blocked, "event": event,
           "jwks": jwks, "tmp": tmp}
    stop_process(proc)


# -- raw SQL: a tamper, undone afterwards ------------------------------------------------------
def _snapshot(conn: Connection, seq: int) -> tuple[Any, list[Any]]:
    row = conn.execute(text("SELECT * FROM entries WHERE seq = :s"), {"s": seq}).one()
    blobs = conn.execute(text("SELECT pid, salt, codec, data FROM payloads WHERE pid >= :a "
                              "AND pid < :b"), {"a": seq * 8, "b": seq * 8 + 8}).all()
    return row, blobs


def _restore(conn: Connection, seq: int, snap: tuple[Any, list[Any]]) -> None:
    row, blobs = snap
    values = dict(row._mapping)
    conn.execute(text("DELETE FROM entries WHERE seq = :s"), {"s": seq})
    conn.execute(text("INSERT INTO entries (" + ", ".join(values) + ") VALUES ("
                      + ", ".join(f":{k}" for k in values) + ")"), values)
    conn.execute(text("DELETE FROM payloads WHERE pid >= :a AND pid < :b"),
                 {"a": seq * 8, "b": seq * 8 + 8})
    for pid, salt, how, data in blobs:
        conn.execute(text("INSERT INTO payloads (pid, salt, codec, data) VALUES "
                          "(:p, :s, :c, :d)"), {"p": pid, "s": salt, "c": how, "d": data})


def _set(column: str, value: Any) -> Callable[[Connection, int], None]:
    return lambda conn, seq: T.update_entry(conn, seq, **{column: value})


def _payload(name: str, data: bytes | None) -> Callable[[Connection, int], None]:
    slot = T.SLOTS.get(name, 0)

    def go(conn: Connection, seq: int) -> None:
        if data is None:
            conn.execute(text("DELETE FROM payloads WHERE pid = :p"), {"p": seq * 8 + slot})
        else:
            conn.execute(text("UPDATE payloads SET codec = 0, data = :d WHERE pid = :p"),
                         {"d": data, "p": seq * 8 + slot})
    return go


def _envelope(conn: Connection, seq: int) -> None:
    env = bytes(T.row(conn, seq).envelope)
    T.update_entry(conn, seq, envelope=env.replace(b'"status":"VERIFIED"',
                                                   b'"status":"BLOCKED"'))


def _rehashed(conn: Connection, seq: int) -> None:
    """A self-consistent rewrite: the envelope says BLOCKED, its column too, and the body
    and entry hashes are recomputed -- only the hash the next entry links to disagrees."""
    from ledger.core.entry import body_hash, entry_hash

    r = T.row(conn, seq)
    env = bytes(r.envelope).replace(b'"status":"VERIFIED"', b'"status":"BLOCKED"')
    body = body_hash(env)
    T.update_entry(conn, seq, envelope=env, status="BLOCKED", body_hash=body,
                   entry_hash=entry_hash(bytes(r.prev_hash), seq, r.recorded_at, body))


# (id, which entry, tamper, the code it must raise, the field it names or None, the served
# key whose value must be the envelope's (or None when the value must be absent))
STRING_VALUE = {"engine": "sql-v2", "status": "BLOCKED", "constraint_id": "forged.rule",
                "proof_ref": "sha256:" + "0" * 64, "subject": "someone-else",
                "producer": "mallory", "idempotency_key": "forged-key", "admission": "late",
                "att_verdict": "none", "att_kid": "forged-kid", "att_iss": "forged-iss"}
CASES: list[tuple[str, str, Callable[[Connection, int], None], str, str | None]] = [
    *[(f"column-{c}", "full", _set(c, v), "column_mismatch", c)
      for c, v in STRING_VALUE.items()],
    ("column-status-blocked-to-verified", "blocked", _set("status", "VERIFIED"),
     "column_mismatch", "status"),
    ("column-engine-of-a-key-event", "event", _set("engine", "sql-v2"), "column_mismatch",
     "engine"),
    ("column-kind", "full", _set("kind", "hold"), "foreign_envelope", "kind"),
    ("column-recorded_at", "full", lambda c, s: T.update_entry(
        c, s, recorded_at=T.row(c, s).recorded_at + 1), "entry_hash_mismatch", "entry_hash"),
    ("column-envelope", "full", _envelope, "envelope_hash_mismatch", "envelope"),
    ("column-body_hash", "full", _set("body_hash", b"\x00" * 32), "envelope_hash_mismatch",
     "envelope"),
    ("column-prev_hash", "full", _set("prev_hash", b"\x01" * 32), "entry_hash_mismatch",
     "entry_hash"),
    ("column-entry_hash", "full", _set("entry_hash", b"\x02" * 32), "entry_hash_mismatch",
     "entry_hash"),
    ("rewritten-and-rehashed", "full", _rehashed, "hash_not_committed", "entry_hash"),
    *[(f"payload-{n}", "full", _payload(n, b'{"forged": true}'), "payload_digest_mismatch", n)
      for n in ("result", "preimage", "attestation", "query", "meta", "subject")],
    ("payload-preimage-deleted", "full", _payload("preimage", None), "payload_missing",
     "preimage"),
    ("payload-event-document", "event", _payload("result", b'{"action": "revoke"}'),
     "payload_digest_mismatch", "event"),
]
# the served key of a payload (auditor layer) and of the main document's message
PAYLOAD_KEY = {"preimage": "preimage", "attestation": "attestation", "query": "query",
               "meta": "meta", "subject": "subject", "result": "agent_message"}


def _get(srv: Server, role: str, path: str, **params: Any) -> dict[str, Any]:
    with srv.client(role) as c:
        r = c.get(path, params=params)
    assert r.status_code == 200, (role, path, r.text)
    return r.json()


def _reader(world: dict[str, Any], tmp: Path) -> LedgerReader:
    srv = world["server"]
    return LedgerReader(srv.base_url, srv.tokens["auditor"], tmp / "reader-state.json",
                        keys=world["jwks"])


def _cli(url: str, *args: str) -> Any:
    return CliRunner().invoke(cli, ["--db", url, *args], catch_exceptions=False)


def test_an_untampered_ledger_shows_no_flag_anywhere(world: dict[str, Any],
                                                      tmp_path: Path) -> None:
    srv, url = world["server"], world["url"]
    for role in ("auditor", "developer", "agent"):
        page = _get(srv, role, "/v1/entries", limit=1000)
        assert page["entries"] and page["flagged"] == 0
        assert page["matched"] == len(page["entries"])
        assert all(e["integrity"]["verified"] and e["integrity"]["codes"] == []
                   for e in page["entries"])
    with srv.client("auditor") as c:
        lines = c.get("/v1/export", params={"format": "rows"}).text.splitlines()
    assert lines and all(json.loads(x)["integrity"]["verified"] for x in lines)
    shown = _cli(url, "show", str(world["full"]), "--format", "json")
    assert shown.exit_code == 0 and json.loads(shown.stdout)["integrity"]["verified"]
    q = _cli(url, "query", "--layer", "auditor", "--all", "--format", "json")
    assert q.exit_code == 0 and "did not verify" not in q.stderr
    with _reader(world, tmp_path) as reader:
        for which in ("full", "blocked", "event"):
            reader.get(world[which])  # verified by the client: no exception
    out = tmp_path / "r.html"
    assert _cli(url, "report", "--html", str(out)).exit_code == 0
    assert "Every entry in scope checked against what was hashed" in out.read_text("utf-8")


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_a_tampered_entry_is_flagged_on_every_read_path(
        world: dict[str, Any], case: tuple[Any, ...], tmp_path: Path) -> None:
    name, which, change, code, field = case
    srv, url, seq = world["server"], world["url"], world[which]
    with T.connect(url) as conn:
        hashed = json.loads(_cli(url, "show", str(seq), "--format", "json").stdout)
        snap = _snapshot(conn, seq)
    with T.unlocked(url) as conn:
        change(conn, seq)
    try:
        _check_flagged(srv, url, seq, which, code, field, hashed, tmp_path)
        with _reader(world, tmp_path) as reader, pytest.raises(ReadUnverified) as err:
            reader.get(seq)
        if isinstance(err.value, EntryUnverified):  # the entry itself, as the server saw it
            codes = err.value.detail["codes"]
            # the same code for a rewritten column or payload; a rewritten kind makes the
            # client read the entry as another kind, and a re-hashed entry fails the client's
            # own checks (or its inclusion proof) before any link: refused either way
            same = code in ("column_mismatch", "payload_digest_mismatch", "payload_missing")
            assert (code in codes) if same and field != "kind" else codes, err.value.detail
    finally:
        with T.unlocked(url) as conn:
            _restore(conn, seq, snap)
    again = _cli(url, "show", str(seq), "--format", "json")
    assert again.exit_code == 0, again.stderr  # undone: clean again


def _check_flagged(srv: Server, url: str, seq: int, which: str, code: str,
                   field: str | None, hashed: dict[str, Any], tmp: Path) -> None:
    # agents see results only, chosen by the kind column: a key event is not theirs, and a
    # result whose kind column was rewritten is hidden from them by the index (which the
    # audit reports; docs/reads.md, "What a read cannot see")
    roles = ("auditor", "developer") if which == "event" or field == "kind" \
        else ("auditor", "developer", "agent")
    for role in roles:
        entry = _get(srv, role, f"/v1/entries/{seq}")["entry"]
        integ = entry["integrity"]
        assert integ["verified"] is False and code in integ["codes"], (role, integ)
        if role == "agent":
            assert set(integ) == {"verified", "codes"}  # a boolean and codes, nothing else
        else:
            assert field in integ["fields"], (role, integ)
        if role == "auditor":
            assert any(p["code"] == code and p["field"] == field for p in integ["problems"])
        _served_value_is_the_envelopes(entry, field, code, hashed)
        page = _get(srv, role, "/v1/entries", limit=1000)
        flagged = {e["seq"] for e in page["entries"] if not e["integrity"]["verified"]}
        assert seq in flagged and flagged <= {seq - 1, seq, seq + 1}, flagged
        assert page["flagged"] == len(flagged)
        assert page["matched"] == len(page["entries"])  # no filter: all match
    with srv.client("auditor") as c:
        rows = [json.loads(x) for x in
                c.get("/v1/export", params={"format": "rows"}).text.splitlines()]
    assert any(r["seq"] == seq and not r["integrity"]["verified"] for r in rows)
    if code == "column_mismatch" and field in ("status", "engine"):
        _filter_does_not_count(srv, url, seq, field)
    shown = _cli(url, "show", str(seq), "--format", "json")
    assert shown.exit_code == 1 and f"{code} ({field})" in shown.stderr
    detail = json.loads(shown.stdout)
    assert code in detail["integrity"]["codes"]
    if code == "column_mismatch":
        key = SHOW_NAME.get(field, field)
        assert detail[key] == hashed[key], (key, detail[key])
    q = _cli(url, "query", "--layer", "auditor", "--all", "--format", "json")
    assert "did not verify" in q.stderr
    row = next(r for r in json.loads(q.stdout) if r["seq"] == seq)
    assert code in row["integrity"]["codes"]
    out = tmp / "report.html"
    _cli(url, "report", "--html", str(out))
    page_html = out.read_text("utf-8")
    assert "did not verify" in page_html and str(seq) in page_html


def _served_value_is_the_envelopes(entry: dict[str, Any], field: str | None, code: str,
                                   hashed: dict[str, Any]) -> None:
    """A rewritten column is served as the envelope's value; a payload that does not check
    is not served at all."""
    if code == "column_mismatch" and field in entry:
        assert entry[field] == hashed[SHOW_NAME.get(field, field)], (field, entry[field])
    if code in ("payload_digest_mismatch", "payload_missing"):
        key = PAYLOAD_KEY.get(field or "")
        if key in entry:
            assert entry[key] is None, (key, entry[key])


def _filter_does_not_count(srv: Server, url: str, seq: int, column: str) -> None:
    """A filter on the rewritten value finds the row through the index; it comes back
    flagged, with ``filter_match: false``, and is not counted as a match."""
    with T.connect(url) as conn:
        stored = getattr(T.row(conn, seq), column)
    page = _get(srv, "developer", "/v1/entries", **{column: stored}, limit=1000)
    hit = next(e for e in page["entries"] if e["seq"] == seq)
    assert hit["integrity"]["filter_match"] is False and hit[column] != stored
    assert page["matched"] == sum(1 for e in page["entries"]
                                  if e["integrity"].get("filter_match", True))
    assert page["matched"] == len(page["entries"]) - 1
