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

import pytest

from ledger import Ledger
from ledger.clock import FixedClock
from ledger.crypto.keys import Keyring
from ledger.demo.samples import bench_submission
from ledger.ops.append import commit_redaction, prepare_event
from ledger.ops.export import ExportOptions
from ledger.ops.filters import make_filters
from ledger.verify.export import verify_export

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


def _redacted_bundle(url: str, tmp: Path, *, signed: bool = True,
                     **export: object) -> tuple[Path, Path]:
    """A ledger of 6 results and, at seq 6, a redaction of seq 2's query and subject: signed
    by the ledger key (ledger-redaction/2), or unsigned as written before signing
    (``signed=False``, ledger-redaction/1); exported with ``export``."""
    from ledger.core.redaction import build_request
    from ledger.crypto.redaction_sign import sign_request
    from ledger.crypto.tokens import ledger_signer

    rng = random.Random(5)
    ring = Keyring.load(tmp / "keys")
    with Ledger.init(url, clock=FixedClock(T0, 1000), origin=ORIGIN) as L:
        ring.generate(ORIGIN, T0)
        L.append_many([bench_submission(i, rng) for i in range(6)])
        req = build_request({2: ["query", "subject"]}, "erasure request")
        if signed:
            req = sign_request(ledger_signer(ring, ORIGIN), L.meta.ledger_id, req)
        p = prepare_event("redaction", {"producer": "dpo", "role": "operator"}, "request",
                          req.to_doc())
        commit_redaction(L.ctx, [p], [[(2, "query"), (2, "subject")]])
        L.export(tmp / "bundle", ExportOptions(keys=ring.path, filters=make_filters(**export)))
    return tmp / "bundle", ring.path / "jwks.json"


def test_both_verifiers_abstain_on_the_erased_payloads_only(db_url, tmp_path):
    bundle, jwks = _redacted_bundle(db_url, tmp_path)
    report = verify_export(bundle, jwks)
    assert report["findings"] == [] and report["outcome"] == "unverified"
    assert sorted((a["seq"], a["reason"]) for a in report["abstentions"]) == [
        (2, "redacted"), (2, "redacted")]
    code, out = _script(bundle, jwks)
    assert code == 3 and '"redacted"' in out and "redaction_unsigned" not in out, out


def test_an_unsigned_redaction_of_old_is_abstained_as_such(db_url, tmp_path):
    bundle, jwks = _redacted_bundle(db_url, tmp_path, signed=False)
    lines = [json.loads(x) for x in (bundle / "entries.jsonl").read_text().splitlines()]
    erased = {n: p for n, p in lines[2]["payloads"].items() if p["data_b64"] is None}
    assert erased == {n: {"data_b64": None, "digest": lines[2]["payloads"][n]["digest"],
                          "redacted_by": 6, "salt_b64": None} for n in ("query", "subject")}
    assert all("salt_b64" in p for p in lines[0]["payloads"].values())
    report = verify_export(bundle, jwks)
    assert report["findings"] == [] and report["outcome"] == "unverified"
    # an unsigned (ledger-redaction/1) request, as written before redactions were signed:
    # abstained as what it is
    assert sorted((a["seq"], a["reason"]) for a in report["abstentions"]) == [
        (2, "redacted"), (2, "redacted"), (6, "redaction_unsigned")]
    code, out = _script(bundle, jwks)
    assert code == 3, out
    assert '"redacted"' in out and "payload_missing" not in out
    assert '"redaction_unsigned"' in out


