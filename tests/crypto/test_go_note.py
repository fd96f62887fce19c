"""Interoperability: a cosigned checkpoint verifies with Go's golang.org/x/mod/sumdb/note
(the log's Ed25519 line with ``note.NewVerifier``, the witness lines with a cosignature/v1
``note.Verifier`` written against Go's crypto/ed25519; unknown lines ignored).

Runs when ``go`` and the x/mod sources (Debian: golang-go golang-golang-x-mod-dev, which
``scripts/ensure-tools`` installs) are present; skipped with the reason otherwise.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from ledger.core.note import Checkpoint, format_checkpoint_body
from ledger.crypto.cosign import cosign, cosigner_vkey, log_vkey
from ledger.crypto.note_sign import sign_note

GOPATH = Path(os.environ.get("LEDGER_GOPATH", "/usr/share/gocode"))
SOURCE = Path(__file__).parent / "go" / "cosigcheck.go"
ORIGIN = "ledger.example/go-interop"


def _go_missing() -> str | None:
    if shutil.which("go") is None:
        return "Go is not installed (scripts/ensure-tools installs golang-go)"
    if not (GOPATH / "src/golang.org/x/mod/sumdb/note").is_dir():
        return f"golang.org/x/mod is not under {GOPATH} (golang-golang-x-mod-dev)"
    return None


pytestmark = pytest.mark.skipif(_go_missing() is not None, reason=_go_missing() or "")


@pytest.fixture(scope="module")
def checker(tmp_path_factory):
    out = tmp_path_factory.mktemp("go") / "cosigcheck"
    env = {**os.environ, "GOPATH": str(GOPATH), "GO111MODULE": "off", "GOFLAGS": "",
           "GOCACHE": str(out.parent / "cache")}
    subprocess.run(["go", "build", "-o", str(out), str(SOURCE)], check=True, env=env,
                   capture_output=True, timeout=300)
    return out


def _run(checker, note: str, tmp_path, *vkeys):
    f = tmp_path / "note.txt"
    f.write_text(note, encoding="utf-8")
    return subprocess.run([str(checker), str(f), *vkeys], check=False, capture_output=True,
                          text=True, timeout=60)


@pytest.fixture
def keys():
    return Ed25519PrivateKey.generate(), [Ed25519PrivateKey.generate() for _ in range(2)]


def _cosigned(log, witnesses, body):
    return body + "\n" + sign_note(body, ORIGIN, log) + "".join(
        cosign(body, f"w{i}.example/w", k, 1_700_000_000 + i) for i, k in enumerate(witnesses))


def test_go_verifies_the_log_and_both_cosignatures(checker, keys, tmp_path):
    log, ws = keys
    body = format_checkpoint_body(Checkpoint(ORIGIN, 42, bytes(range(32))))
    res = _run(checker, _cosigned(log, ws, body), tmp_path, log_vkey(ORIGIN, log),
               *(cosigner_vkey(f"w{i}.example/w", k) for i, k in enumerate(ws)))
    assert res.returncode == 0, res.stderr
    assert res.stdout.split("\n")[:3] == [f"verified {ORIGIN}", "verified w0.example/w",
                                           "verified w1.example/w"]


def test_go_ignores_cosignatures_it_does_not_know(checker, keys, tmp_path):
    log, ws = keys
    body = format_checkpoint_body(Checkpoint(ORIGIN, 7, bytes(32)))
    res = _run(checker, _cosigned(log, ws, body), tmp_path, log_vkey(ORIGIN, log))
    assert res.returncode == 0, res.stderr
    assert res.stdout.split() == ["verified", ORIGIN, "ignored", "w0.example/w", "ignored",
                                  "w1.example/w"]


def test_go_rejects_a_cosignature_of_another_checkpoint(checker, keys, tmp_path):
    log, ws = keys
    body = format_checkpoint_body(Checkpoint(ORIGIN, 7, bytes(32)))
    other = format_checkpoint_body(Checkpoint(ORIGIN, 8, bytes(32)))
    note = body + "\n" + sign_note(body, ORIGIN, log) + cosign(other, "w0.example/w", ws[0], 1)
    res = _run(checker, note, tmp_path, log_vkey(ORIGIN, log),
               cosigner_vkey("w0.example/w", ws[0]))
    assert res.returncode == 1 and "invalid signature" in res.stderr


def test_go_opens_a_checkpoint_with_a_tenants_line(checker, keys, tmp_path):
    """A checkpoint committing to tenant heads (docs/tenants.md) carries the extension line
    ``tenants <n> <base64>``: Go's note package still opens it, its signature covers the
    line, and a changed line no longer verifies."""
    import json

    from ledger.core.tenant import TenantHead, extension_line, sorted_heads

    log, ws = keys
    heads = sorted_heads([TenantHead("default", 2, bytes(range(32))),
                          TenantHead("acme", 3, bytes(32))])
    body = format_checkpoint_body(Checkpoint(ORIGIN, 5, bytes(range(32)),
                                             (extension_line(heads),)))
    assert body.split("\n")[3].startswith("tenants 2 ")
    note = _cosigned(log, ws, body)
    res = _run(checker, note, tmp_path, log_vkey(ORIGIN, log),
               *(cosigner_vkey(f"w{i}.example/w", k) for i, k in enumerate(ws)))
    assert res.returncode == 0, res.stderr
    assert res.stdout.split("\n")[:3] == [f"verified {ORIGIN}", "verified w0.example/w",
                                           "verified w1.example/w"]
    changed = note.replace(extension_line(heads), extension_line(heads[:1]))
    assert changed != note
    res = _run(checker, changed, tmp_path, log_vkey(ORIGIN, log))
    assert res.returncode == 1 and "invalid signature" in res.stderr
    # the signed checkpoints of the tenant vectors (docs/format.md §11), by their vkey
    vectors = json.loads((Path(__file__).resolve().parents[1] / "vectors" / "tenants.json")
                         .read_text("utf-8"))
    for cp in vectors["checkpoints"]:
        res = _run(checker, cp["signed_note"], tmp_path, vectors["key"]["vkey"])
        assert res.returncode == 0 and res.stdout.split() == ["verified", vectors["origin"]], \
            res.stderr
