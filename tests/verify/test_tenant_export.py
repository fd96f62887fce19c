"""A tenant export (``ledger export --tenant T``, ``ledger-export/2``) proves the tenant's
chain complete; dropping, adding, reordering or moving an entry of it is a finding
(docs/tenants.md).  Both engines; the bundles are checked by ``ledger verify-export``."""

from __future__ import annotations

import json
from typing import Any

import pytest

from ledger.verify.export import verify_export
from tests.verify.tenant_bundles import (
    ABSENCE_FORGERIES,
    TAMPERS,
    edit_bundle,
    forge_absence,
    lines,
    make_bundles,
)

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


@pytest.mark.parametrize("tenant, left, right", [
    ("aaa", None, ("acme", 0)), ("beta", ("acme", 0), ("default", 1)),
    ("nobody", ("globex", 2), None)])
def test_a_tenant_without_entries_is_proven_absent_and_complete(bundles, tenant, left, right):
    """The heads tree of acme, default and globex: an empty tenant's export carries the leaf
    or two adjacent leaves that bracket it, and verifies complete with no entry."""
    report = verify_export(bundles[tenant], bundles["jwks"])
    assert report["findings"] == [] and report["abstentions"] == []
    assert report["complete"] is True and report["tenant"] == tenant
    sec = json.loads((bundles[tenant] / "manifest.json").read_text())["tenant"]
    assert (sec["count"], sec["head_hash"], sec["heads"]) == (0, None, None)
    absence = sec["absence"]
    assert (absence["v"], absence["leaves"]) == (1, 3)
    for side, want in (("left", left), ("right", right)):
        got = absence[side]
        assert (got if got is None else (got["id"], got["index"])) == want
    assert lines(bundles[tenant] / "entries.jsonl") == []


def test_an_empty_tenant_export_without_an_absence_proof_says_it_cannot_prove_absence(
        bundles, tmp_path):
    """A bundle of before absence proofs (the tenant object without ``absence``) still
    verifies as it did: no finding, the abstention, not complete."""
    old = forge_absence(bundles, tmp_path, "nobody",
                        lambda sec: {k: v for k, v in sec.items() if k != "absence"})
    report = verify_export(old, bundles["jwks"])
    assert report["findings"] == [] and report["complete"] is False
    assert [a["reason"] for a in report["abstentions"]] == ["tenant_absence_unproven"]


@pytest.mark.parametrize("forgery", sorted(ABSENCE_FORGERIES))
def test_a_forged_absence_is_a_finding(bundles, tmp_path, forgery):
    report = verify_export(ABSENCE_FORGERIES[forgery](bundles, tmp_path), bundles["jwks"])
    want = "manifest_malformed" if forgery == "absence-with-entries" else \
        "tenant_absence_invalid"
    assert want in codes(report), report["findings"]
    assert report["complete"] is False


def test_an_absence_proof_of_an_unknown_version_is_an_abstention(bundles, tmp_path):
    later = forge_absence(bundles, tmp_path, "nobody",
                          lambda sec: dict(sec, absence=dict(sec["absence"], v=2)))
    report = verify_export(later, bundles["jwks"])
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


def test_without_a_tenants_line_an_empty_tenant_is_complete_without_an_absence_proof(
        db_url, tmp_path):
    """A ledger of only the default tenant: its checkpoints have no tenants line, which says
    every entry is the default tenant's; another tenant's export is empty and complete, and
    carries no absence proof (docs/tenants.md, "Without a tenants line")."""
    from ledger.crypto.keys import Keyring
    from ledger.facade import Ledger
    from ledger.ops.export import ExportOptions
    from tests.verify.tenant_bundles import sub

    ring = Keyring.load(tmp_path / "keys")
    with Ledger.init(db_url) as ledger:
        ring.generate(ledger.meta.origin, ledger.clock.now_us())
        for i in range(3):
            assert ledger.append(sub(f"only-{i}")).ok
        for t in ("acme", "default"):
            ledger.export(tmp_path / t, ExportOptions(keys=ring.path, tenant=t))
    jwks = ring.path / "jwks.json"
    sec = json.loads((tmp_path / "acme" / "manifest.json").read_text())["tenant"]
    assert sec == {"id": "acme", "count": 0, "head_hash": None, "heads": None}
    report = verify_export(tmp_path / "acme", jwks)
    assert report["findings"] == [] and report["complete"] is True
    assert verify_export(tmp_path / "default", jwks)["complete"] is True