def _signed_bundle(url: str, tmp: Path, *, forged: str) -> tuple[Path, Path, int]:
    """A ledger with a lawful (signed) redaction of seq 1, then a redaction of seq 3 that a
    database writer appended: signed by another key (``forged="key"``) or unsigned
    (``"unsigned"``).  Returns the bundle, the ledger's JWKS and the forged seq."""
    from ledger.core.redaction import build_request
    from ledger.crypto.redaction_sign import sign_request
    from ledger.crypto.tokens import ledger_signer
    from ledger.ops.custody import Ask, prepare_redaction

    rng = random.Random(7)
    ring = Keyring.load(tmp / "keys")
    with Ledger.init(url, clock=FixedClock(T0, 1000), origin=ORIGIN) as L:
        ring.generate(ORIGIN, T0)
        L.append_many([bench_submission(i, rng) for i in range(5)])
        L.redact(Ask("DSR"), seqs=[1], payloads=["query"], keyring=ring)
        req = build_request({3: ["query"]}, "forged")
        if forged == "key":
            other = Keyring.load(tmp / "other-keys")
            other.generate(ORIGIN, T0)
            req = sign_request(ledger_signer(other, ORIGIN), L.meta.ledger_id, req)
        p, pairs = prepare_redaction(req, Ask("forged", role="custodian"))
        seq = commit_redaction(L.ctx, [p], [pairs])[0].result.seq
        L.export(tmp / "bundle", ExportOptions(keys=ring.path))
    return tmp / "bundle", ring.path / "jwks.json", seq


@pytest.mark.parametrize("forged", ["key", "unsigned"])
def test_a_redaction_not_signed_by_the_ledger_key_fails_in_both_verifiers(db_url, tmp_path,
                                                                          forged):
    bundle, jwks, seq = _signed_bundle(db_url, tmp_path, forged=forged)
    code = "redaction_signature_invalid" if forged == "key" else "redaction_unsigned"
    report = verify_export(bundle, jwks)
    assert [(f["seq"], f["code"]) for f in report["findings"]] == [(seq, code)]
    assert report["outcome"] == "failed"
    assert sorted((a["seq"], a["reason"]) for a in report["abstentions"]) == [
        (1, "redacted"), (3, "redacted")]
    status, out = _script(bundle, jwks)
    assert status == 1, out
    found = json.JSONDecoder().raw_decode(out[out.index("{"):])[0]["findings"]
    assert [(f["seq"], f["code"]) for f in found] == [(seq, code)]


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


def _both(bundle: Path, jwks: Path) -> tuple[dict, int, str]:
    report = verify_export(bundle, jwks)
    code, out = _script(bundle, jwks)
    return report, code, out


def test_a_range_export_ending_before_the_redaction_verifies(db_url, tmp_path):
    """--to 4, the redaction at seq 6: the bundle carries it in redactions.jsonl (proven
    against a checkpoint that covers it), so the erased payloads abstain ``redacted``."""
    bundle, jwks = _redacted_bundle(db_url, tmp_path, end=4)
    manifest = json.loads((bundle / "manifest.json").read_text())
    assert manifest["range"] == {"start": 0, "end": 4} and manifest["checkpoint"]["size"] >= 7
    assert "redactions.jsonl" in manifest["files"]
    carried = [json.loads(x) for x in (bundle / "redactions.jsonl").read_text().splitlines()]
    assert [(r["seq"], r["kind"]) for r in carried] == [(6, "redaction")]
    files = [json.loads(x)["file"] for x in (bundle / "proofs.jsonl").read_text().splitlines()]
    assert files == ["redactions.jsonl", "entries.jsonl"]
    report, code, out = _both(bundle, jwks)
    assert report["findings"] == [] and report["outcome"] == "unverified", report["findings"]
    assert sorted((a["seq"], a["reason"]) for a in report["abstentions"]) == [
        (2, "redacted"), (2, "redacted")]
    assert code == 3 and "payload_missing" not in out, out


def test_a_filtered_export_without_the_redaction_verifies(db_url, tmp_path):
    bundle, jwks = _redacted_bundle(db_url, tmp_path, kind="result")
    report, code, out = _both(bundle, jwks)
    assert report["findings"] == [] and code == 3, (report["findings"], out)
    assert [a["reason"] for a in report["abstentions"]] == ["redacted", "redacted"]


