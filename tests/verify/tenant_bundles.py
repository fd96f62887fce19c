"""Tenant export bundles (``ledger-export/2``) and their tampered copies, shared by the
verifiers' tests: ``ledger verify-export`` (test_tenant_export.py), scripts/verify_bundle.py
(test_verify_bundle_tenants.py) and the independent verifier written from docs/tenants.md
(test_independent_tenant.py)."""

from __future__ import annotations

import hashlib
import json
import random
import shutil
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ledger.crypto.jws import sign_manifest
from ledger.crypto.keys import Keyring, public_jwk, raw_public
from ledger.demo.samples import math_verified
from ledger.facade import Ledger
from ledger.ops.export import ExportOptions
from ledger.ops.filters import make_filters

PLAN = ["default", "acme", "acme", "globex", "default", "acme", "globex", "globex", "acme",
        "acme"]


def sub(tag: str) -> dict[str, Any]:
    s = math_verified(random.Random(tag).randrange(10**6), random.Random(tag))
    s["subject"] = tag
    return s


def make_bundles(db_url: str, tmp_path: Path) -> dict[str, Any]:
    """A ledger of PLAN and its exports: each tenant's (``acme``, ``globex``, ``default``;
    without entries, each with an absence proof of one shape: ``aaa`` before the first head
    leaf, ``beta`` between two, ``nobody`` after the last; ``acme-every``/``globex-every``
    with one proof per entry),
    the whole ledger (``all``) and a filtered one; ``jwks`` the ledger's keys, ``ring``."""
    ring = Keyring.load(tmp_path / "keys")
    with Ledger.init(db_url) as ledger:
        ring.generate(ledger.meta.origin, ledger.clock.now_us())
        for i, t in enumerate(PLAN):
            assert ledger.append(sub(f"{t}-{i}"), tenant=t).ok
        out: dict[str, Any] = {t: tmp_path / t for t in ("acme", "globex", "default", "aaa", "beta",
                                                         "nobody")}
        for t, d in list(out.items()):
            ledger.export(d, ExportOptions(keys=ring.path, tenant=t))
        for t in ("acme", "globex"):
            out[f"{t}-every"] = tmp_path / f"{t}-every"
            ledger.export(out[f"{t}-every"],
                          ExportOptions(keys=ring.path, tenant=t, proofs="every"))
        ledger.export(tmp_path / "all", ExportOptions(keys=ring.path))
        ledger.export(tmp_path / "filtered",
                      ExportOptions(keys=ring.path, filters=make_filters(status="VERIFIED")))
    out["all"] = tmp_path / "all"
    out["filtered"] = tmp_path / "filtered"
    out["jwks"] = ring.path / "jwks.json"
    out["ring"] = ring
    return out


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in path.read_text("utf-8").splitlines()]


