"""Exports and offline verification (docs/export.md), on SQLite and PostgreSQL: every
bundle file and field, filtered exports proven by inclusion proofs, honest exit codes,
every corruption class of every file named by a finding, constant memory."""

from __future__ import annotations

import ast
import base64
import csv
import io
import itertools
import json
import shutil
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import jwt
import pytest
from click.testing import CliRunner
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

import tests.tamper as T
from ledger import Ledger
from ledger.cli.main import cli
from ledger.clock import FixedClock
from ledger.core.bundle import CSV_HEADER, LISTED_FILES, MANIFEST, MANIFEST_JWT
from ledger.core.entry import PAYLOAD_MAP_V2
from ledger.core.merkle import leaf_hash, verify_inclusion
from ledger.crypto.keys import Keyring, KeyringError
from ledger.demo.samples import realistic
from ledger.errors import UsageError
from ledger.ops.checkpoint import latest_checkpoint
from ledger.ops.export import ExportOptions, export_bundle, signer_from_keyring
from ledger.ops.query import make_filters
from ledger.verify.export import verify_export
from tests.conftest import ENGINES, engine_url
from tests.ops.test_query import HOSTILE, hostile_sub, leaky_subs

ROOT = Path(__file__).resolve().parents[2]
T0 = T.FIXTURE_TIME_US
MINUTE = 60_000_000
ORIGIN = "test.ledger/export"
ALL_FILES = sorted(LISTED_FILES + (MANIFEST, MANIFEST_JWT))
JSONL = ("entries.jsonl", "key_events.jsonl", "proofs.jsonl")


def fill(led: Ledger, clock: FixedClock) -> None:
    """Results, two trusted issuers (two key events in separate batches), attested rows
    by both, hostile and leaky rows."""
    assert all(r.ok for r in led.append_many(realistic(30), producer="p1"))
    clock.advance(MINUTE)
    led.trust_issuer(T.ISSUER, T.JWKS, reason="test")
    clock.advance(MINUTE)
    subs = [T.signed_sub(i, T0) for i in range(4)] + leaky_subs()
    subs += [hostile_sub(i, h) for i, h in enumerate(HOSTILE[:8])]
    assert all(r.ok for r in led.append_many(subs, producer="p2"))
    clock.advance(MINUTE)
    other = T.new_key()
    led.trust_issuer("did:other", T.jwks_of(other, "did:other#k1"))
    clock.advance(MINUTE)
    subs = realistic(20, start=200) + [T.signed_sub(50, T0, key=other, kid="did:other#k1",
                                                    iss="did:other")]
    assert all(r.ok for r in led.append_many(subs, producer="p1"))


@pytest.fixture(scope="module", params=ENGINES)
def source(request, tmp_path_factory):
    """(url, keyring dir, full bundle, filtered bundle, every-entry bundle) per engine.

    Module-scoped (built once per engine), so it takes its database from ``engine_url``
    rather than the function-scoped ``db_url``."""
    tmp = tmp_path_factory.mktemp(request.param)
    url = engine_url(request.param, request, tmp)
    clock = FixedClock(T0)
    with Ledger.init(url, clock=clock, origin=ORIGIN) as led:
        fill(led, clock)
        ring = Keyring.load(tmp / "keys")
        ring.generate(ORIGIN, T0)
        led.export(tmp / "full", ExportOptions(keys=ring.path))
        led.export(tmp / "filtered", ExportOptions(
            keys=ring.path, filters=make_filters(engine=["math", "logic"], status="VERIFIED")))
        led.export(tmp / "every", ExportOptions(keys=ring.path, proofs="every",
                                                filters=make_filters(start=10, end=40)))
    yield {"url": url, "keys": ring.path, "jwks": ring.path / "jwks.json", "tmp": tmp,
           "full": tmp / "full", "filtered": tmp / "filtered", "every": tmp / "every"}


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in path.read_text("utf-8").splitlines()]


