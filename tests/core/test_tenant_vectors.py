"""The tenant vectors (tests/vectors/tenants.json, scripts/gen-vectors-tenants) recomputed
from docs/tenants.md with hashlib, base64 and json only -- what an independent verifier
does -- and compared with the file and with the numbers docs/format.md §11 prints."""

from __future__ import annotations

import base64
import hashlib
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
V = json.loads((ROOT / "tests" / "vectors" / "tenants.json").read_text(encoding="utf-8"))
DOC = (ROOT / "docs" / "format.md").read_text(encoding="utf-8")
BEGIN = "<!-- BEGIN GENERATED tenants (scripts/gen-vectors-tenants --markdown) -->\n"
END = "<!-- END GENERATED tenants -->"


def h(b: bytes) -> bytes:
    return hashlib.sha256(b).digest()


def u64(n: int) -> bytes:
    return n.to_bytes(8, "big")


def genesis(ledger_id: str, tenant: str) -> bytes:
    if tenant == "default":
        return h(b"ledger.genesis.v1\x00" + ledger_id.encode("utf-8"))
    return h(b"ledger.genesis.tenant.v1\x00" + ledger_id.encode("utf-8") + b"\x00"
             + tenant.encode("ascii"))


def link(tenant: str, prev: bytes, seq: int, tseq: int, t: int, body: bytes) -> bytes:
    if tenant == "default":
        return b"ledger.entry.v1\x00" + prev + u64(seq) + u64(t) + body
    tb = tenant.encode("ascii")
    return (b"ledger.entry.tenant.v1\x00" + prev + u64(seq) + u64(tseq) + u64(t)
            + bytes([len(tb)]) + tb + body)


def mth(leaves: list[bytes]) -> bytes:
    if len(leaves) == 1:
        return leaves[0]
    k = 1
    while k * 2 < len(leaves):
        k *= 2
    return h(b"\x01" + mth(leaves[:k]) + mth(leaves[k:]))


def inclusion(index: int, leaves: list[bytes]) -> list[bytes]:
    """RFC 9162 §2.1.3.1 PATH(m, D[n]), bottom first."""
    if len(leaves) == 1:
        return []
    k = 1
    while k * 2 < len(leaves):
        k *= 2
    if index < k:
        return inclusion(index, leaves[:k]) + [mth(leaves[k:])]
    return inclusion(index - k, leaves[k:]) + [mth(leaves[:k])]


def root_from_path(index: int, size: int, leaf: bytes, path: list[bytes]) -> bytes:
    """RFC 9162 §2.1.3.2."""
    fn, sn, r = index, size - 1, leaf
    for p in path:
        assert sn != 0
        if fn & 1 or fn == sn:
            r = h(b"\x01" + p + r)
            while not fn & 1 and fn:
                fn, sn = fn >> 1, sn >> 1
        else:
            r = h(b"\x01" + r + p)
        fn, sn = fn >> 1, sn >> 1
    assert sn == 0
    return r


def absence(tenant: str, order: list[str], last: dict[str, tuple[int, bytes]],
            hashes: list[bytes]) -> dict[str, Any]:
    """The absence proof of ``tenant`` (docs/tenants.md): the leaves left and right of its
    place in the sorted ids, each with its inclusion proof."""
    assert tenant not in order
    at = sum(1 for t in order if t.encode("ascii") < tenant.encode("ascii"))

    def leaf(i: int) -> dict[str, Any]:
        t = order[i]
        return {"id": t, "count": last[t][0], "head_hash": "sha256:" + last[t][1].hex(),
                "index": i, "path": [p.hex() for p in inclusion(i, hashes)]}

    return {"tenant": tenant, "absence": {
        "v": 1, "leaves": len(order), "left": leaf(at - 1) if at else None,
        "right": leaf(at) if at < len(order) else None}}


def accepts(tenant: str, a: dict[str, Any], n: int, root: bytes) -> bool:
    """The verifier's rule for an absence proof, from docs/tenants.md."""
    if set(a) != {"v", "leaves", "left", "right"} or a["v"] != 1 or a["leaves"] != n:
        return False
    idx = {}
    for side in ("left", "right"):
        x = a[side]
        if x is None:
            continue
        tb = x["id"].encode("ascii")
        leaf = h(b"\x00" + bytes([len(tb)]) + tb + u64(x["count"])
                 + bytes.fromhex(x["head_hash"][7:]))
        try:
            if root_from_path(x["index"], n, leaf, [bytes.fromhex(p) for p in x["path"]]) \
                    != root:
                return False
        except AssertionError:
            return False
        if (tb < tenant.encode("ascii")) != (side == "left") or x["id"] == tenant:
            return False
        idx[side] = x["index"]
    if idx.keys() == {"left", "right"}:
        return idx["right"] == idx["left"] + 1
    return idx == {"right": 0} or idx == {"left": n - 1}


