"""An independent verifier of a tenant export (``ledger-export/2``), written from
docs/tenants.md ("A complete tenant export") and the documents it refers to for the pieces
it does not restate: the entry hashes (docs/format.md), the Merkle tree, inclusion proofs
and the signed note (docs/format-checkpoint.md), the bundle files (docs/export.md).  It
imports nothing from the ledger: only the standard library and ``cryptography`` for Ed25519.

:func:`verify_tenant_bundle` answers (complete, problems): ``complete`` only when both
signatures verify with the given keys, the tenant's head is a leaf of the heads tree the
checkpoint's ``tenants`` line commits to (or, for a tenant without entries, the leaves that
bracket it show it has none; without that line, what the checkpoint's size says), the entries are exactly the tenant's chain from its genesis to that head, and each
entry verifies on its own and lies in a proven interval of the global tree.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import re
from pathlib import Path
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

TENANT_ID = re.compile(r"[a-z0-9][a-z0-9._-]{0,62}\Z")
LISTED = {"entries.jsonl", "entries.csv", "key_events.jsonl", "proofs.jsonl",
          "checkpoint.txt", "jwks.json"}


def sha(b: bytes) -> bytes:
    return hashlib.sha256(b).digest()


def u64(n: int) -> bytes:
    return n.to_bytes(8, "big")


def b64url(s: str) -> bytes:
    return base64.urlsafe_b64decode(s + "=" * (-len(s) % 4))


def genesis(ledger_id: str, tenant: str) -> bytes:
    if tenant == "default":  # format.md §5.3
        return sha(b"ledger.genesis.v1\x00" + ledger_id.encode("utf-8"))
    return sha(b"ledger.genesis.tenant.v1\x00" + ledger_id.encode("utf-8") + b"\x00"
               + tenant.encode("ascii"))


def entry_hash(tenant: str, prev: bytes, seq: int, tseq: int, t: int, body: bytes) -> bytes:
    if tenant == "default":  # format.md §5.2: tseq is not hashed
        return sha(b"ledger.entry.v1\x00" + prev + u64(seq) + u64(t) + body)
    tb = tenant.encode("ascii")
    return sha(b"ledger.entry.tenant.v1\x00" + prev + u64(seq) + u64(tseq) + u64(t)
               + bytes([len(tb)]) + tb + body)


def head_leaf_hash(tenant: str, count: int, head: bytes) -> bytes:
    tb = tenant.encode("ascii")
    return sha(b"\x00" + bytes([len(tb)]) + tb + u64(count) + head)


def root_from_path(index: int, size: int, leaf: bytes, path: list[bytes]) -> bytes:
    """RFC 9162 §2.1.3.2: the root an inclusion proof of the leaf hash leads to."""
    if not 0 <= index < size:
        raise ValueError("index outside the tree")
    fn, sn, r = index, size - 1, leaf
    for p in path:
        if sn == 0:
            raise ValueError("proof too long")
        if fn & 1 or fn == sn:
            r = sha(b"\x01" + p + r)
            while not fn & 1 and fn:
                fn, sn = fn >> 1, sn >> 1
        else:
            r = sha(b"\x01" + r + p)
        fn, sn = fn >> 1, sn >> 1
    if sn != 0:
        raise ValueError("proof too short")
    return r


def _ed25519(pub: bytes, sig: bytes, msg: bytes) -> bool:
    try:
        Ed25519PublicKey.from_public_bytes(pub).verify(sig, msg)
        return True
    except (InvalidSignature, ValueError):
        return False


def _keys(jwks: Path | dict[str, Any]) -> list[tuple[str | None, bytes]]:
    doc = jwks if isinstance(jwks, dict) else json.loads(Path(jwks).read_text("utf-8"))
    return [(k.get("key_name"), b64url(k["x"])) for k in doc["keys"]
            if k.get("kty") == "OKP" and k.get("crv") == "Ed25519"]


def _hash(text: Any) -> bytes:
    if not isinstance(text, str) or not re.fullmatch(r"sha256:[0-9a-f]{64}", text):
        raise ValueError(f"not sha256:<64 lowercase hex>: {text!r}")
    return bytes.fromhex(text[7:])


def _lines(path: Path) -> list[dict[str, Any]]:
    out = []
    for raw in path.read_bytes().splitlines(keepends=True):
        obj = json.loads(raw)
        if json.dumps(obj, sort_keys=True, separators=(",", ":"),
                      ensure_ascii=False).encode() + b"\n" != raw:
            raise ValueError(f"{path.name}: a line is not canonical")
        out.append(obj)
    return out


def read_checkpoint(note: bytes, origin: str, keys: list[tuple[str | None, bytes]]
                    ) -> tuple[int, bytes, list[str]]:
    """(size, root, extension lines) of a checkpoint signed by one of ``keys``
    (C2SP signed note: the text up to the last blank line, then signature lines
    "— <name> <base64(key ID || signature)>"; key ID = SHA-256(name || 0x0a || 0x01 ||
    public key)[:4]); raises ValueError."""
    text = note.decode("utf-8")
    cut = text.rfind("\n\n")
    if cut < 0 or not text.endswith("\n"):
        raise ValueError("not a signed note")
    body, sigs = text[:cut + 1], text[cut + 2:-1].split("\n")
    signed = False
    for line in sigs:
        if not line.startswith("\u2014 "):
            raise ValueError("a signature line does not start with an em dash")
        name, blob = line[2:].rsplit(" ", 1)
        raw = base64.b64decode(blob, validate=True)
        for key_name, pub in keys:
            n = key_name or origin
            if n == name and raw[:4] == sha(n.encode() + b"\n\x01" + pub)[:4]:
                if not _ed25519(pub, raw[4:], body.encode("utf-8")):
                    raise ValueError("the ledger key's signature does not verify")
                signed = True
    if not signed:
        raise ValueError("no signature by the ledger's key")
    lines = body[:-1].split("\n")
    if len(lines) < 3 or lines[0] != origin or not lines[1].isdigit():
        raise ValueError("not a checkpoint of the ledger's origin")
    root = base64.b64decode(lines[2], validate=True)
    if len(root) != 32:
        raise ValueError("the root hash is not 32 bytes")
    return int(lines[1]), root, lines[3:]


def tenants_line(extensions: list[str]) -> tuple[int, bytes] | None:
    found = [x for x in extensions if x.startswith("tenants ")]
    if not found:
        return None
    parts = found[0].split(" ")
    if len(found) != 1 or len(parts) != 3 or not re.fullmatch(r"0|[1-9][0-9]*", parts[1]):
        raise ValueError(f"malformed tenants line {found[0]!r}")
    root = base64.b64decode(parts[2], validate=True)
    if len(root) != 32 or base64.b64encode(root).decode() != parts[2]:
        raise ValueError(f"malformed tenants line {found[0]!r}")
    return int(parts[1]), root


def absence_problems(tenant: str, a: Any, line: tuple[int, bytes]) -> list[str]:
    """Why ``a`` (the manifest's tenant.absence, version 1) does not prove that ``tenant``
    has no leaf in the heads tree of the tenants line (n, root): the one or two leaves that
    bracket the tenant in id order, adjacent, each proven at its index (docs/tenants.md,
    "Proof of a tenant's absence")."""
    n, root = line
    if not isinstance(a, dict) or set(a) != {"v", "leaves", "left", "right"} \
            or type(a["v"]) is not int or a["v"] != 1 \
            or a["leaves"] != n or type(a["leaves"]) is not int:
        return ["manifest.json: absence is not {v: 1, leaves: n, left, right}"]
    out, index = [], {}
    me = tenant.encode("ascii")
    for side in ("left", "right"):
        x = a[side]
        if x is None:
            continue
        if not isinstance(x, dict) or set(x) != {"id", "count", "head_hash", "index", "path"} \
                or not isinstance(x["id"], str) or not TENANT_ID.match(x["id"]) \
                or type(x["count"]) is not int or not 1 <= x["count"] < 2**63 \
                or type(x["index"]) is not int or not isinstance(x["path"], list) \
                or not all(isinstance(p, str) and re.fullmatch(r"[0-9a-f]{64}", p)
                           for p in x["path"]):
            return [f"manifest.json: absence.{side} is not a head leaf with its proof"]
        leaf = head_leaf_hash(x["id"], x["count"], _hash(x["head_hash"]))
        try:
            ok = root_from_path(x["index"], n, leaf, [bytes.fromhex(p) for p in x["path"]]) \
                == root
        except ValueError:
            ok = False
        if not ok:
            out.append(f"manifest.json: absence.{side} is not leaf {x['index']} of the heads "
                       "tree")
        other = x["id"].encode("ascii")
        if not (other < me if side == "left" else me < other):
            out.append(f"manifest.json: absence.{side} {x['id']} does not bracket {tenant}")
        index[side] = x["index"]
    if not index:
        out.append("manifest.json: absence has no leaf")
    elif "left" not in index and index["right"] != 0:
        out.append("manifest.json: a right leaf alone is not leaf 0")
    elif "right" not in index and index["left"] != n - 1:
        out.append("manifest.json: a left leaf alone is not the last leaf")
    elif len(index) == 2 and index["right"] != index["left"] + 1:
        out.append("manifest.json: the bracketing leaves are not adjacent")
    return out


def _entry_problems(e: dict[str, Any], ledger_id: str) -> list[str]:
    """An entry on its own: envelope (body hash), payload digests, entry hash with the rule
    of its tenant."""
    out = []
    env_bytes = e["envelope"].encode("utf-8")
    env = json.loads(env_bytes)
    body = sha(b"ledger.envelope.v1\x00" + env_bytes)
    if body != _hash(e["body_hash"]):
        out.append(f"seq {e['seq']}: the envelope does not hash to body_hash")
    if env.get("ledger") != ledger_id or env.get("kind") != e["kind"]:
        out.append(f"seq {e['seq']}: the envelope is of another ledger or kind")
    for name, p in e["payloads"].items():
        if env["payloads"].get(name) != p["digest"]:
            out.append(f"seq {e['seq']}: payload {name} is not the envelope's")
        if p["data_b64"] is None:
            continue  # an erased payload (its entry is still there)
        data = base64.b64decode(p["data_b64"], validate=True)
        if env.get("v") == 2 and e["kind"] == "result":
            data = b"ledger.payload.v2\x00" + base64.b64decode(p["salt_b64"], validate=True) \
                + data
        if "sha256:" + hashlib.sha256(data).hexdigest() != p["digest"]:
            out.append(f"seq {e['seq']}: payload {name} does not hash to its digest")
    if entry_hash(e["tenant"], _hash(e["prev_hash"]), e["seq"], e["tseq"], e["recorded_at_us"],
                  body) != _hash(e["entry_hash"]):
        out.append(f"seq {e['seq']}: entry_hash does not recompute with the link of tenant "
                   f"{e['tenant']}")
    return out


def verify_tenant_bundle(directory: Path | str, jwks: Path | dict[str, Any]
                         ) -> tuple[bool, list[str]]:
    """(complete, problems) of the tenant export in ``directory``, with the ledger's public
    keys ``jwks`` (a JWKS file or document, obtained out of band).  ``complete`` is True only
    when there is no problem and the bundle proves it holds exactly the tenant's chain."""
    d = Path(directory)
    problems: list[str] = []
    try:
        keys = _keys(jwks)
        # 1. manifest.jwt signs manifest.json, which signs every listed file
        h, c, s = (d / "manifest.jwt").read_text("ascii").split(".")
        if json.loads(b64url(h)).get("alg") != "EdDSA" or not any(
                _ed25519(pub, b64url(s), f"{h}.{c}".encode()) for _, pub in keys):
            problems.append("manifest.jwt: no valid signature by the ledger's key")
        manifest_bytes = (d / "manifest.json").read_bytes()
        claims = json.loads(b64url(c))
        if claims.get("manifest_sha256") != "sha256:" + hashlib.sha256(
                manifest_bytes).hexdigest():
            problems.append("manifest.json: not the manifest the JWT signs")
        m = json.loads(manifest_bytes)
        if m.get("format") != "ledger-export/2" or not isinstance(m.get("tenant"), dict):
            return False, problems + ["manifest.json: not a tenant export (ledger-export/2)"]
        files = m["files"]
        if not LISTED <= set(files) <= LISTED | {"redactions.jsonl"}:
            problems.append("manifest.json: wrong file list")
        for name, f in files.items():
            data = (d / name).read_bytes()
            if f != {"sha256": "sha256:" + hashlib.sha256(data).hexdigest(),
                     "bytes": len(data)}:
                problems.append(f"{name}: not the file the manifest signs")
        # 2. the checkpoint, signed by the ledger key, is the one the manifest names
        size, root, extensions = read_checkpoint((d / "checkpoint.txt").read_bytes(),
                                                 m["origin"], keys)
        if (size, root.hex()) != (m["checkpoint"]["size"], m["checkpoint"]["root_hash"]):
            problems.append("checkpoint.txt: not the checkpoint the manifest names")
        # 3. the tenant's head is what the checkpoint commits to
        sec = m["tenant"]
        tenant, count, heads = sec["id"], sec["count"], sec["heads"]
        if not isinstance(tenant, str) or not TENANT_ID.match(tenant) or \
                type(count) is not int or count < 0:
            return False, problems + ["manifest.json: tenant is not {id, count, ...}"]
        head = None if sec["head_hash"] is None else _hash(sec["head_hash"])
        if (head is None) != (count == 0):
            problems.append("manifest.json: head_hash is null exactly when count is 0")
        line = tenants_line(extensions)
        proven = True
        if "absence" in sec and (count != 0 or heads is not None or line is None):
            problems.append("manifest.json: an absence proof beside a head, or without a "
                            "tenants line")
        elif line is None:  # only default had entries: its chain is every entry
            if count != (size if tenant == "default" else 0) or heads is not None:
                problems.append("manifest.json: without a tenants line the default tenant "
                                "has every entry and no other tenant has one")
        elif count == 0:
            absence = sec.get("absence")
            if absence is None or (isinstance(absence, dict) and absence.get("v") != 1
                                   and type(absence.get("v")) is int):
                proven = False  # an older bundle or a later version: not proven, no problem
            else:
                problems += absence_problems(tenant, absence, line)
        else:
            path = [bytes.fromhex(x) for x in heads["path"]]
            if heads["count"] != line[0] or head is None or root_from_path(
                    heads["index"], line[0], head_leaf_hash(tenant, count, head), path) \
                    != line[1]:
                problems.append("manifest.json: the tenant head is not a leaf of the "
                                "checkpoint's heads tree")
        # 4. entries.jsonl: exactly the tenant's chain, each entry valid on its own
        rows = _lines(d / "entries.jsonl")
        prev, n = genesis(m["ledger_id"], tenant), 0
        last_seq = -1
        for e in rows:
            if e["seq"] <= last_seq:
                problems.append(f"seq {e['seq']}: seqs do not increase")
            last_seq = max(last_seq, e["seq"])
            problems += _entry_problems(e, m["ledger_id"])
            if e["tenant"] != tenant:
                problems.append(f"seq {e['seq']}: an entry of tenant {e['tenant']}")
                continue
            if e["tseq"] != n or _hash(e["prev_hash"]) != prev:
                problems.append(f"seq {e['seq']}: not the next entry of the tenant's chain "
                                f"(tseq {e['tseq']}, expected {n})")
            prev, n = _hash(e["entry_hash"]), n + 1
        if n != count or (count and prev != head):
            problems.append(f"entries.jsonl: {n} entries of the tenant, its head counts "
                            f"{count}, or the last is not the head")
        # 5. proofs.jsonl: every entry in one interval of consecutive seqs of one tenant,
        # linked, whose last entry's inclusion proof leads to the checkpoint root
        by_seq = {e["seq"]: e for e in rows}
        covered: set[int] = set()
        for p in _lines(d / "proofs.jsonl"):
            if p["file"] != "entries.jsonl":
                continue
            span = range(p["first_seq"], p["seq"] + 1)
            if any(s not in by_seq or s in covered for s in span) or p["tree_size"] != size:
                problems.append(f"proofs.jsonl: interval {p['first_seq']}..{p['seq']} is "
                                "incomplete, overlaps another or is of another tree size")
                continue
            covered |= set(span)
            run = [by_seq[s] for s in span]
            if len({e["tenant"] for e in run}) != 1 or any(
                    b["prev_hash"] != a["entry_hash"] for a, b in zip(run, run[1:],
                                                                      strict=False)):
                problems.append(f"proofs.jsonl: interval {p['first_seq']}..{p['seq']} is not "
                                "one tenant's linked run")
            last = _hash(run[-1]["entry_hash"])
            try:
                ok = root_from_path(p["seq"], size, sha(b"\x00" + last),
                                    [bytes.fromhex(x) for x in p["inclusion_path"]]) == root
            except ValueError:
                ok = False
            if not ok:
                problems.append(f"proofs.jsonl: the inclusion proof of seq {p['seq']} does not "
                                "lead to the checkpoint root")
        for s in sorted(set(by_seq) - covered):
            problems.append(f"seq {s}: in no proven interval")
    except (OSError, ValueError, KeyError, TypeError, AttributeError, IndexError,
            binascii.Error, UnicodeError) as exc:
        problems.append(f"unreadable bundle: {type(exc).__name__}: {exc}")
        return False, problems
    return proven and not problems, problems