def passes(bundle: Path, jwks: Path | None) -> dict[str, Any]:
    report = verify_export(bundle, jwks)
    assert report["findings"] == [], report["findings"][:3]
    return report


# -- good bundles ----------------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["full", "filtered", "every"])
def test_bundles_verify_with_trusted_keys_and_abstain_without(source, kind):
    report = passes(source[kind], source["jwks"])
    s = report["summary"]
    assert report["outcome"] == "passed" and s["rows"] == s["verified"] > 0
    assert report["signatures"] == {"manifest": "verified", "checkpoint": "verified"}
    report = passes(source[kind], None)
    assert report["outcome"] == "unverified" and report["summary"]["verified"] == 0
    assert {a["reason"] for a in report["abstentions"]} == {"untrusted_key"}


def test_every_field_of_a_full_bundle_is_the_ledger_s(source):
    bundle = source["full"]
    manifest = json.loads((bundle / MANIFEST).read_bytes())
    with Ledger.open(source["url"]) as led:
        rows = list(led.iter_entries())
        cp = latest_checkpoint(led)
        with led.engine.connect() as conn:
            from ledger.store.entries import get_payloads

            stored = {r.seq: get_payloads(conn, r.seq) for r in rows}  # by (seq, slot)
    got = lines(bundle / "entries.jsonl")
    assert [g["seq"] for g in got] == [r.seq for r in rows]
    for g, r in zip(got, rows):
        assert g["envelope"].encode() == bytes(r.envelope) and g["kind"] == r.kind
        assert g["recorded_at_us"] == r.recorded_at
        for k in ("body_hash", "prev_hash", "entry_hash"):
            assert g[k] == "sha256:" + bytes(getattr(r, k)).hex()
        env = json.loads(r.envelope)
        assert {n: p["digest"] for n, p in g["payloads"].items()} == {
            n: d for n, d in env["payloads"].items() if d}
        for name, p in g["payloads"].items():
            slot = PAYLOAD_MAP_V2[r.kind][name]
            assert base64.b64decode(p["data_b64"]) == stored[r.seq][slot].data
            if "salt_b64" in p:  # format v2: the salt of the commitment travels with it
                assert base64.b64decode(p["salt_b64"]) == stored[r.seq][slot].salt
    events = lines(bundle / "key_events.jsonl")
    assert [e["seq"] for e in events] == [r.seq for r in rows if r.kind == "key_event"]
    assert (bundle / "checkpoint.txt").read_text() == cp.note
    assert manifest["checkpoint"] == {"size": cp.size, "root_hash": cp.root_hash.hex()}
    assert manifest["range"] == {"start": 0, "end": len(rows)} and manifest["contiguous"]
    assert manifest["counts"]["entries"] == len(rows)
    assert manifest["counts"]["by_status"]["VERIFIED"] == sum(r.status == "VERIFIED"
                                                              for r in rows)
    assert manifest["counts"]["by_kind"] == {"result": len(rows) - 2, "key_event": 2}
    assert set(manifest["files"]) == set(LISTED_FILES)
    claims = jwt.decode((bundle / MANIFEST_JWT).read_text(), options={"verify_signature": False})
    assert claims["sub"] == manifest["ledger_id"] and claims["iss"] == ORIGIN
    header = jwt.get_unverified_header((bundle / MANIFEST_JWT).read_text())
    assert header["alg"] == "EdDSA" and header["kid"] == manifest["signing_kid"]
    table = list(csv.reader(io.StringIO((bundle / "entries.csv").read_text("utf-8"))))
    assert table[0] == CSV_HEADER and len(table) == len(rows) + 1
    assert {r[CSV_HEADER.index("agent_message")] for r in table[1:]} >= {"Claim verified"}
    assert all(not c.startswith(("=", "+", "-", "@")) for r in table for c in r)
    proofs = lines(bundle / "proofs.jsonl")
    assert [(p["file"], p["first_seq"], p["seq"]) for p in proofs] == [
        ("key_events.jsonl", events[0]["seq"], events[0]["seq"]),
        ("key_events.jsonl", events[1]["seq"], events[1]["seq"]),
        ("entries.jsonl", 0, len(rows) - 1)]
    last = bytes.fromhex(got[-1]["entry_hash"][7:])
    verify_inclusion(len(rows) - 1, cp.size, leaf_hash(last),
                     [bytes.fromhex(h) for h in proofs[-1]["inclusion_path"]], cp.root_hash)


