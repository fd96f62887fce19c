"""scripts/verify_bundle.py — the independent verifier written from the format documents —
agrees with ``ledger verify-export`` on good and corrupted bundles (SQLite and PostgreSQL)."""

from __future__ import annotations

import ast
import contextlib
import importlib.util
import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

from ledger.verify.export import EXIT_CODES, verify_export
from tests.ops.test_export import ALL_FILES, corrupt, drop_line, flip, reorder, source, truncate

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
