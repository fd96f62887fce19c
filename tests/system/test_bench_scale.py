"""``scripts/bench scale`` runs: the growth curve's CI-sized version (two sizes of 10,000
and 20,000 entries on each engine; docs/scaling.md has the 1M/3M/10M figures).  Marked slow:
a fill, a tree sync, an audit and the latencies per size take about a minute on a shared
2-core machine.

It runs the bench's own ``run`` (the same code as ``scripts/bench scale --sizes ...``) and
checks what the figures rest on: every size was reached and checkpointed, the audit of the
filled ledger passed (the bulk fill wrote a valid ledger; ``audit_rate`` asserts it), the
proofs from tiles were computed and checked against the signed root, and the table was
printed."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.api.server import ROOT
from tests.conftest import PG_ADMIN_URL

pytestmark = pytest.mark.slow


def test_the_growth_curve_runs_on_both_engines(tmp_path, pg_url):
    # pg_url: the PostgreSQL case of the suite is reachable (or skipped/errored with its
    # reason); the bench makes and drops its own database on the same server
    env = {**os.environ, "LEDGER_BENCH_PG": PG_ADMIN_URL}
    res = subprocess.run([sys.executable, "scripts/bench", "scale", "--sizes", "10000,20000",
                          "--backend", "sqlite,postgresql", "--tmp", str(tmp_path)],
                         capture_output=True, text=True, timeout=900, cwd=ROOT, check=False,
                         env=env)
    assert res.returncode == 0, res.stderr[-3000:]
    out = res.stdout
    assert "growth curve" in out and "against the targets" in out
    for kind in ("sqlite", "postgresql"):
        assert f"{kind} 20,000: audit measured" in out
        assert f"{kind}: the whole run" in out
