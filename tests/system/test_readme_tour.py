"""The README's tour runs as written: after ``ledger demo``, in a fresh directory laid out
as a checkout (``.venv`` and ``scripts/`` beside ``ledger-demo/``), every line of the
tour's block is run by ``bash``, in order, and each must exit 0.

The block is parsed from README.md, so a changed tour is what runs.  One substitution:
the port 8080 becomes a free port (other servers may hold 8080 on a shared machine).
The ``ledger serve ... &`` line is started by the script and stopped by the test.  The
README's sample submission is appended too, and must be accepted.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from ledger.cli.main import cli

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"
VENV_BIN = Path(sys.executable).parent


def tour_lines() -> list[str]:
    text = README.read_text(encoding="utf-8")
    section = text[text.index("## A tour"):]
    block = re.search(r"```sh\n(.*?)```", section, re.S)
    assert block, "README.md: no ```sh block under '## A tour'"
    return [line for line in block.group(1).splitlines() if line.strip()]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _is_serve(line: str) -> bool:
    return bool(re.match(r"ledger serve\b[^#]*&", line))


def _script(lines: list[str], pidfile: Path) -> str:
    """Each line as written, then a check of its exit status naming the line; the pid of
    a ``ledger serve ... &`` line is written to ``pidfile``."""
    out = []
    for n, line in enumerate(lines, 1):
        out.append(f"echo {json.dumps(f'tour line {n}: {line}')} >&2")
        out.append(line)
        out.append(f'rc=$?; if [ "$rc" -ne 0 ]; then echo "tour line {n} failed: exit $rc"'
                   " >&2; exit 1; fi")
        if _is_serve(line):
            out.append(f"echo $! > {pidfile}")
    out.append("echo 'tour: every line passed' >&2")
    return "\n".join(out) + "\n"


def test_the_tour_block_is_there_and_serves_in_the_background():
    lines = tour_lines()
    assert sum(_is_serve(line) for line in lines) == 1
    assert lines[0].startswith(". .venv/bin/activate")
    served = next(i for i, line in enumerate(lines) if _is_serve(line))
    uses = [i for i, line in enumerate(lines) if "--url http://127.0.0.1:8080" in line]
    assert uses and min(uses) > served  # the server is up before a line needs it
    assert min(i for i, line in enumerate(lines) if "$TOKEN" in line) > \
        min(i for i, line in enumerate(lines) if line.startswith("TOKEN="))


@pytest.mark.slow
def test_every_tour_line_runs_in_order_after_the_demo(tmp_path):
    (tmp_path / ".venv").symlink_to(VENV_BIN.parent)
    (tmp_path / "scripts").symlink_to(REPO / "scripts")
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("LEDGER_") and k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    env["PATH"] = f"{VENV_BIN}{os.pathsep}{env.get('PATH', '')}"
    demo = subprocess.run([str(VENV_BIN / "ledger"), "demo"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=600)
    assert demo.returncode == 0, demo.stdout + demo.stderr
    port = _free_port()
    lines = [line.replace("8080", str(port)) for line in tour_lines()]
    pidfile = tmp_path / "serve.pid"
    script = tmp_path / "tour.sh"
    script.write_text(_script(lines, pidfile), encoding="utf-8")
    out, err = tmp_path / "tour.out", tmp_path / "tour.err"
    try:  # files, not pipes: the server started in the background keeps its copies open
        with open(out, "w") as o, open(err, "w") as e:
            code = subprocess.run(["bash", str(script)], cwd=tmp_path, env=env, stdout=o,
                                  stderr=e, timeout=900).returncode
    finally:
        if pidfile.exists():
            pid = int(pidfile.read_text())
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
    stdout, stderr = out.read_text(), err.read_text()
    assert code == 0, stderr[-6000:] + stdout[-3000:]
    assert "tour: every line passed" in stderr
    tour = tmp_path / "ledger-demo" / "tour"
    appended = sum(1 for line in (tour / "results.jsonl").read_text().splitlines() if line)
    oks = [line for line in stdout.splitlines() if line.startswith('{"ok": true, "seq": ')]
    assert len(oks) == 1 + appended, stdout[-3000:]  # the issuer's key event, every result
    assert '"ok": false' not in stdout
    assert json.loads((tour / "audit.json").read_text())["outcome"] == "passed"
    for made in ("cp.txt", "p1.json", "reader.json", "report.html", "erasure.json",
                 "bundle/manifest.json"):
        assert (tour / made).exists(), made
    status = subprocess.run([str(VENV_BIN / "ledger"), "spool", "status", "spool/",
                             "--format", "json"], cwd=tour, env=env, capture_output=True,
                            text=True, timeout=60)
    assert json.loads(status.stdout)["pending"] == 0, status.stdout + status.stderr


def test_the_readme_sample_submission_is_accepted(tmp_path):
    text = README.read_text(encoding="utf-8")
    start = text.index("A submission (all rules in")
    sample = re.search(r"```json\n(.*?)```", text[start:], re.S)
    assert sample
    body = tmp_path / "sample.json"
    body.write_text(sample.group(1), encoding="utf-8")
    url = f"sqlite:///{tmp_path / 'l.db'}"
    runner = CliRunner()
    assert runner.invoke(cli, ["--db", url, "init", "--origin", "t.example/readme"]
                         ).exit_code == 0
    res = runner.invoke(cli, ["--db", url, "append", str(body)])
    assert res.exit_code == 0, res.output
