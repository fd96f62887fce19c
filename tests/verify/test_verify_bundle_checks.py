"""scripts/verify_bundle.py is level with ``ledger verify-export`` on the checks a
key-holding operator cannot get around: a bundle rewritten and re-signed with the ledger's
own key (cosignatures removed, renamed, corrupted or made with a swapped witness key, a
reordered proofs.jsonl, an edited entries.csv or jwks.json, non-canonical base64 in the
manifest JWT or a note signature, a narrowed time filter) fails in both; and the script
judges attestations with the ledger's codes (docs/format-attestation.md)."""

from __future__ import annotations

import base64
import contextlib
import hashlib
import importlib.util
import io
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

import tests.tamper as T
from ledger import Ledger
from ledger.clock import FixedClock
from ledger.core.bundle import dump_line
from ledger.core.cosignature import parse_vkey
from ledger.core.note import parse_note
from ledger.crypto.cosign import cosign, cosigner_vkey
from ledger.crypto.jws import sign_manifest
from ledger.crypto.keys import Keyring
from ledger.crypto.trust import TrustStore, check_attestation, jwk_thumbprint
from ledger.demo.samples import realistic
from ledger.ops.export import ExportOptions, signer_from_keyring
from ledger.store.anchors import COSIGNATURE, AnchorRow, add_anchor
from ledger.verify.anchor import AnchorPolicy
from ledger.verify.export import EXIT_CODES, verify_export
from ledger.verify.export_anchor import apply_export_anchors

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "verify_bundle.py"
ORIGIN = "test.ledger/anchored"
T0 = T.FIXTURE_TIME_US