def test_filtered_export_has_one_proof_per_run_and_only_matching_rows(source):
    bundle = source["filtered"]
    got = lines(bundle / "entries.jsonl")
    with Ledger.open(source["url"]) as led:
        want = [r.seq for r in led.iter_entries()
                if r.engine in ("math", "logic") and r.status == "VERIFIED"]
    assert [g["seq"] for g in got] == want
    runs = sum(1 for a, b in itertools.pairwise(want) if b != a + 1) + 1
    proofs = [p for p in lines(bundle / "proofs.jsonl") if p["file"] == "entries.jsonl"]
    assert len(proofs) == runs > 1
    manifest = json.loads((bundle / MANIFEST).read_bytes())
    assert manifest["filters"] == {"engine": ["math", "logic"], "status": ["VERIFIED"]}
    assert not manifest["contiguous"]
    every = lines(source["every"] / "proofs.jsonl")
    assert [p["seq"] for p in every if p["file"] == "entries.jsonl"] == list(range(10, 40))


def test_attestations_are_judged_from_the_bundle_key_events(source):
    report = verify_export(source["full"], source["jwks"])
    assert report["attestations_checked"] and not report["abstentions"]
    report = verify_export(source["full"], source["jwks"], check_attestations=False)
    assert report["outcome"] == "unverified"
    assert {a["reason"] for a in report["abstentions"]} == {"no_trust_store"}


def test_export_usage_errors(source, tmp_path):
    with Ledger.open(source["url"]) as led:
        with pytest.raises(UsageError):
            led.export(source["full"], ExportOptions(keys=source["keys"]))  # not empty
        with pytest.raises(KeyringError):
            led.export(tmp_path / "b", ExportOptions(keys=tmp_path / "no-keys"))
        with pytest.raises(UsageError):
            led.export(tmp_path / "c", ExportOptions(keys=source["keys"], proofs="some"))
        m = led.export(tmp_path / "empty", ExportOptions(
            keys=source["keys"], filters=make_filters(subject="no such subject")))
    assert m["counts"]["entries"] == 0
    passes(tmp_path / "empty", source["jwks"])


def test_export_with_a_pem_key_signs_a_checkpoint_its_jwks_verifies(source, tmp_path):
    from cryptography.hazmat.primitives import serialization

    key = Ed25519PrivateKey.generate()
    pem = tmp_path / "k.pem"
    pem.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                      serialization.PrivateFormat.PKCS8,
                                      serialization.NoEncryption()))
    with Ledger.open(source["url"]) as led:
        led.export(tmp_path / "b", ExportOptions(key_file=pem,
                                                filters=make_filters(kind="key_event")))
    passes(tmp_path / "b", tmp_path / "b" / "jwks.json")
    report = verify_export(tmp_path / "b", source["jwks"])  # other keys: not the ledger's
    assert {f["code"] for f in report["findings"]} == {"manifest_signature_invalid",
                                                       "checkpoint_signature_invalid"}


