"""scripts/verify_bundle.py — the independent verifier written from the format documents —
agrees with ``ledger verify-export`` on good and corrupted bundles (SQLite and PostgreSQL)."""

from __future__ import annotations

import ast
import contextlib
import importlib.util
import io
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ledger.verify.export import EXIT_CODES, verify_export
from tests.ops.test_export import ALL_FILES, corrupt, drop_line, flip, reorder, source, truncate
from tests.verify.tenant_bundles import ABSENCE_FORGERIES, TAMPERS, forge_absence, make_bundles

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "verify_bundle.py"
__all__ = ["source"]  # the module-scoped bundle fixture of tests/ops/test_export.py


def _load():
    spec = importlib.util.spec_from_file_location("verify_bundle", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


VB = _load()


def script(bundle: Path, jwks: Path | None) -> tuple[int, str]:
    err = io.StringIO()
    args = [str(bundle)] + (["--jwks", str(jwks)] if jwks else [])
    with contextlib.redirect_stderr(err):
        code = VB.main(args)
    return code, err.getvalue()


def ledger_code(bundle: Path, jwks: Path | None) -> int:
    return EXIT_CODES[verify_export(bundle, jwks)["outcome"]]


def test_the_script_imports_only_the_standard_library_and_cryptography():
    tree = ast.parse(SCRIPT.read_text("utf-8"))
    roots = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import)
             for a in n.names}
    roots |= {n.module.split(".")[0] for n in ast.walk(tree)
              if isinstance(n, ast.ImportFrom) and n.module}
    assert roots - {"__future__"} <= set(sys.stdlib_module_names) | {"cryptography"}, roots


@pytest.mark.parametrize("kind", ["full", "filtered", "every"])
def test_good_bundles_agree_in_a_separate_process(source, kind):
    for jwks, want in ((source["jwks"], 0), (None, 3)):
        args = [sys.executable, str(SCRIPT), str(source[kind])]
        args += ["--jwks", str(jwks)] if jwks else []
        res = subprocess.run(args, capture_output=True, text=True, timeout=120, check=False)
        assert res.returncode == want == ledger_code(source[kind], jwks), res.stderr


@pytest.mark.parametrize("how", [flip, truncate, drop_line, reorder])
@pytest.mark.parametrize("name", ALL_FILES)
def test_corrupted_bundles_fail_in_both_verifiers(source, tmp_path, name, how):
    dst = corrupt(source["full"], tmp_path, name, how)
    code, err = script(dst, source["jwks"])
    assert code == 1 == ledger_code(dst, source["jwks"]), err
    assert name in err, err


def test_the_script_has_usage_errors(tmp_path):
    assert script(tmp_path / "nope", None)[0] == 2
    (tmp_path / "bad.json").write_text("{")
    assert script(tmp_path, tmp_path / "bad.json")[0] == 2


CONTRACT = json.loads((Path(__file__).resolve().parents[1] / "vectors" / "contract.json")
                      .read_text("utf-8"))["cases"]
# The script's own name for the two halves of "VERIFIED carries a proof_ref, nothing else does"
SCRIPT_CODE = {"verified_without_proof": "proof_contract",
               "proof_on_non_verified": "proof_contract"}


@pytest.mark.parametrize("case", CONTRACT, ids=[c["name"] for c in CONTRACT])
def test_the_script_checks_the_shared_result_contract_vectors(case):
    doc = case["document"]
    env = {"status": doc.get("status"), "proof_ref": doc.get("proof_ref"),
           "payloads": {"preimage": doc.get("proof_ref"),
                        "attestation": "sha256:" + "0" * 64 if "attestation" in doc else None}}
    found: list[str] = []
    VB.Bundle.contract(lambda code, _msg: found.append(code), env, doc, {})
    assert sorted(found) == sorted(SCRIPT_CODE.get(c, c) for c in case["want"])


# -- ledger-export/2: tenant exports (docs/tenants.md) ------------------------------------------
@pytest.fixture(scope="module")
def tenant_bundles(tmp_path_factory):
    """The bundles of tests/verify/test_tenant_export.py, once for this module (SQLite:
    the verifiers read files, not a database)."""
    tmp = tmp_path_factory.mktemp("tenants")
    return make_bundles(f"sqlite:///{tmp / 'ledger.db'}", tmp)


def script_report(bundle: Path, jwks: Path | None) -> tuple[int, dict]:
    out, err = io.StringIO(), io.StringIO()
    args = [str(bundle), "--json"] + (["--jwks", str(jwks)] if jwks else [])
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = VB.main(args)
    return code, json.loads(out.getvalue())


@pytest.mark.parametrize("name", ["acme", "globex", "default", "acme-every", "globex-every",
                                  "all"])
def test_a_good_tenant_export_verifies_complete_in_the_script(tenant_bundles, name):
    code, report = script_report(tenant_bundles[name], tenant_bundles["jwks"])
    assert (code, report["findings"], report["complete"]) == (0, [], True), report
    assert code == ledger_code(tenant_bundles[name], tenant_bundles["jwks"])
    assert verify_export(tenant_bundles[name], tenant_bundles["jwks"])["complete"] is True


