"""docs/anchoring.md "Checking a token by hand (OpenSSL)" runs as written: the shell block
between its markers, against a token of a real TSA (OpenSSL's on loopback) over a signed
checkpoint note, passes; with the note's text changed, another nonce or another CA it fails."""

from __future__ import annotations

import base64
import shutil
import subprocess
import urllib.request
from pathlib import Path

import pytest

from ledger.crypto.timestamp import REQUEST_TYPE, make_request
from ledger.witness.local_tsa import LocalTsa, make_tsa_certs

DOC = Path(__file__).resolve().parents[2] / "docs" / "anchoring.md"
TEXT = b"ledger.example/log\n13\nzHnr8kIXpsXPbByHsrUcIvczHdwBvt92eoGKPzwZ1CQ=\n"
NOTE = TEXT + "\n— ledger.example/log YkCieG5XAFg2l4ZGDU2f3pySLVYh9HdyK5p9z5BerHQaVtjg5sBA" \
    "Hu9n4S6rgcbXSJ2A/H6UH5FJwLyVFmqO82KBAwM=\n".encode()

pytestmark = pytest.mark.skipif(shutil.which("openssl") is None, reason="needs openssl")


def recipe() -> str:
    text = DOC.read_text(encoding="utf-8")
    block = text[text.index("<!-- BEGIN RFC 3161 RECIPE"):text.index("<!-- END RFC 3161 RECIPE")]
    return block.split("```sh\n", 1)[1].split("```", 1)[0]


@pytest.fixture(scope="module")
def token() -> tuple[bytes, int, bytes]:
    with LocalTsa() as tsa:
        query, nonce = make_request(TEXT)
        req = urllib.request.Request(tsa.url, data=query,
                                     headers={"Content-Type": REQUEST_TYPE})
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.read(), nonce, Path(tsa.ca_file).read_bytes()


def run(tmp: Path, note: bytes, token: bytes, nonce: int, ca: bytes) -> subprocess.CompletedProcess:
    (tmp / "checkpoint.txt").write_bytes(note)
    (tmp / "token.b64").write_text(base64.b64encode(token).decode("ascii"))
    (tmp / "nonce").write_text(str(nonce))
    (tmp / "ca.pem").write_bytes(ca)
    return subprocess.run(["bash", "-e", "-c", recipe()], cwd=tmp, capture_output=True,
                          text=True, timeout=60)


def test_the_recipe_accepts_a_real_token(tmp_path, token):
    tok, nonce, ca = token
    r = run(tmp_path, NOTE, tok, nonce, ca)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "checkpoint-text").read_bytes() == TEXT
    assert "Time stamp: " in r.stdout and "Policy OID: " in r.stdout


@pytest.mark.parametrize("case", ["other text", "other nonce", "other CA"])
def test_the_recipe_refuses(tmp_path, token, case):
    tok, nonce, ca = token
    note, n = NOTE, nonce
    if case == "other text":
        note = NOTE.replace(b"\n13\n", b"\n14\n")
    elif case == "other nonce":
        n = nonce + 1
    else:
        (tmp_path / "other").mkdir()
        make_tsa_certs(tmp_path / "other")
        ca = (tmp_path / "other" / "ca.pem").read_bytes()
    assert run(tmp_path, note, tok, n, ca).returncode != 0
