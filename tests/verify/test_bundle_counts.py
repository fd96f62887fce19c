"""The row counts of an export-bundle verification (docs/export.md): a row is verified only
when all its checks passed, its interval's proof verified and the checkpoint is signed by a
trusted key; a row whose checks abstained is unverified, never verified; a failed row or a
broken interval is failed.  ``rows = verified + failed + unverified`` always."""

from __future__ import annotations

import base64
import json
import shutil
from collections import Counter
from pathlib import Path

import pytest

import tests.tamper as T
from ledger import Ledger
from ledger.clock import FixedClock
from ledger.core.bundle import ENTRIES, PROOFS, dump_line
from ledger.core.finding import Disposition
from ledger.crypto.keys import Keyring
from ledger.demo.samples import realistic
from ledger.ops.export import ExportOptions
from ledger.verify.bundle.context import RowCounts
from ledger.verify.bundle.proofs import ProofInterval, settle
from ledger.verify.export import verify_export

ORIGIN = "test.ledger/counts"
ATTESTED = 3
ROWS = 10 + ATTESTED + 5 + 1  # results, attested results, results, one key event


@pytest.fixture(scope="module")
def bundle(tmp_path_factory) -> dict[str, Path]:
    tmp = tmp_path_factory.mktemp("counts")
    clock = FixedClock(T.FIXTURE_TIME_US)
    with Ledger.init(f"sqlite:///{tmp / 'ledger.db'}", clock=clock, origin=ORIGIN) as led:
        assert all(r.ok for r in led.append_many(realistic(10)))
        led.trust_issuer(T.ISSUER, T.JWKS, reason="test")
        subs = [T.signed_sub(i, T.FIXTURE_TIME_US) for i in range(ATTESTED)]
        assert all(r.ok for r in led.append_many(subs + realistic(5, start=100)))
        ring = Keyring.load(tmp / "keys")
        ring.generate(ORIGIN, T.FIXTURE_TIME_US)
        led.export(tmp / "b", ExportOptions(keys=ring.path))
    return {"dir": tmp / "b", "jwks": ring.path / "jwks.json", "tmp": tmp}


def _summary(report: dict) -> tuple[int, int, int, int]:
    s = report["summary"]
    assert s["rows"] == s["verified"] + s["failed"] + s["unverified"]
    return s["rows"], s["verified"], s["failed"], s["unverified"]


def _copy(bundle: dict[str, Path], name: str) -> Path:
    dst = bundle["tmp"] / name
    if dst.exists():
        shutil.rmtree(dst)
    shutil.copytree(bundle["dir"], dst)
    return dst


def _rewrite_lines(path: Path, change) -> None:
    lines = [json.loads(x) for x in path.read_text("utf-8").splitlines()]
    path.write_bytes(b"".join(dump_line(change(o) or o) for o in lines))


def test_a_clean_bundle_verifies_every_row(bundle):
    report = verify_export(bundle["dir"], bundle["jwks"])
    assert report["findings"] == [] and report["abstentions"] == []
    assert _summary(report) == (ROWS, ROWS, 0, 0)
    assert report["summary"]["key_events"] == 1 and report["outcome"] == "passed"


def test_rows_with_unchecked_attestations_are_unverified_not_verified(bundle):
    report = verify_export(bundle["dir"], bundle["jwks"], check_attestations=False)
    assert report["findings"] == []
    assert Counter(a["reason"] for a in report["abstentions"]) == {"no_trust_store": ATTESTED}
    assert _summary(report) == (ROWS, ROWS - ATTESTED, 0, ATTESTED)
    assert report["outcome"] == "unverified"


def test_without_trusted_keys_no_row_is_verified(bundle):
    report = verify_export(bundle["dir"], None)
    assert _summary(report) == (ROWS, 0, 0, ROWS)
    assert {a["reason"] for a in report["abstentions"]} == {"untrusted_key"}
    report = verify_export(bundle["dir"], None, check_attestations=False)
    assert _summary(report) == (ROWS, 0, 0, ROWS)


def test_a_modified_row_fails_alone_and_abstained_rows_stay_unverified(bundle):
    dst = _copy(bundle, "modified")
    target = 4  # an unattested result row

    def change(o):
        if o["seq"] == target:
            p = o["payloads"]["result"]
            p["data_b64"] = base64.b64encode(base64.b64decode(p["data_b64"]) + b" ").decode()
    _rewrite_lines(dst / ENTRIES, change)
    report = verify_export(dst, bundle["jwks"], check_attestations=False)
    row_codes = {(f["code"], f["seq"]) for f in report["findings"] if f["seq"] is not None}
    assert row_codes == {("payload_digest_mismatch", target)}
    assert _summary(report) == (ROWS, ROWS - ATTESTED - 1, 1, ATTESTED)


def test_a_broken_interval_fails_all_its_rows(bundle):
    dst = _copy(bundle, "broken")

    def change(o):
        if o["file"] == ENTRIES:
            o["inclusion_path"][0] = "00" * 32
    _rewrite_lines(dst / PROOFS, change)
    report = verify_export(dst, bundle["jwks"], check_attestations=False)
    assert "inclusion_invalid" in {f["code"] for f in report["findings"]}
    assert _summary(report) == (ROWS, 0, ROWS, 0)  # the key event's interval is elsewhere
    assert report["summary"]["key_events"] == 1


def _interval(**counts: int) -> ProofInterval:
    iv = ProofInterval(0, sum(counts.values()) - 1, [], 1)
    iv.counts.update({Disposition(k): v for k, v in counts.items()})
    return iv


def test_settle_counts_each_disposition_once():
    iv = _interval(verified=5, abstained=2, failed=1)
    assert settle(iv, Disposition.VERIFIED) == RowCounts(verified=5, failed=1, unverified=2)
    assert settle(iv, Disposition.ABSTAINED) == RowCounts(failed=1, unverified=7)
    assert settle(iv, None) == RowCounts(failed=8)
    iv.broken = True
    assert settle(iv, Disposition.VERIFIED) == RowCounts(failed=8)
