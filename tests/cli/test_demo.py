"""`ledger demo` — the README's first command — runs end to end and shows each capability."""

from __future__ import annotations

from click.testing import CliRunner

from ledger.cli.main import cli


def test_demo_narrates_every_capability(tmp_path):
    res = CliRunner().invoke(cli, ["demo", "--dir", str(tmp_path / "d")])
    assert res.exit_code == 0, res.output
    out = res.output
    assert "appended 60 results in one batch" in out
    assert "(replayed=True)" in out and "rejected (idempotency_conflict)" in out
    assert "proof_on_non_verified [result.proof_ref] — quarantined" in out
    assert "verdict valid" in out and "rejected (attestation_signature_invalid)" in out
    assert "0 failed, 0 unverified — recorded as entry" in out
    assert "inclusion proof of entry 1 verified offline" in out
    assert "verify-export complete:" in out and ", 0 failed, 0 unverified — offline" in out
    assert "seq 0: payload_modified payload_digest_mismatch" in out
    assert "seq 3: payload_modified column_mismatch" in out
    assert "without the checkpoint: audit complete: 64 rows, 64 verified, 0 failed" in out
    assert "truncated checkpoint_truncated" in out
    assert "(queries and evidence) of 4 entries in redaction entry" in out
    assert "0 failed, 4 unverified, 8 redacted" in out.split(
        "the checkpoint signed before the erasure still verifies")[0].rsplit("\n", 1)[-1]
    assert "without a redaction: refused by the database" in out
    assert "seq 2: deleted payload_missing" in out
    report = tmp_path / "d" / "report.html"
    assert f"HTML audit report -> {report}" in out
    page = report.read_text(encoding="utf-8")
    assert "Demo ledger: audit report" in page and "covers the whole scope" in page
    assert "<script" not in page and "src=" not in page
    assert "token issue --role auditor" in out and "/console/#token=$TOKEN" in out
    tour = tmp_path / "d" / "tour"  # the README tour's inputs (tests/system/test_readme_tour.py)
    assert f"the README tour's inputs -> {tour}" in out
    for name in ("results.jsonl", "issuer-jwks.json", "retention.json", "qwed.db",
                 "audit-secret", "spool"):
        assert (tour / name).exists(), name
    # a second run starts fresh
    again = CliRunner().invoke(cli, ["demo", "--dir", str(tmp_path / "d")])
    assert again.exit_code == 0, again.output


def test_the_demo_closing_lines_run_as_printed(tmp_path):
    """Its console lines name the ledger command that exists (no activated venv needed) and
    print the URL rather than call a desktop's `open`; the token line runs literally."""
    import shlex
    import subprocess
    import sys
    from pathlib import Path

    ledger = Path(sys.executable).with_name("ledger")
    done = subprocess.run([str(ledger), "demo", "--dir", str(tmp_path / "d")], cwd=tmp_path,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    out = (done.stdout + done.stderr).splitlines()
    i = next(n for n, line in enumerate(out) if line.startswith("look at this ledger"))
    serve, token, url = (line.strip() for line in out[i + 1:i + 4])
    assert not any(line.strip().startswith("open ") for line in out[i:])  # no desktop command
    for line in (serve, token):
        words = shlex.split(line.replace("TOKEN=$(", "").rstrip(")&"))
        assert Path(words[0]).exists() or (tmp_path / words[0]).exists(), line
    got = subprocess.run(["bash", "-c", f"set -e; {token}; echo \"$TOKEN\""], cwd=tmp_path,
                         capture_output=True, text=True, timeout=60)
    assert got.returncode == 0 and got.stdout.count(".") == 2, got.stderr  # a JWT
    assert url.startswith('echo "http://127.0.0.1:8080/console/#token=$TOKEN"')
