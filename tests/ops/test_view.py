"""ledger.ops.view: one entry -> JSON view per audience, each used by every caller."""

from __future__ import annotations

import base64
import json

import pytest

from ledger.core.bundle import dump_line
from ledger.core.entry import PAYLOAD_MAP_V2
from ledger.demo.samples import realistic
from ledger.errors import UsageError
from ledger.facade import Ledger
from ledger.ops import view
from ledger.ops.query import make_filters, query
from ledger.ops.verified import check_page
from ledger.store import entries as repo


def _rows(L: Ledger) -> list[tuple[object, dict[str, bytes]]]:
    out = []
    with L.engine.connect() as conn:
        for row in repo.iter_entries(conn, 0, None):
            out.append((row, repo.get_payloads(conn, row.seq)))
    return out


def _checked(L: Ledger, rows, slots=None):
    with L.engine.connect() as conn:
        return [c for _, c, _ in check_page(conn, L.ctx.ledger_id, L.ctx.reads, rows, slots)]


def test_every_view_of_every_entry(db_url):
    with Ledger.init(db_url) as L:
        L.append_many(realistic(6), producer="p")
        rows = _rows(L)
        checked = _checked(L, rows)
        for layer in view.LAYERS:  # what ledger query returns is the layer view
            page = query(L.ctx, make_filters(), layer=layer, limit=100)
            read = _checked(L, rows, tuple(range(6)))
            assert page.rows == [view.layer_view(r, c, layer) for (r, _), c in
                                 zip(rows, read)]
            assert page.flagged == 0 and page.matched == len(rows)
        for (row, blobs), c in zip(rows, checked):
            assert c.integrity.verified, c.integrity
            full = view.row_view(row, c)
            assert view.layer_view(row, c, "auditor") == {
                **{k: full.get(k) for k in view.AUDITOR_FIELDS},
                "integrity": c.integrity.to_dict("auditor"), "findings": []}
            dev = view.layer_view(row, c, "developer")
            plain = [k for k in view.DEVELOPER_FIELDS if k not in ("integrity", "findings")]
            assert list(dev) == list(view.DEVELOPER_FIELDS)
            assert {k: dev[k] for k in plain} == {k: full[k] for k in plain}
            assert dev["integrity"] == {"verified": True, "codes": [], "fields": [],
                                        "redacted": []}
            agent = view.layer_view(row, c, "agent")
            assert list(agent) == list(view.AGENT_FIELDS)
            assert agent["integrity"] == {"verified": True, "codes": []}
            assert view.entry_detail(row, c) == L.get(row.seq)
            # the proven values are the stored columns on an untampered ledger
            for col, value in c.values.items():
                if not (col == "subject" and row.subject is None):
                    assert getattr(row, col) == value, col
            record = view.export_record(row, blobs)
            assert view.export_line(row, blobs) == dump_line(record)
            for name, p in record["payloads"].items():
                slot = PAYLOAD_MAP_V2[row.kind][name]  # payloads are stored by slot
                assert base64.b64decode(p["data_b64"]) == blobs[slot].data, name
            proof = view.proof_entry(row, blobs)
            assert {k: record[k] for k in proof if k != "payloads"} == {
                k: v for k, v in proof.items() if k != "payloads"}
            committed = json.loads(proof["envelope"])["payloads"]
            assert {n: p["digest"] for n, p in proof["payloads"].items()} == {
                n: d for n, d in committed.items() if d is not None}


def test_the_layers_are_nested_allow_lists():
    assert view.AUDITOR_FIELDS[:len(view.DEVELOPER_FIELDS)] == view.DEVELOPER_FIELDS
    assert view.DEVELOPER_FIELDS[:len(view.AGENT_FIELDS)] == view.AGENT_FIELDS
    assert view.project({"seq": 1, "secret": 2}, "agent")["seq"] == 1
    assert "secret" not in view.project({"seq": 1, "secret": 2}, "auditor")


def test_a_payload_that_does_not_check_is_shown_as_none_and_flagged(sqlite_url):
    sub = {**realistic(1)[0], "meta": {"run": 1}}
    with Ledger.init(sqlite_url) as L:
        L.append(sub)
        [(row, blobs)] = rows = _rows(L)
        [c] = _checked(L, rows)
        assert view.row_view(row, c)["meta"] == {"run": 1}
        blobs = {**blobs, 4: blobs[4]._replace(data=b"{not json")}  # slot 4: meta
        [c] = _checked(L, [(row, blobs)])
    assert view.row_view(row, c)["meta"] is None
    assert c.integrity.codes == ["payload_digest_mismatch"]
    assert c.integrity.fields == ["meta"]
    assert view.entry_detail(row, c)["payloads"]["meta"] == {
        "digest": c.commitments["meta"], "text": "{not json", "missing": False,
        "checked": False, "redacted": False}


def test_an_unknown_layer_is_a_usage_error():
    with pytest.raises(UsageError) as caught:
        view.project({}, "root")
    assert caught.value.field == "layer"