# -- the CLI ------------------------------------------------------------------------------------
def test_cli_export_and_verify_export_exit_codes(source, tmp_path):
    runner = CliRunner()
    out = tmp_path / "b"
    res = runner.invoke(cli, ["--db", source["url"], "export", "--out", str(out), "--keys",
                              str(source["keys"]), "--status", "BLOCKED", "--since",
                              "2026-01-01T00:00:00Z"])
    assert res.exit_code == 0, res.output
    assert "entries" in res.stdout
    res = runner.invoke(cli, ["verify-export", str(out), "--jwks", str(source["jwks"]),
                              "--json-report", "-"])
    assert res.exit_code == 0 and json.loads(res.stdout)["outcome"] == "passed"
    assert "verify-export complete" in res.stderr
    assert runner.invoke(cli, ["verify-export", str(out)]).exit_code == 3
    (out / "entries.csv").write_text("seq\n")
    res = runner.invoke(cli, ["verify-export", str(out), "--jwks", str(source["jwks"])])
    assert res.exit_code == 1 and "entries.csv" in res.stderr
    assert runner.invoke(cli, ["verify-export", str(tmp_path / "nope")]).exit_code == 2
    res = runner.invoke(cli, ["--db", source["url"], "export", "--out", str(out), "--keys",
                              str(source["keys"])])
    assert res.exit_code == 2


# -- corruption: every file, every class, named by a finding ----------------------------------
def _lines(data: bytes) -> list[bytes]:
    return data.splitlines(keepends=True)


def flip(data: bytes) -> bytes:
    i = len(data) // 2
    return data[:i] + bytes([data[i] ^ 0x01]) + data[i + 1:]