def _load() -> Any:
    spec = importlib.util.spec_from_file_location("verify_bundle_checks", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


VB = _load()


def script(bundle: Path, *args: Any) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = VB.main([str(bundle), *map(str, args), "--json"])
    return code, out.getvalue() + err.getvalue()


def ledger_code(bundle: Path, jwks: Path, witnesses: list | None = None,
                quorum: int = 0) -> tuple[int, set[str]]:
    report = verify_export(bundle, jwks)
    if witnesses is not None:
        keys = tuple(parse_vkey(cosigner_vkey(n, k)) for n, k in witnesses)
        apply_export_anchors(bundle, report, AnchorPolicy(keys, quorum))
    return EXIT_CODES[report["outcome"]], {f["code"] for f in report["findings"]}


@pytest.fixture
def anchored(db_url, tmp_path):
    """A ledger with a trusted issuer, attested rows and a checkpoint cosigned by two
    witnesses; its export; the witness keys and their vkey files."""
    witnesses = [(f"witness.example/w{i}", Ed25519PrivateKey.generate()) for i in (1, 2)]
    ring = Keyring.load(tmp_path / "keys")
    ring.generate(ORIGIN, T0)
    with Ledger.init(db_url, clock=FixedClock(T0, 1000), origin=ORIGIN) as led:
        assert all(r.ok for r in led.append_many(realistic(6)))
        led.trust_issuer(T.ISSUER, T.JWKS, reason="test")
        assert all(r.ok for r in led.append_many([T.signed_sub(i, T0) for i in range(2)]))
        note = led.checkpoint(ring)
        text = parse_note(note).text
        size = int(text.split("\n")[1])
        for i, (name, key) in enumerate(witnesses):
            add_anchor(led.engine, AnchorRow(size, COSIGNATURE, name,
                                             cosign(text, name, key, 1_790_000_000 + i),
                                             None, T0))
        led.export(tmp_path / "bundle", ExportOptions(keys=ring.path))
    files = []
    for i, (name, key) in enumerate(witnesses):
        files.append(tmp_path / f"w{i}.vkey")
        files[-1].write_text(cosigner_vkey(name, key) + "\n")
    return {"bundle": tmp_path / "bundle", "jwks": ring.path / "jwks.json", "keys": ring.path,
            "witnesses": witnesses, "vkeys": files, "tmp": tmp_path}


def resign(bundle: Path, keys: Path, **manifest: Any) -> None:
    """What the holder of the ledger key can do: sign the bundle's files as they are now
    (manifest members replaced by ``manifest``)."""
    m = json.loads((bundle / "manifest.json").read_bytes())
    m.update(manifest)
    for name in m["files"]:
        data = (bundle / name).read_bytes()
        m["files"][name] = {"sha256": "sha256:" + hashlib.sha256(data).hexdigest(),
                            "bytes": len(data)}
    body = dump_line(m)
    (bundle / "manifest.json").write_bytes(body)
    signer = signer_from_keyring(Keyring.load(keys), m["origin"])
    claims = {"iss": m["origin"], "sub": m["ledger_id"], "iat": T0 // 1_000_000,
              "format": "ledger-export/1",
              "manifest_sha256": "sha256:" + hashlib.sha256(body).hexdigest()}
    token = sign_manifest(claims, signer.private_key, signer.kid)
    (bundle / "manifest.jwt").write_bytes(token.encode("ascii"))


def copy(a: dict[str, Any], name: str) -> Path:
    dst = a["tmp"] / name
    shutil.copytree(a["bundle"], dst)
    return dst


def edit_checkpoint(bundle: Path, change: Any) -> None:
    lines = (bundle / "checkpoint.txt").read_text("utf-8").splitlines(keepends=True)
    (bundle / "checkpoint.txt").write_text("".join(change(lines)), "utf-8")


def witness_args(a: dict[str, Any], quorum: int | None = None) -> list[Any]:
    args: list[Any] = ["--jwks", a["jwks"]]
    for f in a["vkeys"]:
        args += ["--witness-key", f]
    return args + (["--quorum", quorum] if quorum is not None else [])


def _flip_last_sig_byte(line: str) -> str:
    name, blob = line[2:].rstrip("\n").split(" ")
    raw = bytearray(base64.b64decode(blob))
    raw[-1] ^= 1
    return f"\u2014 {name} {base64.b64encode(bytes(raw)).decode()}\n"


def test_the_witness_quorum_is_checked_on_a_resigned_bundle(anchored):
    a = anchored
    code, out = script(a["bundle"], *witness_args(a))
    assert code == 0 == ledger_code(a["bundle"], a["jwks"], a["witnesses"], 2)[0], out
    impostor = Ed25519PrivateKey.generate()
    text = parse_note((a["bundle"] / "checkpoint.txt").read_text("utf-8")).text
    cases = {
        "removed": lambda ls: [x for x in ls if "witness.example/w2" not in x],
        "renamed": lambda ls: [x.replace("witness.example/w2", "witness.example/w3")
                               for x in ls],
        "corrupted": lambda ls: [_flip_last_sig_byte(x) if "witness.example/w2" in x else x
                                 for x in ls],
        "swapped key": lambda ls: [x for x in ls if "witness.example/w2" not in x]
        + [cosign(text, "witness.example/w2", impostor, 1_790_000_005)],
    }
    for what, change in cases.items():
        b = copy(a, what.replace(" ", "-"))
        edit_checkpoint(b, change)
        resign(b, a["keys"])
        assert script(b, "--jwks", a["jwks"])[0] == 0  # signed by the ledger key: fine
        code, out = script(b, *witness_args(a))
        ledger, codes = ledger_code(b, a["jwks"], a["witnesses"], 2)
        assert code == 1 == ledger, (what, out)
        assert "witness_quorum_not_met" in out and "witness_quorum_not_met" in codes, what
        if what == "corrupted":
            assert "cosignature_invalid" in out and "cosignature_invalid" in codes
        # one witness still cosigned: a quorum of one is met (a bad line stays a finding)
        want = 1 if what == "corrupted" else 0
        assert script(b, *witness_args(a, 1))[0] == want == \
            ledger_code(b, a["jwks"], a["witnesses"], 1)[0], what


def test_witness_options_refuse_bad_keys_and_quorums(anchored, tmp_path):
    a = anchored
    bad = tmp_path / "bad.vkey"
    bad.write_text("witness.example/w1+00000000+AAAA\n")
    code, out = script(a["bundle"], "--witness-key", bad)
    assert code == 2 and "--witness-key" in out
    code, out = script(a["bundle"], *witness_args(a, 3))
    assert code == 2 and "--quorum" in out
    # the same key given twice is one witness: the default quorum stays reachable
    code, out = script(a["bundle"], *witness_args(a), "--witness-key", a["vkeys"][0])
    assert code == 0, out


def test_a_reordered_proofs_file_fails_in_both(anchored):
    a = anchored
    b = copy(a, "reordered")
    lines = (b / "proofs.jsonl").read_bytes().splitlines(keepends=True)
    assert [json.loads(x)["file"] for x in lines] == ["key_events.jsonl", "entries.jsonl"]
    (b / "proofs.jsonl").write_bytes(b"".join(reversed(lines)))
    resign(b, a["keys"])
    code, out = script(b, "--jwks", a["jwks"])
    assert code == 1 == ledger_code(b, a["jwks"])[0], out
    assert "proof_out_of_order" in out


def test_an_edited_csv_view_fails_in_both(anchored):
    a = anchored
    b = copy(a, "csv")
    data = (b / "entries.csv").read_bytes()
    (b / "entries.csv").write_bytes(data.replace(b",VERIFIED,", b",BLOCKED,", 1))
    resign(b, a["keys"])
    code, out = script(b, "--jwks", a["jwks"])
    ledger, codes = ledger_code(b, a["jwks"])
    assert code == 1 == ledger and "csv_view_mismatch" in out and "csv_view_mismatch" in codes


def test_a_malformed_jwks_fails_in_both(anchored):
    a = anchored
    b = copy(a, "jwks")
    doc = json.loads((b / "jwks.json").read_text())
    doc["keys"].append({"kty": "EC", "kid": "not-ed25519"})
    (b / "jwks.json").write_text(json.dumps(doc))
    resign(b, a["keys"])
    code, out = script(b, "--jwks", a["jwks"])
    ledger, codes = ledger_code(b, a["jwks"])
    assert code == 1 == ledger and "jwks_malformed" in out and "jwks_malformed" in codes


def _noncanonical(b64: str) -> str:
    """The same bytes with the unused low bits of the last character set."""
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
    alphabet += "-_" if "=" not in b64 and "+" not in b64 and "/" not in b64 else "+/"
    body = b64.rstrip("=")
    last = alphabet.index(body[-1])
    return body[:-1] + alphabet[last | 1] + b64[len(body):]


def test_non_canonical_base64_fails_in_both(anchored):
    a = anchored
    b = copy(a, "jws")  # manifest.jwt is not a listed file: no re-signing needed
    head, claims, sig = (b / "manifest.jwt").read_text().split(".")
    assert len(sig) % 4 == 2  # 64 bytes: the last character has 4 unused bits
    (b / "manifest.jwt").write_text(f"{head}.{claims}.{_noncanonical(sig)}")
    code, out = script(b, "--jwks", a["jwks"])
    ledger, codes = ledger_code(b, a["jwks"])
    assert code == 1 == ledger and "manifest_jwt_malformed" in codes, out
    b = copy(a, "note")
    edit_checkpoint(b, lambda ls: [
        x[:x.rindex(" ") + 1] + _noncanonical(x[x.rindex(" ") + 1:-1]) + "\n"
        if "witness.example/w1" in x else x for x in ls])
    resign(b, a["keys"])
    code, out = script(b, "--jwks", a["jwks"])
    ledger, codes = ledger_code(b, a["jwks"])
    assert code == 1 == ledger and "checkpoint_malformed" in codes, out


def test_a_narrowed_time_filter_fails_in_both(anchored):
    a = anchored
    b = copy(a, "since")
    resign(b, a["keys"], filters={"since": "2100-01-01T00:00:00.000000Z"})
    code, out = script(b, "--jwks", a["jwks"])
    ledger, codes = ledger_code(b, a["jwks"])
    assert code == 1 == ledger and "entry_outside_filter" in out
    assert "entry_outside_filter" in codes


# -- attestations: the script's judge against the ledger's, code for code ------------------
ROW_ENGINE, PROOF = "logic", "sha256:" + "ab" * 32
OTHER = T.new_key()


def _token(**kw: Any) -> str:
    header = kw.pop("header", None)
    key = kw.pop("key", None)
    kid = kw.pop("kid", T.KID)
    claims = T.claims_for(PROOF, iat=T0 // 1_000_000, query="q", **kw)
    return T.sign(claims, key=key, kid=kid, header=header)


def _mangled(claims_change: Any) -> str:
    claims = T.claims_for(PROOF, iat=T0 // 1_000_000, query="q")
    claims_change(claims)
    return T.sign(claims)


TOKENS = {
    "valid": _token(),
    "engine": _token(engine="math"),
    "status": _token(status="BLOCKED"),
    "proof": T.sign(T.claims_for("sha256:" + "cd" * 32, iat=T0 // 1_000_000, query="q")),
    "query": T.sign(T.claims_for(PROOF, iat=T0 // 1_000_000, query="other")),
    "expired": _token(lifetime=60),
    "future": T.sign(T.claims_for(PROOF, iat=T0 // 1_000_000 + 3600, query="q")),
    "typ": _token(header={"typ": "JWT"}),
    "crit": _token(header={"crit": ["x"]}),
    "kid": _token(kid="did:qwed:node:test#unknown"),
    "signature": _token(key=OTHER),
    "unknown issuer": _token(iss="did:other"),
    "issuer mismatch": T.sign(T.claims_for(PROOF, iat=T0 // 1_000_000, query="q",
                                           iss="did:other"), key=OTHER, kid="did:other#k"),
    "version": _mangled(lambda c: c["qwed"].update(version="2.0")),
    "sub": _mangled(lambda c: c.update(sub="something else")),
    "no jti": _mangled(lambda c: c.pop("jti")),
    "float iat": _mangled(lambda c: c.update(iat=c["iat"] + 0.5)),
    "malformed": "a.b",
}


def test_the_script_judges_attestations_with_the_ledgers_codes():
    jwk = T.JWKS["keys"][0]
    event = {"action": "trust", "issuer": T.ISSUER, "kid": T.KID, "thumbprint":
             jwk_thumbprint(jwk), "jwk": {k: jwk[k] for k in ("kty", "crv", "x", "y")}}
    other = {"action": "trust", "issuer": "did:another", "kid": "did:other#k", "thumbprint":
             jwk_thumbprint(T.public_jwk(OTHER)), "jwk": T.public_jwk(OTHER)}
    store, trust = TrustStore(), VB.Trust()
    for seq, ev in ((0, event), (1, other)):
        store.apply(seq, ev)
        trust.apply(seq, ev)
    row = {"proof_ref": PROOF, "query": "q", "admission": None, "engine": ROW_ENGINE}
    got, want = {}, {}
    for name, token in TOKENS.items():
        r = check_attestation(token, store=store, seq=5, recorded_at_us=T0 + 1000,
                              proof_ref=PROOF, query="q", admission=None, engine=ROW_ENGINE)
        want[name] = (r.disposition, r.code)
        got[name] = trust.judge(token, 5, T0 + 1000, row)
    assert got == want
    assert want["engine"] == ("failed", "attestation_engine_mismatch")
    assert want["issuer mismatch"] == ("failed", "attestation_issuer_mismatch")
