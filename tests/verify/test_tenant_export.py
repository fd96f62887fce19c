"""A tenant export (``ledger export --tenant T``, ``ledger-export/2``) proves the tenant's
chain complete; dropping, adding, reordering or moving an entry of it is a finding
(docs/tenants.md).  Both engines; the bundles are checked by ``ledger verify-export``."""

from __future__ import annotations

import json
from typing import Any

import pytest

from ledger.verify.export import verify_export
from tests.verify.tenant_bundles import TAMPERS, edit_bundle, lines, make_bundles

_edit = edit_bundle


@pytest.fixture
def bundles(db_url, tmp_path):
    return make_bundles(db_url, tmp_path)


def codes(report: dict[str, Any]) -> set[str]:
    return {f["code"] for f in report["findings"]}


def test_each_tenant_export_is_proven_complete(bundles):
    for tenant, n in (("acme", 5), ("globex", 3), ("default", 2)):
        report = verify_export(bundles[tenant], bundles["jwks"])
        assert report["findings"] == [], report["findings"][:3]
        assert report["complete"] is True and report["tenant"] == tenant
        manifest = json.loads((bundles[tenant] / "manifest.json").read_text())
        assert manifest["format"] == "ledger-export/2"
        assert manifest["tenant"]["count"] == n and manifest["contiguous"] is False
        got = lines(bundles[tenant] / "entries.jsonl")
        assert [e["tenant"] for e in got] == [tenant] * n
        assert [e["tseq"] for e in got] == list(range(n))


def test_a_tenant_without_entries_exports_empty_and_says_it_cannot_prove_absence(bundles):
    report = verify_export(bundles["nobody"], bundles["jwks"])
    assert report["findings"] == [] and report["complete"] is False
    assert [a["reason"] for a in report["abstentions"]] == ["tenant_absence_unproven"]


def test_the_whole_ledger_export_is_v2_and_complete(bundles):
    report = verify_export(bundles["all"], bundles["jwks"])
    assert report["findings"] == [] and report["complete"] is True
    assert verify_export(bundles["filtered"], bundles["jwks"])["complete"] is False
    assert verify_export(bundles["acme"], None)["complete"] is False  # untrusted keys


def test_the_editing_helper_keeps_a_bundle_valid(bundles, tmp_path):
    same = _edit(bundles, tmp_path, lambda rows: rows)
    report = verify_export(same, bundles["jwks"])
    assert report["findings"] == [] and report["complete"] is True


@pytest.mark.parametrize("edit, expect", [
    (lambda rows: rows[:2] + rows[3:], "tenant_incomplete"),  # dropped
    (lambda rows: rows[1:], "tenant_incomplete"),  # the first dropped
    (lambda rows: rows[:-1], "tenant_incomplete"),  # the head rolled back
    (lambda rows: rows[:3] + [rows[2]] + rows[3:], "entry_out_of_order"),  # duplicated
])
def test_a_changed_tenant_export_is_a_finding(bundles, tmp_path, edit, expect):
    bad = _edit(bundles, tmp_path, edit)
    report = verify_export(bad, bundles["jwks"])
    assert expect in codes(report), report["findings"]
    assert report["complete"] is False


def test_an_entry_of_another_tenant_added_is_a_finding(bundles, tmp_path):
    """globex's entry added to acme's export, with its own inclusion proof: authentic, but
    not acme's."""
    report = verify_export(TAMPERS["foreign-entry"](bundles, tmp_path), bundles["jwks"])
    assert "tenant_foreign_entry" in codes(report) and report["complete"] is False


def test_an_entry_relabelled_to_the_tenant_is_a_finding(bundles, tmp_path):
    """globex's entry claimed for acme: its hash binds globex, so it fails on its own."""
    report = verify_export(TAMPERS["relabelled-entry"](bundles, tmp_path), bundles["jwks"])
    assert "entry_hash_mismatch" in codes(report) and report["complete"] is False


def test_a_forged_head_in_the_manifest_is_a_finding(bundles, tmp_path):
    report = verify_export(TAMPERS["forged-head-count"](bundles, tmp_path), bundles["jwks"])
    assert report["complete"] is False and report["findings"]