def _dump(rows: list[dict[str, Any]]) -> bytes:
    return "".join(json.dumps(r, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
                   + "\n" for r in rows).encode()


def edit_bundle(bundles: dict[str, Any], tmp: Path, edit: Any, name: str = "acme-every"
                ) -> Path:
    """A copy of a tenant bundle whose entries.jsonl went through ``edit``, with
    proofs.jsonl, the manifest's counts and digests made to match and the manifest signed
    again by the ledger key: what an operator who holds the key could hand over.  Only the
    signed checkpoint (and the entries' own hashes) stand in the way."""
    src = bundles[name]
    dst = tmp / f"edited-{len(list(tmp.glob('edited-*')))}"
    shutil.copytree(src, dst)
    rows = edit(lines(dst / "entries.jsonl"))
    (dst / "entries.jsonl").write_bytes(_dump(rows))
    seqs = {r["seq"] for r in rows}
    proofs = [p for p in lines(dst / "proofs.jsonl")
              if p["file"] != "entries.jsonl" or p["seq"] in seqs]
    (dst / "proofs.jsonl").write_bytes(_dump(proofs))
    m = json.loads((dst / "manifest.json").read_text())
    for f in ("entries.jsonl", "proofs.jsonl"):
        data = (dst / f).read_bytes()
        m["files"][f] = {"sha256": "sha256:" + hashlib.sha256(data).hexdigest(),
                         "bytes": len(data)}
    m["counts"]["entries"] = len(rows)
    m["counts"]["by_kind"] = dict(Counter(r["kind"] for r in rows))
    m["counts"]["by_status"] = dict(Counter(
        str(json.loads(r["envelope"]).get("status")) for r in rows))
    manifest = (json.dumps(m, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
                + "\n").encode()
    (dst / "manifest.json").write_bytes(manifest)
    _sign(bundles, dst, manifest)
    return dst


def _sign(bundles: dict[str, Any], dst: Path, manifest: bytes) -> None:
    """manifest.jwt over ``manifest`` by the ledger key (what its holder can do)."""
    m = json.loads(manifest)
    ring = bundles["ring"]
    name_, key = ring.signers(m["origin"])[-1]
    jwk = public_jwk(name_, raw_public(key), "")
    claims = {"iss": m["origin"], "sub": m["ledger_id"], "iat": 1, "format": m["format"],
              "manifest_sha256": "sha256:" + hashlib.sha256(manifest).hexdigest()}
    (dst / "manifest.jwt").write_text(sign_manifest(claims, key, jwk["kid"]))


# -- the tampers: each makes a copy of acme's export that must not verify complete -------------
def foreign_entry(bundles: dict[str, Any], tmp: Path) -> Path:
    """globex's entry added to acme's export, with its own inclusion proof: authentic, but
    not acme's."""
    other = lines(bundles["globex-every"] / "entries.jsonl")[0]
    proof = [p for p in lines(bundles["globex-every"] / "proofs.jsonl")
             if p["file"] == "entries.jsonl" and p["seq"] == other["seq"]]
    src = bundles["acme-every"]
    with_proof = tmp / f"with-proof-{len(list(tmp.glob('with-proof-*')))}"
    shutil.copytree(src, with_proof)
    ps = sorted(lines(src / "proofs.jsonl") + proof,
                key=lambda p: (p["file"] != "key_events.jsonl", p["seq"]))
    (with_proof / "proofs.jsonl").write_bytes(_dump(ps))
    return edit_bundle({**bundles, "with-proof": with_proof}, tmp,
                       lambda rows: sorted(rows + [other], key=lambda r: r["seq"]), "with-proof")


def relabelled_entry(bundles: dict[str, Any], tmp: Path) -> Path:
    """globex's entry claimed for acme: its hash binds globex, so it fails on its own."""
    other = dict(lines(bundles["globex"] / "entries.jsonl")[0], tenant="acme")
    return edit_bundle(bundles, tmp, lambda rows: sorted(rows + [other], key=lambda r: r["seq"]))


def forged_head(bundles: dict[str, Any], tmp: Path) -> Path:
    """The manifest's head count lowered (the manifest is then no longer the signed one)."""
    dst = tmp / f"forged-{len(list(tmp.glob('forged-*')))}"
    shutil.copytree(bundles["acme"], dst)
    m = json.loads((dst / "manifest.json").read_text())
    m["tenant"]["count"] -= 1
    (dst / "manifest.json").write_text(
        json.dumps(m, sort_keys=True, separators=(",", ":")) + "\n")
    return dst


def _edited(edit: Callable[[list[dict[str, Any]]], list[dict[str, Any]]]
            ) -> Callable[[dict[str, Any], Path], Path]:
    return lambda bundles, tmp: edit_bundle(bundles, tmp, edit)


TAMPERS: dict[str, Callable[[dict[str, Any], Path], Path]] = {
    "dropped": _edited(lambda rows: rows[:2] + rows[3:]),
    "first-dropped": _edited(lambda rows: rows[1:]),
    "rolled-back": _edited(lambda rows: rows[:-1]),
    "duplicated": _edited(lambda rows: rows[:3] + [rows[2]] + rows[3:]),
    "foreign-entry": foreign_entry,
    "relabelled-entry": relabelled_entry,
    "forged-head-count": forged_head,
}


# -- forged absence proofs: each a copy of an empty tenant's export, re-signed -----------------
def head_leaf(bundles: dict[str, Any], tenant: str) -> dict[str, Any]:
    """The head leaf of ``tenant`` (it has entries) in absence-proof form, from its export."""
    sec = json.loads((bundles[tenant] / "manifest.json").read_text())["tenant"]
    return {"id": tenant, "count": sec["count"], "head_hash": sec["head_hash"],
            "index": sec["heads"]["index"], "path": sec["heads"]["path"]}


def forge_absence(bundles: dict[str, Any], tmp: Path, tenant: str,
                  edit: Callable[[dict[str, Any]], dict[str, Any]], src: str = "nobody"
                  ) -> Path:
    """A copy of ``src``'s export claiming ``tenant`` with the tenant object ``edit`` makes
    of its own (the manifest signed again by the ledger key)."""
    dst = tmp / f"absent-{len(list(tmp.glob('absent-*')))}"
    shutil.copytree(bundles[src], dst)
    m = json.loads((dst / "manifest.json").read_text())
    m["tenant"] = edit(dict(m["tenant"], id=tenant))
    m["filters"] = {"tenant": [tenant]}
    manifest = (json.dumps(m, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
                + "\n").encode()
    (dst / "manifest.json").write_bytes(manifest)
    _sign(bundles, dst, manifest)
    return dst


def _absence(left: dict[str, Any] | None, right: dict[str, Any] | None, leaves: int = 3
             ) -> Callable[[dict[str, Any]], dict[str, Any]]:
    return lambda sec: dict(sec, absence={"v": 1, "leaves": leaves, "left": left,
                                          "right": right})


def _flipped(leaf: dict[str, Any]) -> dict[str, Any]:
    path = list(leaf["path"])
    path[0] = ("0" if path[0][0] != "0" else "1") + path[0][1:]
    return dict(leaf, path=path)


# The heads tree of make_bundles' ledger has three leaves: acme (0), default (1), globex (2).
ABSENCE_FORGERIES: dict[str, Callable[[dict[str, Any], Path], Path]] = {
    # acme < beta < globex, but leaves 0 and 2 leave default's place between them unseen
    "not-adjacent": lambda b, tmp: forge_absence(b, tmp, "beta", _absence(
        head_leaf(b, "acme"), head_leaf(b, "globex"))),
    # adjacent and proven, but nobody is not between acme and default
    "not-bracketing": lambda b, tmp: forge_absence(b, tmp, "nobody", _absence(
        head_leaf(b, "acme"), head_leaf(b, "default"))),
    # acme < default, but default is leaf 1: a right leaf alone must be leaf 0
    "right-not-first": lambda b, tmp: forge_absence(b, tmp, "acme", _absence(
        None, head_leaf(b, "default"))),
    # default < globex, but default is leaf 1: a left leaf alone must be the last
    "left-not-last": lambda b, tmp: forge_absence(b, tmp, "globex", _absence(
        head_leaf(b, "default"), None)),
    # the index of default's leaf claimed to be 0 (its path is for 1): the proof fails
    "wrong-index": lambda b, tmp: forge_absence(b, tmp, "aaa", _absence(
        None, dict(head_leaf(b, "default"), index=0))),
    # default has entries: its neighbours acme and globex are not adjacent
    "present-tenant": lambda b, tmp: forge_absence(b, tmp, "default", _absence(
        head_leaf(b, "acme"), head_leaf(b, "globex"))),
    # the right shape for nobody, but a sibling hash changed
    "proof-fails": lambda b, tmp: forge_absence(b, tmp, "nobody", _absence(
        _flipped(head_leaf(b, "globex")), None)),
    # the right leaf and proof, but a heads tree of another size
    "wrong-leaves": lambda b, tmp: forge_absence(b, tmp, "nobody", _absence(
        head_leaf(b, "globex"), None, leaves=4)),
    # a valid proof whose version is true, not the integer 1
    "version-not-an-integer": lambda b, tmp: forge_absence(b, tmp, "nobody", lambda sec: dict(
        sec, absence=dict(sec["absence"], v=True))),
    # acme's export (5 entries) with an absence proof added to its tenant object
    "absence-with-entries": lambda b, tmp: forge_absence(b, tmp, "acme", lambda sec: dict(
        sec, absence={"v": 1, "leaves": 3, "left": None, "right": head_leaf(b, "acme")}),
        src="acme"),
}
