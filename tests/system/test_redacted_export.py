"""An export of a ledger with redactions and holds verifies offline with both verifiers
(``ledger verify-export`` and the independent ``scripts/verify_bundle.py``): the erased
payloads abstain as redacted, everything else verifies; on SQLite and PostgreSQL."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

from ledger.clock import SystemClock
from ledger.crypto.keys import Keyring
from ledger.demo.samples import math_verified
from ledger.facade import Ledger
from ledger.ops.custody import Ask
from ledger.ops.export import ExportOptions
from ledger.verify.export import verify_export

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "verify_bundle.py"


def test_redacted_export_verifies_with_both_verifiers(db_url, tmp_path):
    ring = Keyring.load(tmp_path / "keys")
    with Ledger.init(db_url, origin="test.example/redacted-export") as lg:
        ring.generate(lg.meta.origin, SystemClock().now_us())
        subs = []
        for i in range(6):
            s = math_verified(i, random.Random(i))
            s["subject"] = "frank" if i % 2 else f"other-{i}"
            subs.append(s)
        lg.append_many(subs)
        lg.hold_add(Ask("keep entry 0"), seqs=[0])
        out = lg.redact(Ask("GDPR Art. 17", "DSR-3"), subject="frank",
                        payloads=["query", "evidence"], keyring=ring)
        assert len(out.targets) == 3
        lg.export(tmp_path / "bundle", ExportOptions(keys=ring.path))
    jwks = ring.path / "jwks.json"
    report = verify_export(tmp_path / "bundle", jwks)
    assert report["findings"] == [], report["findings"]
    redacted = [a for a in report["abstentions"] if a.get("reason") == "redacted"]
    assert len(redacted) == 6 and report["outcome"] == "unverified"
    res = subprocess.run([sys.executable, str(SCRIPT), str(tmp_path / "bundle"), "--jwks",
                          str(jwks), "--json"], capture_output=True, text=True, timeout=120,
                         check=False)
    assert res.returncode == 3, res.stdout + res.stderr
    doc = json.loads(res.stdout)
    assert doc.get("findings") == [], doc.get("findings")
