"""docs/export.md's table of the members of one payload object in ``entries.jsonl`` is what
the exporter writes, on SQLite and PostgreSQL: a migrated v1 ledger and a v2 one, each with a
stored payload, a payload erased by a redaction entry and one whose bytes are gone with no
redaction naming them.  The table is parsed out of the document."""

from __future__ import annotations

import json
import re
from pathlib import Path

from ledger.clock import FixedClock
from ledger.facade import Ledger
from ledger.ops.custody import Ask
from ledger.ops.export import iter_records
from ledger.ops.lifecycle import upgrade_schema
from ledger.ops.query import make_filters
from tests import tamper as T
from tests.keyrings import ledger_keyring
from tests.store.test_migrate_v2 import FIXTURE, load_v1_ledger

DOC = Path(__file__).resolve().parents[2] / "docs" / "export.md"


def documented() -> dict[tuple[str, str], set[str]]:
    """(entry, payload state) -> member names, from the table after the marker comment."""
    text = DOC.read_text(encoding="utf-8")
    table = text[text.index("<!-- payload members:"):].split("\n\n")[1]
    out: dict[tuple[str, str], set[str]] = {}
    for line in table.splitlines()[2:]:
        entry, state, members = (c.strip() for c in line.strip("|").split("|"))
        key = ("v2" if entry.startswith("v2") else "v1", state)
        out[key] = set(re.findall(r"`(\w+)`", members))
    return out


STATES = {"stored": "stored", "gone": "bytes gone, no redaction names them",
          "erased": "erased by a redaction"}


def members(lines: list[dict], seq: int, name: str) -> set[str]:
    [rec] = [r for r in lines if r["seq"] == seq]
    return set(rec["payloads"][name])


def records(L: Ledger) -> list[dict]:
    return [json.loads(line) for line in iter_records(L.ctx, make_filters())]


def erase_and_lose(L: Ledger, url: str, seqs: list[int], keys: Path) -> list[dict]:
    """Redact the query of seqs[0]; delete the query bytes of seqs[1] behind the ledger's
    back (no redaction names them)."""
    L.redact(Ask("GDPR Art. 17", "DSR-7"), seqs=[seqs[0]], payloads=["query"],
             keyring=ledger_keyring(L, keys))
    with T.unlocked(url) as conn:
        conn.exec_driver_sql(f"DELETE FROM payloads WHERE pid = {seqs[1] * 8 + 3}")
    return records(L)


def _with_query(L: Ledger) -> list[int]:
    out = []
    for r in records(L):
        env = json.loads(r["envelope"])
        if env["kind"] == "result" and env["payloads"].get("query"):
            out.append(r["seq"])
    return out


def test_the_table_has_every_row():
    assert set(documented()) == {(v, s) for v in ("v1", "v2") for s in STATES.values()}


def test_v2_payload_members_are_as_documented(db_url, tmp_path):
    table = documented()
    with Ledger.init(db_url) as L:
        subs = [{"result": {"status": "BLOCKED", "agent_message": f"no {i}"}, "engine": "sql",
                 "query": f"q{i}"} for i in range(3)]
        L.append_many(subs, producer="p")
        seqs = _with_query(L)
        lines = erase_and_lose(L, db_url, seqs, tmp_path / "keys")
    assert json.loads(lines[seqs[2]]["envelope"])["v"] == 2
    assert members(lines, seqs[2], "query") == table[("v2", STATES["stored"])]
    assert members(lines, seqs[0], "query") == table[("v2", STATES["erased"])]
    assert members(lines, seqs[1], "query") == table[("v2", STATES["gone"])]
    redaction = next(r for r in lines if r["kind"] == "redaction")
    assert members(lines, redaction["seq"], "request") == table[("v1", STATES["stored"])]


def test_v1_payload_members_are_as_documented(db_url, tmp_path):
    table = documented()
    load_v1_ledger(db_url)
    upgrade_schema(db_url)
    with Ledger.open(db_url, clock=FixedClock(FIXTURE["clock_us"], 1000)) as L:
        seqs = [s for s in _with_query(L)
                if json.loads(records(L)[s]["envelope"])["v"] == 1]
        assert len(seqs) >= 3
        lines = erase_and_lose(L, db_url, seqs, tmp_path / "keys")
    assert members(lines, seqs[2], "query") == table[("v1", STATES["stored"])]
    assert members(lines, seqs[0], "query") == table[("v1", STATES["erased"])]
    assert members(lines, seqs[1], "query") == table[("v1", STATES["gone"])]
    assert lines[seqs[0]]["payloads"]["query"]["redacted_by"] > seqs[0]
