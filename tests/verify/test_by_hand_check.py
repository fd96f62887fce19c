"""docs/export.md "Verifying by hand" runs as written against real bundles: one signed by a
rotated key (the manifest by the new key, a stored checkpoint by the old one) and one whose
checkpoint carries two signature lines."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner

from ledger.cli.main import cli
from ledger.demo.samples import realistic

DOC = Path(__file__).resolve().parents[2] / "docs" / "export.md"


def snippet() -> str:
    text = DOC.read_text("utf-8")
    part = text[text.index("## Verifying by hand"):]
    return re.search(r"```python\n(.*?)```", part, re.DOTALL).group(1)  # type: ignore[union-attr]


def test_the_by_hand_check_handles_rotation_and_two_signature_lines(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    db = f"sqlite:///{tmp_path / 'l.db'}"
    run = CliRunner().invoke

    def ok(*args: str, stdin: str | None = None) -> None:
        r = run(cli, ["--db", db, *args], input=stdin)
        assert r.exit_code == 0, r.output

    sub = {"engine": "logic", "result": {"status": "BLOCKED", "agent_message": "m"}}
    verified = next(x for x in realistic(20) if x["result"]["status"] == "VERIFIED")
    ok("init", "--origin", "example.test/log")
    ok("keys", "generate")
    ok("append", "-", stdin=json.dumps(sub))
    ok("append", "-", stdin=json.dumps(verified))  # its proof_ref is checked by hand too
    ok("checkpoint")
    ok("keys", "generate")  # rotation: the new key signs the manifest
    ok("export", "--out", "b1")
    ok("append", "-", stdin=json.dumps(sub))
    ok("export", "--out", "b2")  # a new checkpoint, signed by both active keys
    assert (tmp_path / "b2" / "checkpoint.txt").read_text().count("\n\u2014 ") == 2
    os.makedirs("keys")
    (tmp_path / "keys" / "jwks.json").write_bytes(
        (tmp_path / "ledger-keys" / "jwks.json").read_bytes())
    code = snippet()
    for bundle, n in (("b1", 2), ("b2", 3)):
        r = subprocess.run([sys.executable, "-c", code.replace('d = "b/"', f'd = "{bundle}/"')],
                           check=False, cwd=tmp_path, capture_output=True, text=True,
                           timeout=60)
        assert (r.returncode, r.stdout) == (0, f"verified {n} entries\n"), r.stderr
