"""Kill a ledger command's whole process group once it has saved progress (the SIGKILL
tests of the audit and of re-verification)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

from tests.api.server import ROOT


def kill_after_progress(url: str, argv: list[str], runs: Callable[[str], list[Any]],
                        timeout_s: float = 60) -> int:
    """Run ``ledger --db URL ARGV`` in a session of its own and SIGKILL its process group
    (the command and any workers) as soon as its latest run row in ``runs(url)`` has moved
    past its first seq; returns the process's exit status (``-SIGKILL`` when it was killed,
    anything else when it finished first)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("LEDGER_DB_URL", None)
    proc = subprocess.Popen([sys.executable, "-m", "ledger", "--db", url, *argv],
                            cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + timeout_s
    try:
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                rows = runs(url)
            except Exception:  # noqa: BLE001 - schema not readable yet / busy
                rows = []
            if rows and rows[-1].next_seq > 0:
                os.killpg(proc.pid, signal.SIGKILL)
                break
            time.sleep(0.002)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    return proc.returncode