def truncate(data: bytes) -> bytes:
    return data[:len(data) // 2]


def drop_line(data: bytes) -> bytes:
    ls = _lines(data)
    del ls[len(ls) // 2]
    return b"".join(ls)


def reorder(data: bytes) -> bytes:
    ls = _lines(data)
    if len(ls) < 2:  # one line: reorder its two halves instead
        half = len(data) // 2
        return data[half:] + data[:half]
    k = max(0, len(ls) // 2 - 1)
    ls[k], ls[k + 1] = ls[k + 1], ls[k]
    return b"".join(ls)


def corrupt(bundle: Path, tmp: Path, name: str, how: Any) -> Path:
    dst = tmp / f"c-{uuid.uuid4().hex[:6]}"
    shutil.copytree(bundle, dst)
    data = (dst / name).read_bytes()
    (dst / name).write_bytes(how(data))
    return dst


@pytest.mark.parametrize("how", [flip, truncate, drop_line, reorder])
@pytest.mark.parametrize("name", ALL_FILES)
def test_every_corruption_of_every_file_fails_naming_it(source, tmp_path, name, how):
    kinds = ["full", "filtered"] if name == "proofs.jsonl" else ["full"]
    for kind in kinds:
        report = verify_export(corrupt(source[kind], tmp_path, name, how), source["jwks"])
        assert report["outcome"] == "failed"
        named = [f for f in report["findings"] if f["file"] == name]
        assert named, (name, how.__name__, report["findings"][:4])
        if name in JSONL and not (name == "proofs.jsonl" and how is flip):
            assert any(f["seq"] is not None for f in named), (name, how.__name__, named)


def test_swapped_or_forged_manifest_signatures_fail(source, tmp_path):
    other = tmp_path / "other"
    with Ledger.open(source["url"]) as led:
        led.export(other, ExportOptions(keys=source["keys"],
                                       filters=make_filters(kind="key_event")))
    for token in (
        (other / MANIFEST_JWT).read_bytes(),  # a valid token of another bundle
        (source["full"] / MANIFEST_JWT).read_bytes().rsplit(b".", 1)[0] + b"." +
        (other / MANIFEST_JWT).read_bytes().rsplit(b".", 1)[1],  # its signature only
    ):
        dst = corrupt(source["full"], tmp_path, MANIFEST_JWT, lambda _, t=token: t)
        codes = {f["code"] for f in verify_export(dst, source["jwks"])["findings"]}
        assert codes & {"manifest_digest_mismatch", "manifest_signature_invalid"}
    body = (source["full"] / MANIFEST).read_bytes()
    claims = jwt.decode((source["full"] / MANIFEST_JWT).read_text(),
                        options={"verify_signature": False})
    forged = jwt.encode(claims, Ed25519PrivateKey.generate(), algorithm="EdDSA",
                        headers={"typ": "ledger-export+jwt"}).encode()
    dst = corrupt(source["full"], tmp_path, MANIFEST_JWT, lambda _: forged)
    report = verify_export(dst, source["jwks"])
    assert [f["code"] for f in report["findings"]] == ["manifest_signature_invalid"]
    assert json.loads(body)["ledger_id"] == claims["sub"]


def test_a_missing_file_is_a_deleted_finding(source, tmp_path):
    for name in ALL_FILES:
        dst = corrupt(source["full"], tmp_path, name, lambda d: d)
        (dst / name).unlink()
        report = verify_export(dst, source["jwks"])
        assert any(f["file"] == name and f["code"] == "file_missing"
                   for f in report["findings"]), name


# -- no database, constant memory ---------------------------------------------------------
def test_verify_export_imports_no_store_and_no_sqlalchemy(source):
    tree = ast.parse((ROOT / "ledger/verify/export.py").read_text())
    names = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    names |= {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert not any(n.startswith(("sqlalchemy", "ledger.store", "ledger.facade", "ledger.ops"))
                   for n in names if n and n != "ledger.verify.export"), names
    code = f"""
import importlib.abc, sys, types
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.split(".")[0] in ("sqlalchemy", "psycopg", "alembic") or \\
                name.startswith(("ledger.store", "ledger.facade")):
            raise ImportError("blocked: " + name)
sys.meta_path.insert(0, Block())
pkg = types.ModuleType("ledger"); pkg.__path__ = [{str(ROOT / 'ledger')!r}]
sys.modules["ledger"] = pkg
from ledger.verify.export import verify_export
r = verify_export({str(source['full'])!r}, {str(source['jwks'])!r})
assert r["outcome"] == "passed", r["findings"][:3]
assert not any(m.startswith(("sqlalchemy", "ledger.store")) for m in sys.modules)
print("ok")
"""
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=ROOT, timeout=120, check=False)
    assert res.returncode == 0 and res.stdout.strip() == "ok", res.stderr


@pytest.mark.slow
def test_export_memory_does_not_grow_with_the_export(tmp_path):
    import tracemalloc

    peaks = []
    for n in (2_000, 20_000):
        with Ledger.init(f"sqlite:///{tmp_path / f'm{n}.db'}", origin=ORIGIN) as led:
            for i in range(0, n, 2_000):
                led.append_many(realistic(2_000, start=i))
            ring = Keyring.load(tmp_path / f"keys{n}")
            ring.generate(ORIGIN, 0)
            signer = signer_from_keyring(ring, ORIGIN)
            tracemalloc.start()
            export_bundle(led, tmp_path / f"b{n}", signer, make_filters())
            peaks.append(tracemalloc.get_traced_memory()[1])
            tracemalloc.stop()
    assert peaks[1] < 1.3 * peaks[0] + 512 * 1024, peaks


@pytest.mark.parametrize("text", ['{"a":"x"}', '{"s":"\\"q\\" \\\\ \\u0001 \\n"}', "Zürich 😀 𝔘",
                                  "\u2028\u2029\x7f", "</script>", ""])
def test_the_fast_line_writer_is_the_canonical_line(text):
    from ledger.core.bundle import dump_line, entry_line, entry_record

    payloads = {"result": ("sha256:" + "a" * 64, text.encode(), {"salt_b64": "c2FsdA=="}),
                "meta": ("sha256:" + "b" * 64, None, {"salt_b64": None, "redacted_by": 9}),
                "query": ("sha256:" + "c" * 64, text.encode(), {})}
    args = (7, "result", 1767225600123456, text.encode(), "sha256:" + "1" * 64,
            "sha256:" + "2" * 64, "sha256:" + "3" * 64, payloads)
    assert entry_line(*args) == dump_line(entry_record(*args))


@pytest.mark.parametrize("seq", [0, 2**63 - 1, 2**64, 2**70])  # beyond 64 bits: the std path
def test_both_line_writers_give_the_canonical_line(seq):
    from ledger.core.bundle import _entry_line_std, dump_line, entry_line, entry_record

    payloads = {"result": ("sha256:" + "a" * 64, b"\x00\x1f\"\\\xc3\xa9", {"salt_b64": "c2FsdA=="}),
                "meta": ("sha256:" + "b" * 64, None, {"redacted_by": seq})}
    args = (seq, "result", seq, '{"\u2028":"\U0001f600"}'.encode(), "sha256:" + "1" * 64,
            "sha256:" + "2" * 64, "sha256:" + "3" * 64, payloads)
    want = dump_line(entry_record(*args))
    assert entry_line(*args) == want and _entry_line_std(*args) == want


def test_the_demo_exports_and_verifies_a_bundle(tmp_path):
    from ledger.demo import run_demo

    lines = list(run_demo(tmp_path))
    assert any(line.startswith("exported ") for line in lines)
    verified = [line for line in lines if line.startswith("verify-export complete")]
    assert verified and " 0 failed, 0 unverified" in verified[0], lines[-3:]
    assert verify_export(tmp_path / "export", tmp_path / "ledger-keys" / "jwks.json")[
        "outcome"] == "passed"


@pytest.mark.slow
@pytest.mark.parametrize("source", ["sqlite"], indirect=True)  # the format is engine-free
@pytest.mark.parametrize("mask", [0x01, 0x20])
def test_flipping_any_byte_of_a_small_bundle_fails_naming_the_file_and_seq(source, tmp_path,
                                                                          mask):
    small = tmp_path / "small"
    with Ledger.open(source["url"]) as led:
        led.export(small, ExportOptions(keys=source["keys"],
                                       filters=make_filters(kind="key_event")))
    missed = []
    for name in ALL_FILES:
        data = (small / name).read_bytes()
        for i in range(len(data)):
            (small / name).write_bytes(data[:i] + bytes([data[i] ^ mask]) + data[i + 1:])
            report = verify_export(small, source["jwks"])
            named = [f for f in report["findings"] if f["file"] == name]
            if report["outcome"] != "failed" or not named or name in JSONL and all(
                    f["seq"] is None for f in named):
                missed.append((name, i))
        (small / name).write_bytes(data)
    assert not missed, missed[:10]


def test_a_jwks_with_a_malformed_key_is_a_keyring_error(tmp_path):
    from ledger.crypto.keys import load_public_keys

    path = tmp_path / "jwks.json"
    path.write_text(json.dumps({"keys": [{"kty": "OKP", "crv": "Ed25519", "x": "abcde"}]}))
    with pytest.raises(KeyringError):
        load_public_keys(path)


def test_verify_export_with_a_malformed_key_is_a_bad_jwks_usage_error(source, tmp_path):
    path = tmp_path / "jwks.json"
    path.write_text(json.dumps({"keys": [{"kty": "OKP", "crv": "Ed25519", "x": "abcde"}]}))
    with pytest.raises(KeyringError) as caught:
        verify_export(source["full"], path)
    assert caught.value.code == "bad_jwks" and caught.value.exit_code == 2


def test_cli_verify_export_writes_the_report_file_and_lists_twenty_findings(source, tmp_path):
    bad = corrupt(source["full"], tmp_path, "entries.jsonl",
                  lambda data: data.replace(b'\\"engine\\":\\"', b'\\"engine\\":\\"x'))
    report_file = tmp_path / "report.json"
    res = CliRunner().invoke(cli, ["verify-export", str(bad), "--jwks", str(source["jwks"]),
                                   "--json-report", str(report_file)])
    assert res.exit_code == 1, res.output
    report = json.loads(report_file.read_text("utf-8"))
    assert report["outcome"] == "failed" and len(report["findings"]) > 20
    listed = [ln for ln in res.stderr.splitlines()
              if ln.startswith("  ") and not ln.startswith("  … ")]
    assert len(listed) == 20 and all(": " in ln for ln in listed)
    assert f"… {len(report['findings']) - 20} more in the JSON report" in res.stderr
