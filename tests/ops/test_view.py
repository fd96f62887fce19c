"""ledger.ops.view: one entry -> JSON view per audience, each used by every caller."""

from __future__ import annotations

import base64
import json

import pytest

from ledger.core.bundle import dump_line
from ledger.core.entry import PAYLOAD_MAP_V2
from ledger.errors import UsageError
from ledger.facade import Ledger
from ledger.ops import view
from ledger.ops.query import make_filters, query
from ledger.ops.samples import realistic
from ledger.store import entries as repo


def _rows(L: Ledger) -> list[tuple[object, dict[str, bytes]]]:
    out = []
    with L.engine.connect() as conn:
        for row in repo.iter_entries(conn, 0, None):
            out.append((row, repo.get_payloads(conn, row.seq)))
    return out


def test_every_view_of_every_entry(db_url):
    with Ledger.init(db_url) as L:
        L.append_many(realistic(6), producer="p")
        rows = _rows(L)
        for layer in view.LAYERS:  # what ledger query returns is the layer view
            page = query(L.engine, make_filters(), layer=layer, limit=100)
            assert page.rows == [view.layer_view(r, b, layer) for r, b in rows]
        for row, blobs in rows:
            full = view.row_view(row, blobs)
            assert view.auditor_view(row, blobs) == full
            assert view.developer_view(row, blobs) == {
                k: full[k] for k in view.DEVELOPER_FIELDS}
            assert list(view.agent_view(row, blobs)) == list(view.AGENT_FIELDS)
            assert view.entry_detail(row, blobs) == L.get(row.seq)
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


def test_a_payload_that_is_not_json_is_shown_as_none(sqlite_url):
    sub = {**realistic(1)[0], "meta": {"run": 1}}
    with Ledger.init(sqlite_url) as L:
        L.append(sub)
        [(row, blobs)] = _rows(L)
    assert view.row_view(row, blobs)["meta"] == {"run": 1}
    blobs = {**blobs, 4: blobs[4]._replace(data=b"{not json")}  # slot 4: meta
    assert view.row_view(row, blobs)["meta"] is None


def test_an_unknown_layer_is_a_usage_error():
    with pytest.raises(UsageError) as caught:
        view.project({}, "root")
    assert caught.value.field == "layer"
