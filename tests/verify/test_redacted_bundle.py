"""An export of a ledger with a redaction verifies offline with both verifiers: the
erased payloads abstain ``redacted`` (citing the redaction), everything else verifies; a
record claiming an erasure no redaction entry made, or missing bytes without one, fail."""

from __future__ import annotations

import base64
import contextlib
import importlib.util
import io
import json
import random
from pathlib import Path

from ledger import Ledger
from ledger.clock import FixedClock
from ledger.crypto.keys import Keyring
from ledger.ops.append import commit_redaction, prepare_event
from ledger.ops.samples import bench_submission
from ledger.ops.verify_export import verify_export

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "verify_bundle.py"
T0 = 1_767_225_600_000_000
ORIGIN = "test.example/redacted"


def _script(bundle: Path, jwks: Path) -> tuple[int, str]:
    spec = importlib.util.spec_from_file_location("verify_bundle_r", SCRIPT)
    vb = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(vb)  # type: ignore[union-attr]
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = vb.main([str(bundle), "--jwks", str(jwks), "--json"])
    return code, out.getvalue() + err.getvalue()


def _redacted_bundle(url: str, tmp: Path) -> tuple[Path, Path]:
    rng = random.Random(5)
    with Ledger.init(url, clock=FixedClock(T0, 1000), origin=ORIGIN) as L:
        L.append_many([bench_submission(i, rng) for i in range(6)])
        doc = {"format": "ledger-redaction/1",
               "targets": [{"seq": 2, "payloads": ["query", "subject"]}],
               "reason": "erasure request", "reference": None, "requested_by": None,
               "keep_attestation": False, "override_minimum": None}
        p = prepare_event("redaction", {"producer": "dpo", "role": "operator"}, "request", doc)
        commit_redaction(L.ctx, [p], [[(2, "query"), (2, "subject")]])
        ring = Keyring.load(tmp / "keys")
        ring.generate(ORIGIN, T0)
        L.export(tmp / "bundle", keys=ring.path)
    return tmp / "bundle", ring.path / "jwks.json"


def test_both_verifiers_abstain_on_the_erased_payloads_only(db_url, tmp_path):
    bundle, jwks = _redacted_bundle(db_url, tmp_path)
    lines = [json.loads(x) for x in (bundle / "entries.jsonl").read_text().splitlines()]
    erased = {n: p for n, p in lines[2]["payloads"].items() if p["data_b64"] is None}
    assert erased == {n: {"data_b64": None, "digest": lines[2]["payloads"][n]["digest"],
                          "redacted_by": 6, "salt_b64": None} for n in ("query", "subject")}
    assert all("salt_b64" in p for p in lines[0]["payloads"].values())
    report = verify_export(bundle, jwks)
    assert report["findings"] == [] and report["outcome"] == "unverified"
    assert sorted((a["seq"], a["reason"]) for a in report["abstentions"]) == [
        (2, "redacted"), (2, "redacted")]
    code, out = _script(bundle, jwks)
    assert code == 3, out
    assert '"redacted"' in out and "payload_missing" not in out


def test_a_forged_erasure_marker_fails_in_both_verifiers(sqlite_url, tmp_path):
    bundle, jwks = _redacted_bundle(sqlite_url, tmp_path)
    path = bundle / "entries.jsonl"
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    meta = lines[3]["payloads"]["meta"]  # never redacted: claim it was
    assert base64.b64decode(meta["data_b64"])
    meta.update(data_b64=None, salt_b64=None, redacted_by=6)
    path.write_text("".join(json.dumps(x, ensure_ascii=False, separators=(",", ":"),
                                       sort_keys=True) + "\n" for x in lines))
    report = verify_export(bundle, jwks)
    codes = {f["code"] for f in report["findings"]}
    assert {"redaction_marker_invalid", "payload_missing"} <= codes
    code, out = _script(bundle, jwks)
    assert code == 1 and "payload_missing" in out
