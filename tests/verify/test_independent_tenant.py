"""The independent verifier written from docs/tenants.md (tests/verify/independent_tenant.py,
no ledger import) on the tenant bundles of test_tenant_export.py: the good ones are complete,
every tamper is not; and its hashing agrees with the tenant vectors of docs/format.md §11."""

from __future__ import annotations

import ast
import json
import sys
from pathlib import Path

import pytest

from tests.verify import independent_tenant as it
from tests.verify.tenant_bundles import ABSENCE_FORGERIES, TAMPERS, forge_absence, make_bundles

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def tenant_bundles(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("tenants")
    return make_bundles(f"sqlite:///{tmp / 'ledger.db'}", tmp)


def test_it_imports_nothing_of_the_ledger():
    tree = ast.parse((ROOT / "tests" / "verify" / "independent_tenant.py").read_text("utf-8"))
    roots = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import)
             for a in n.names}
    roots |= {n.module.split(".")[0] for n in ast.walk(tree)
              if isinstance(n, ast.ImportFrom) and n.module}
    assert roots - {"__future__"} <= set(sys.stdlib_module_names) | {"cryptography"}, roots


@pytest.mark.parametrize("name", ["acme", "globex", "default", "acme-every", "globex-every"])
def test_a_good_tenant_export_is_complete(tenant_bundles, name):
    assert it.verify_tenant_bundle(tenant_bundles[name], tenant_bundles["jwks"]) == (True, [])


@pytest.mark.parametrize("name", ["aaa", "beta", "nobody"])
def test_a_tenant_without_entries_is_proven_absent(tenant_bundles, name):
    assert it.verify_tenant_bundle(tenant_bundles[name], tenant_bundles["jwks"]) == (True, [])


def test_an_empty_tenant_without_an_absence_proof_is_not_proven(tenant_bundles, tmp_path):
    old = forge_absence(tenant_bundles, tmp_path, "nobody",
                        lambda sec: {k: v for k, v in sec.items() if k != "absence"})
    assert it.verify_tenant_bundle(old, tenant_bundles["jwks"]) == (False, [])


@pytest.mark.parametrize("forgery", sorted(ABSENCE_FORGERIES))
def test_a_forged_absence_is_not_complete(tenant_bundles, tmp_path, forgery):
    complete, problems = it.verify_tenant_bundle(
        ABSENCE_FORGERIES[forgery](tenant_bundles, tmp_path), tenant_bundles["jwks"])
    assert complete is False and problems


def test_other_keys_prove_nothing(tenant_bundles):
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    other = Ed25519PrivateKey.generate().public_key().public_bytes_raw()
    jwks = json.loads(Path(tenant_bundles["jwks"]).read_text())
    for k in jwks["keys"]:
        k["x"] = it.base64.urlsafe_b64encode(other).rstrip(b"=").decode()
    complete, problems = it.verify_tenant_bundle(tenant_bundles["acme"], jwks)
    assert complete is False and problems


@pytest.mark.parametrize("tamper", sorted(TAMPERS))
def test_a_tampered_tenant_export_is_not_complete(tenant_bundles, tmp_path, tamper):
    complete, problems = it.verify_tenant_bundle(TAMPERS[tamper](tenant_bundles, tmp_path),
                                                 tenant_bundles["jwks"])
    assert complete is False and problems


def test_its_hashing_agrees_with_the_tenant_vectors():
    v = json.loads((ROOT / "tests" / "vectors" / "tenants.json").read_text("utf-8"))
    for e in v["entries"]:
        assert it.entry_hash(e["tenant"], bytes.fromhex(e["prev_hash"]), e["seq"], e["tseq"],
                             e["recorded_at_us"], bytes.fromhex(e["body_hash"])).hex() \
            == e["entry_hash"]
    for t, g in v["genesis"].items():
        assert it.genesis(v["ledger_id"], t).hex() == g["hash"]
    keys = [(None, bytes.fromhex(v["key"]["public_hex"]))]
    for cp in v["checkpoints"]:
        size, root, ext = it.read_checkpoint(cp["signed_note"].encode(), v["origin"], keys)
        assert (size, root.hex()) == (cp["size"], cp["root_hash"])
        line = it.tenants_line(ext)
        if line is None:
            assert cp["tenants_line"] is None
            continue
        assert line == (len(cp["heads"]), bytes.fromhex(cp["heads_root"]))
        for h in cp["heads"]:
            leaf = it.head_leaf_hash(h["tenant"], h["count"], bytes.fromhex(h["head_hash"]))
            assert it.root_from_path(h["index"], line[0], leaf,
                                     [bytes.fromhex(p) for p in h["proof"]]) == line[1]
        for a in cp["absences"]:
            assert it.absence_problems(a["tenant"], a["absence"], line) == []
            for present in cp["heads"]:  # the same proof does not make a present tenant absent
                assert it.absence_problems(present["tenant"], a["absence"], line)
