"""Replay tests/vectors/merkle/*.json and check they match scripts/gen-vectors-merkle."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ledger.core.merkle import verify_consistency, verify_inclusion
from ledger.errors import ProofError

REPO = Path(__file__).resolve().parents[2]
VECTOR_DIR = REPO / "tests" / "vectors" / "merkle"
GENERATOR = REPO / "scripts" / "gen-vectors-merkle"
VECTOR_FILES = sorted(VECTOR_DIR.glob("*.json"))


def _run(case: dict) -> None:
    proof = [bytes.fromhex(h) for h in case["proof"]]
    if case["kind"] == "inclusion":
        verify_inclusion(case["leaf_index"], case["tree_size"], bytes.fromhex(case["leaf_hash"]),
                         proof, bytes.fromhex(case["root"]))
    elif case["kind"] == "consistency":
        verify_consistency(case["size1"], case["size2"], proof, bytes.fromhex(case["root1"]),
                           bytes.fromhex(case["root2"]))
    else:
        raise AssertionError(f"unknown vector kind {case['kind']!r}")


def test_vectors_present():
    assert len(VECTOR_FILES) > 100
    assert any("-ok" in p.name for p in VECTOR_FILES)


@pytest.mark.parametrize("path", VECTOR_FILES, ids=[p.stem for p in VECTOR_FILES])
def test_vector(path: Path):
    case = json.loads(path.read_text(encoding="utf-8"))
    assert case["desc"]
    if case["want_err"]:
        with pytest.raises(ProofError):
            _run(case)
    else:
        _run(case)


def test_vectors_are_up_to_date(tmp_path: Path):
    subprocess.run([sys.executable, str(GENERATOR), "--out", str(tmp_path)], check=True,
                   capture_output=True, cwd=REPO)
    fresh = {p.name: p.read_bytes() for p in tmp_path.glob("*.json")}
    committed = {p.name: p.read_bytes() for p in VECTOR_FILES}
    assert sorted(fresh) == sorted(committed), "vector set drifted: rerun scripts/gen-vectors-merkle"
    drifted = [name for name in fresh if fresh[name] != committed[name]]
    assert not drifted, f"vectors drifted (rerun scripts/gen-vectors-merkle): {drifted[:5]}"