def derive() -> dict[str, Any]:
    """Every value of the vectors, from the ledger id, the plan, the bodies and times."""
    lid = V["ledger_id"]
    plan = [e["tenant"] for e in V["entries"]]
    prev = {t: genesis(lid, t) for t in plan}
    count = dict.fromkeys(plan, 0)
    entries = []
    for seq, t in enumerate(plan):
        body = h(b"tenant vector body " + str(seq).encode())
        rec = 1_767_225_600_123_456 + 1000 * seq
        pre = link(t, prev[t], seq, count[t], rec, body)
        entries.append({"seq": seq, "tenant": t, "tseq": count[t], "recorded_at_us": rec,
                        "body_hash": body.hex(), "prev_hash": prev[t].hex(),
                        "link_preimage_hex": pre.hex(), "entry_hash": h(pre).hex()})
        prev[t], count[t] = h(pre), count[t] + 1
    checkpoints = []
    for size in [cp["size"] for cp in V["checkpoints"]]:
        last: dict[str, tuple[int, bytes]] = {}
        for e in entries[:size]:
            last[e["tenant"]] = (e["tseq"] + 1, bytes.fromhex(e["entry_hash"]))
        order = sorted(last, key=lambda t: t.encode("ascii"))
        leaves = [bytes([len(t)]) + t.encode("ascii") + u64(last[t][0]) + last[t][1]
                  for t in order]
        hashes = [h(b"\x00" + x) for x in leaves]
        root = mth([h(b"\x00" + bytes.fromhex(e["entry_hash"])) for e in entries[:size]])
        line = None
        if any(t != "default" for t in order):
            line = f"tenants {len(order)} {base64.b64encode(mth(hashes)).decode()}"
        body = "".join(x + "\n" for x in [V["origin"], str(size),
                                          base64.b64encode(root).decode()]
                       + ([line] if line else []))
        absences = []
        for cp in V["checkpoints"]:  # which tenants the file shows absent at this size
            if cp["size"] == size:
                absences = [absence(a["tenant"], order, last, hashes) for a in cp["absences"]]
        checkpoints.append({
            "size": size, "root_hash": root.hex(), "tenants_line": line, "note_body": body,
            "absences": absences,
            "heads_root": mth(hashes).hex() if line else None,
            "leaf_hashes": [h(b"\x00" + bytes.fromhex(e["entry_hash"])).hex()
                            for e in entries[:size]],
            "heads": [{"index": i, "tenant": t, "count": last[t][0],
                       "head_hash": last[t][1].hex(), "leaf_hex": leaves[i].hex(),
                       "leaf_hash": hashes[i].hex(),
                       "proof": [p.hex() for p in inclusion(i, hashes)]}
                      for i, t in enumerate(order)]})
    return {"genesis": {t: genesis(lid, t).hex() for t in sorted(set(plan))},
            "entries": entries, "checkpoints": checkpoints}


D = derive()


def test_tags_and_genesis():
    assert {k: bytes.fromhex(x) for k, x in V["tags_hex"].items()} == {
        "entry": b"ledger.entry.v1\x00", "genesis": b"ledger.genesis.v1\x00",
        "tenant_entry": b"ledger.entry.tenant.v1\x00",
        "tenant_genesis": b"ledger.genesis.tenant.v1\x00"}
    assert len(bytes.fromhex(V["tags_hex"]["tenant_entry"])) == 23
    assert len(bytes.fromhex(V["tags_hex"]["tenant_genesis"])) == 25
    for t, g in V["genesis"].items():
        assert g["hash"] == D["genesis"][t] == h(bytes.fromhex(g["preimage_hex"])).hex()


def test_every_entry_recomputes():
    assert V["entries"] == D["entries"]
    assert {e["tenant"] for e in V["entries"]} == {"default", "acme", "globex"}


def test_every_head_leaf_proof_root_and_line_recomputes():
    for got, want in zip(V["checkpoints"], D["checkpoints"], strict=True):
        for key, value in want.items():
            assert got[key] == value, (got["size"], key)
        for head in got["heads"]:  # each proof leads to the root the line carries
            if got["tenants_line"] is None:
                continue
            root = root_from_path(head["index"], len(got["heads"]),
                                  bytes.fromhex(head["leaf_hash"]),
                                  [bytes.fromhex(p) for p in head["proof"]])
            n, b64 = got["tenants_line"].split(" ")[1:]
            assert int(n) == len(got["heads"]) and base64.b64decode(b64) == root
            assert len(b64) == 44
    sizes = {cp["size"]: cp for cp in V["checkpoints"]}
    assert sizes[1]["tenants_line"] is None and len(sizes[7]["heads"]) == 3