@pytest.mark.parametrize("name", ["aaa", "beta", "nobody"])
def test_an_empty_tenant_is_proven_absent_in_the_script(tenant_bundles, name):
    code, report = script_report(tenant_bundles[name], tenant_bundles["jwks"])
    assert (code, report["findings"], report["abstentions"], report["complete"]) == \
        (0, [], [], True), report
    assert code == ledger_code(tenant_bundles[name], tenant_bundles["jwks"])


@pytest.mark.parametrize("forgery", sorted(ABSENCE_FORGERIES))
def test_a_forged_absence_is_a_finding_in_the_script(tenant_bundles, tmp_path, forgery):
    bad = ABSENCE_FORGERIES[forgery](tenant_bundles, tmp_path)
    code, report = script_report(bad, tenant_bundles["jwks"])
    assert code == 1 and report["complete"] is False, report
    want = "manifest_malformed" if forgery == "absence-with-entries" else \
        "tenant_absence_invalid"
    assert want in {f["code"] for f in report["findings"]}, report["findings"]
    assert ledger_code(bad, tenant_bundles["jwks"]) == 1


@pytest.mark.parametrize("forgery", sorted(ABSENCE_FORGERIES))
def test_the_script_refuses_a_forged_absence_under_python_O(tenant_bundles, tmp_path, forgery):
    """Its checks are not ``assert`` statements: ``python -O`` (which drops those) refuses
    every forged absence proof as well."""
    bad = ABSENCE_FORGERIES[forgery](tenant_bundles, tmp_path)
    res = subprocess.run([sys.executable, "-O", str(SCRIPT), str(bad), "--json", "--jwks",
                          str(tenant_bundles["jwks"])], capture_output=True, text=True,
                         timeout=120, check=False)
    assert res.returncode == 1 and "Traceback" not in res.stderr, res.stderr
    assert json.loads(res.stdout)["complete"] is False


def test_the_script_has_no_assert_statement():
    tree = ast.parse(SCRIPT.read_text("utf-8"))
    assert not [n.lineno for n in ast.walk(tree) if isinstance(n, ast.Assert)]


def test_what_the_script_cannot_prove_is_not_complete(tenant_bundles, tmp_path):
    old = forge_absence(tenant_bundles, tmp_path, "nobody",  # written before absence proofs
                        lambda sec: {k: v for k, v in sec.items() if k != "absence"})
    code, report = script_report(old, tenant_bundles["jwks"])
    assert code == 3 and report["findings"] == [] and report["complete"] is False
    assert [a["code"] for a in report["abstentions"]] == ["tenant_absence_unproven"]
    code, report = script_report(tenant_bundles["filtered"], tenant_bundles["jwks"])
    assert code == 0 and report["complete"] is False  # verified, but filtered
    code, report = script_report(tenant_bundles["acme"], None)
    assert code == 3 and report["complete"] is False  # only the bundle's own keys


def test_a_v1_bundle_is_complete_in_the_script_when_contiguous_and_unfiltered(source):
    assert script_report(source["full"], source["jwks"])[1]["complete"] is True
    assert script_report(source["filtered"], source["jwks"])[1]["complete"] is False


@pytest.mark.parametrize("tamper", sorted(TAMPERS))
def test_a_tampered_tenant_export_is_a_finding_in_the_script(tenant_bundles, tmp_path, tamper):
    bad = TAMPERS[tamper](tenant_bundles, tmp_path)
    code, report = script_report(bad, tenant_bundles["jwks"])
    assert code == 1 and report["findings"] and report["complete"] is False, report
    assert ledger_code(bad, tenant_bundles["jwks"]) == 1
    want = {"dropped": "tenant_incomplete", "first-dropped": "tenant_incomplete",
            "rolled-back": "tenant_incomplete", "duplicated": "out_of_order",
            "foreign-entry": "tenant_foreign_entry", "relabelled-entry": "entry_hash_mismatch",
            "forged-head-count": "tenant_head_unproven"}[tamper]
    assert want in {f["code"] for f in report["findings"]}, report["findings"]


def test_a_mixed_interval_is_a_finding_in_the_script(tenant_bundles, tmp_path):
    """The whole export's first two intervals (seq 0 of default, seqs 1-2 of acme) merged
    into one: the last entry's chain does not reach seq 0."""
    src = tenant_bundles["all"]
    dst = tmp_path / "mixed"
    shutil.copytree(src, dst)
    ps = [json.loads(x) for x in (dst / "proofs.jsonl").read_text().splitlines()]
    ents = [p for p in ps if p["file"] == "entries.jsonl"]
    assert (ents[0]["first_seq"], ents[0]["seq"], ents[1]["first_seq"]) == (0, 0, 1)
    ents[1]["first_seq"] = 0
    ps.remove(ents[0])
    (dst / "proofs.jsonl").write_text("".join(
        json.dumps(p, sort_keys=True, separators=(",", ":")) + "\n" for p in ps))
    code, report = script_report(dst, tenant_bundles["jwks"])
    assert code == 1 and "proof_interval_mixed" in {f["code"] for f in report["findings"]}
    assert ledger_code(dst, tenant_bundles["jwks"]) == 1