def test_a_bundle_without_its_redactions_fails_in_both(sqlite_url, tmp_path):
    """Withholding the carried redaction (and re-listing the files) cannot hide an
    erasure: the payloads are missing again; a row of another kind there is a finding."""
    from tests.verify.test_verify_bundle_checks import resign

    bundle, jwks = _redacted_bundle(sqlite_url, tmp_path, end=4)
    keys = jwks.parent
    (bundle / "redactions.jsonl").write_bytes(b"")
    proofs = bundle / "proofs.jsonl"
    proofs.write_text("".join(x for x in proofs.read_text().splitlines(keepends=True)
                              if '"redactions.jsonl"' not in x))
    resign(bundle, keys)
    report, code, out = _both(bundle, jwks)
    assert "payload_missing" in {f["code"] for f in report["findings"]}
    assert code == 1 and "payload_missing" in out


def test_an_export_of_a_ledger_without_erasures_has_the_six_files(sqlite_url, tmp_path):
    with Ledger.init(sqlite_url, clock=FixedClock(T0, 1000), origin=ORIGIN) as L:
        L.append_many([bench_submission(i, random.Random(i)) for i in range(3)])
        ring = Keyring.load(tmp_path / "keys")
        ring.generate(ORIGIN, T0)
        L.export(tmp_path / "b", ExportOptions(keys=ring.path))
    manifest = json.loads((tmp_path / "b" / "manifest.json").read_text())
    assert sorted(manifest["files"]) == sorted(
        ["entries.jsonl", "entries.csv", "key_events.jsonl", "proofs.jsonl", "checkpoint.txt",
         "jwks.json"])
    assert not (tmp_path / "b" / "redactions.jsonl").exists()


def _rewrite(bundle: Path, change) -> None:
    path = bundle / "entries.jsonl"
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    change(lines)
    path.write_text("".join(json.dumps(x, ensure_ascii=False, separators=(",", ":"),
                                       sort_keys=True) + "\n" for x in lines))


def _row_codes(report: dict, seq: int) -> set[str]:
    return {f["code"] for f in report["findings"] if f.get("seq") == seq}


def test_an_erased_payload_without_its_marker_fails_in_both_verifiers(sqlite_url, tmp_path):
    bundle, jwks = _redacted_bundle(sqlite_url, tmp_path)
    _rewrite(bundle, lambda lines: lines[2]["payloads"]["query"].pop("redacted_by"))
    report = verify_export(bundle, jwks)
    assert "redaction_marker_invalid" in _row_codes(report, 2), report["findings"]
    assert report["outcome"] == "failed" and report["summary"]["failed"] >= 1
    code, out = _script(bundle, jwks)
    assert code == 1 and "redaction_marker_invalid" in out, out


def _spare_bits_set(text: str) -> str:
    """The same bytes in non-canonical base64: the unused low bits of the last character."""
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
    body = text.rstrip("=")
    return body[:-1] + alphabet[alphabet.index(body[-1]) | 1] + text[len(body):]


def test_a_non_canonical_salt_is_a_finding_in_both_verifiers(sqlite_url, tmp_path):
    bundle, jwks = _redacted_bundle(sqlite_url, tmp_path)
    salt = json.loads((bundle / "entries.jsonl").read_text().splitlines()[0])[
        "payloads"]["result"]["salt_b64"]
    loose = _spare_bits_set(salt)
    assert loose != salt and base64.b64decode(loose) == base64.b64decode(salt)
    _rewrite(bundle, lambda lines: lines[0]["payloads"]["result"].update(salt_b64=loose))
    report = verify_export(bundle, jwks)
    assert "payload_encoding_invalid" in _row_codes(report, 0), report["findings"]
    code, out = _script(bundle, jwks)
    assert code == 1, out
    assert any(f["code"] == "payload_encoding_invalid" and f["seq"] == 0
               for f in json.JSONDecoder().raw_decode(out)[0]["findings"]), out
