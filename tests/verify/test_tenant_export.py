"""A tenant export (``ledger export --tenant T``, ``ledger-export/2``) proves the tenant's
chain complete; dropping, adding, reordering or moving an entry of it is a finding
(docs/tenants.md).  Both engines; the bundles are checked by ``ledger verify-export``."""

from __future__ import annotations

import hashlib
import json
import random
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from ledger.crypto.jws import sign_manifest
from ledger.crypto.keys import Keyring, public_jwk, raw_public
from ledger.facade import Ledger
from ledger.ops.export import ExportOptions
from ledger.ops.filters import make_filters
from ledger.ops.samples import math_verified
from ledger.verify.export import verify_export

PLAN = ["default", "acme", "acme", "globex", "default", "acme", "globex", "globex", "acme",
        "acme"]


def sub(tag: str) -> dict[str, Any]:
    s = math_verified(random.Random(tag).randrange(10**6), random.Random(tag))
    s["subject"] = tag
    return s


@pytest.fixture
def bundles(db_url, tmp_path):
    ring = Keyring.load(tmp_path / "keys")
    with Ledger.init(db_url) as ledger:
        ring.generate(ledger.meta.origin, ledger.clock.now_us())
        for i, t in enumerate(PLAN):
            assert ledger.append(sub(f"{t}-{i}"), tenant=t).ok
        out = {t: tmp_path / t for t in ("acme", "globex", "default", "nobody")}
        for t, d in out.items():
            ledger.export(d, ExportOptions(keys=ring.path, tenant=t))
        for t in ("acme", "globex"):
            out[f"{t}-every"] = tmp_path / f"{t}-every"
            ledger.export(out[f"{t}-every"],
                          ExportOptions(keys=ring.path, tenant=t, proofs="every"))
        ledger.export(tmp_path / "all", ExportOptions(keys=ring.path))
        ledger.export(tmp_path / "filtered",
                      ExportOptions(keys=ring.path, filters=make_filters(status="VERIFIED")))
    out["all"] = tmp_path / "all"
    out["filtered"] = tmp_path / "filtered"
    out["jwks"] = ring.path / "jwks.json"
    out["ring"] = ring
    return out


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in path.read_text("utf-8").splitlines()]


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


def _edit(bundles: dict[str, Any], tmp: Path, edit: Any, name: str = "acme-every") -> Path:
    """A copy of a tenant bundle whose entries.jsonl went through ``edit``, with
    proofs.jsonl, the manifest's counts and digests made to match and the manifest signed
    again by the ledger key: what an operator who holds the key could hand over.  Only the
    signed checkpoint (and the entries' own hashes) stand in the way."""
    src = bundles[name]
    dst = tmp / f"edited-{len(list(tmp.glob('edited-*')))}"
    shutil.copytree(src, dst)
    rows = edit(lines(dst / "entries.jsonl"))
    body = "".join(json.dumps(r, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
                   + "\n" for r in rows).encode()
    (dst / "entries.jsonl").write_bytes(body)
    seqs = {r["seq"] for r in rows}
    proofs = [p for p in lines(dst / "proofs.jsonl")
              if p["file"] != "entries.jsonl" or p["seq"] in seqs]
    (dst / "proofs.jsonl").write_bytes("".join(
        json.dumps(p, sort_keys=True, separators=(",", ":")) + "\n" for p in proofs).encode())
    m = json.loads((dst / "manifest.json").read_text())
    for f in ("entries.jsonl", "proofs.jsonl"):
        data = (dst / f).read_bytes()
        m["files"][f] = {"sha256": "sha256:" + hashlib.sha256(data).hexdigest(),
                         "bytes": len(data)}
    m["counts"]["entries"] = len(rows)
    m["counts"]["by_kind"] = dict(Counter(r["kind"] for r in rows))
    m["counts"]["by_status"] = dict(Counter(
        str(json.loads(r["envelope"]).get("status")) for r in rows))
    manifest = (json.dumps(m, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
                + "\n").encode()
    (dst / "manifest.json").write_bytes(manifest)
    ring = bundles["ring"]
    name_, key = ring.signers(m["origin"])[-1]
    jwk = public_jwk(name_, raw_public(key), "")
    claims = {"iss": m["origin"], "sub": m["ledger_id"], "iat": 1, "format": m["format"],
              "manifest_sha256": "sha256:" + hashlib.sha256(manifest).hexdigest()}
    (dst / "manifest.jwt").write_text(sign_manifest(claims, key, jwk["kid"]))
    return dst


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
    other = lines(bundles["globex-every"] / "entries.jsonl")[0]
    proof = [p for p in lines(bundles["globex-every"] / "proofs.jsonl")
             if p["file"] == "entries.jsonl" and p["seq"] == other["seq"]]
    src = bundles["acme-every"]
    with_proof = tmp_path / "with-proof"
    shutil.copytree(src, with_proof)
    ps = sorted(lines(src / "proofs.jsonl") + proof,
                key=lambda p: (p["file"] != "key_events.jsonl", p["seq"]))
    (with_proof / "proofs.jsonl").write_bytes("".join(
        json.dumps(p, sort_keys=True, separators=(",", ":")) + "\n" for p in ps).encode())
    bundles = {**bundles, "with-proof": with_proof}
    bad = _edit(bundles, tmp_path, lambda rows: sorted(rows + [other], key=lambda r: r["seq"]),
                "with-proof")
    report = verify_export(bad, bundles["jwks"])
    assert "tenant_foreign_entry" in codes(report) and report["complete"] is False


def test_an_entry_relabelled_to_the_tenant_is_a_finding(bundles, tmp_path):
    """globex's entry claimed for acme: its hash binds globex, so it fails on its own."""
    other = dict(lines(bundles["globex"] / "entries.jsonl")[0], tenant="acme")
    bad = _edit(bundles, tmp_path, lambda rows: sorted(rows + [other], key=lambda r: r["seq"]))
    report = verify_export(bad, bundles["jwks"])
    assert "entry_hash_mismatch" in codes(report) and report["complete"] is False


def test_a_forged_head_in_the_manifest_is_a_finding(bundles, tmp_path):
    dst = tmp_path / "forged"
    shutil.copytree(bundles["acme"], dst)
    m = json.loads((dst / "manifest.json").read_text())
    m["tenant"]["count"] -= 1
    (dst / "manifest.json").write_text(
        json.dumps(m, sort_keys=True, separators=(",", ":")) + "\n")
    report = verify_export(dst, bundles["jwks"])
    assert report["complete"] is False and report["findings"]