def test_the_signed_notes_verify():
    """The notes' signature lines: key ID = SHA-256(name || 0x0a || 0x01 || key)[:4] and an
    Ed25519 signature over the note text (docs/format-checkpoint.md)."""
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    key = Ed25519PrivateKey.from_private_bytes(bytes.fromhex(V["key"]["seed_hex"]))
    pub = key.public_key().public_bytes_raw()
    assert pub.hex() == V["key"]["public_hex"]
    key_id = h(V["origin"].encode() + b"\n\x01" + pub)[:4]
    assert key_id.hex() == V["key"]["key_id_hex"]
    for cp in V["checkpoints"]:
        text, sig_line = cp["signed_note"].split("\n\n")
        assert text + "\n" == cp["note_body"]
        name, blob = sig_line.rstrip("\n")[2:].rsplit(" ", 1)
        raw = base64.b64decode(blob)
        assert sig_line.startswith("\u2014 ") and name == V["origin"] and raw[:4] == key_id
        key.public_key().verify(raw[4:], cp["note_body"].encode())
        assert raw[4:] == key.sign(cp["note_body"].encode())  # Ed25519 is deterministic


def _section() -> str:
    return DOC[DOC.index(BEGIN) + len(BEGIN):DOC.index(END)]


def test_the_doc_prints_the_derived_values():
    """Every number of the independent derivation is printed in docs/format.md §11."""
    flat = re.sub(r"\s+", "", _section())
    wanted = list(D["genesis"].values())
    for e in D["entries"]:
        wanted += [e["body_hash"], e["prev_hash"], e["link_preimage_hex"], e["entry_hash"]]
        assert f"**seq {e['seq']}**, tenant `{e['tenant']}`, tseq {e['tseq']}" in _section()
    for cp in D["checkpoints"]:
        wanted.append(cp["root_hash"])
        if cp["tenants_line"]:
            wanted.append(cp["heads_root"])
            assert cp["tenants_line"] in _section().splitlines()
            for head in cp["heads"]:
                wanted += [head["leaf_hex"], head["leaf_hash"], *head["proof"]]
        assert cp["note_body"] in _section()
        for a in cp["absences"]:
            assert f"Absence of `{a['tenant']}` at size {cp['size']}" in _section()
            assert json.dumps(a["absence"], indent=2) in _section()
    missing = [w for w in wanted if w not in flat]
    assert not missing, missing


def test_the_doc_and_the_file_are_what_the_generator_writes():
    gen = ROOT / "scripts" / "gen-vectors-tenants"
    got = subprocess.run([sys.executable, str(gen), "--check"], capture_output=True,
                         text=True, check=False)
    assert got.returncode == 0, got.stderr
    md = subprocess.run([sys.executable, str(gen), "--markdown"], capture_output=True,
                        text=True, check=True).stdout
    assert _section().strip() == md.strip()


def test_the_absence_proofs_recompute_and_hold():
    """Each absence proof of the file is the one derived from the sorted heads, and the
    verifier's rule accepts it; the three shapes and a tenant absent before its entries."""
    shapes = set()
    for cp in V["checkpoints"]:
        for a in cp["absences"]:
            n, b64 = cp["tenants_line"].split(" ")[1:]
            assert accepts(a["tenant"], a["absence"], int(n), base64.b64decode(b64))
            shapes.add((a["absence"]["left"] is None, a["absence"]["right"] is None))
    assert shapes == {(True, False), (False, False), (False, True)}
    sizes = {cp["size"]: cp for cp in V["checkpoints"]}
    assert [a["tenant"] for a in sizes[3]["absences"]] == ["globex"]
    assert any(e["tenant"] == "globex" for e in V["entries"][3:7])


def test_a_forged_absence_is_refused_by_the_rule():
    """Leaves not adjacent, not bracketing, a lone leaf at the wrong end, a changed proof, a
    present tenant: the rule refuses each."""
    cp = {c["size"]: c for c in V["checkpoints"]}[7]
    n, b64 = cp["tenants_line"].split(" ")[1:]
    root = base64.b64decode(b64)
    leaf = {hd["tenant"]: {"id": hd["tenant"], "count": hd["count"],
                           "head_hash": "sha256:" + hd["head_hash"], "index": hd["index"],
                           "path": hd["proof"]} for hd in cp["heads"]}

    def a(left: Any, right: Any) -> dict[str, Any]:
        return {"v": 1, "leaves": 3, "left": left, "right": right}

    bad = dict(leaf["globex"], path=["00" * 32, *leaf["globex"]["path"][1:]])
    for tenant, proof in [("beta", a(leaf["acme"], leaf["globex"])),  # not adjacent
                          ("zeta", a(leaf["acme"], leaf["default"])),  # not bracketing
                          ("acme", a(None, leaf["default"])),  # right alone, not leaf 0
                          ("globex", a(leaf["default"], None)),  # left alone, not the last
                          ("default", a(leaf["acme"], leaf["globex"])),  # present
                          ("zeta", a(bad, None)),  # the proof does not verify
                          ("zeta", dict(a(leaf["globex"], None), leaves=4))]:
        assert not accepts(tenant, proof, int(n), root), tenant
    assert accepts("zeta", a(leaf["globex"], None), int(n), root)


@pytest.mark.parametrize("field", ["entry_hash", "prev_hash"])
def test_a_changed_vector_is_caught(field):
    bad = json.loads(json.dumps(V["entries"]))
    bad[3][field] = "00" * 32
    assert bad != D["entries"]
