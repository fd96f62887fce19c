#!/usr/bin/env python3
"""Independent verifier of ledger export bundles (``ledger-export/1``).

Written from the documents only — docs/format.md (payloads, envelopes, the chain),
docs/format-checkpoint.md (Merkle tree, signed notes) and docs/export.md (the bundle) —
with the Python standard library, plus ``cryptography`` for the three signature
algorithms (Ed25519 manifest JWT and checkpoint note, ES256 attestations).  It imports
nothing from the ledger: that it agrees with ``ledger verify-export`` is the evidence
that the documents are complete.

It recomputes every digest of the bundle: file SHA-256s, payload digests, proof_refs
from their preimages, envelope (body) hashes, entry hashes and links, Merkle leaves and
inclusion proofs up to the signed checkpoint root.  It also checks the envelope key sets,
the result contract, the key-event documents and the attestations (trust store folded
from key_events.jsonl).  It does not apply an engine policy (that is configuration, not
format).  The CSV view is only checked against the manifest's digest.

Usage:  scripts/verify_bundle.py DIR [--jwks FILE] [--json]
Exit:   0 everything verified; 1 a finding; 3 no finding but something could not be
        confirmed (no --jwks, an issuer with no trusted key); 2 usage.
"""

from __future__ import annotations

import argparse
import base64
import binascii
import hashlib
import json
import struct
import sys
from pathlib import Path
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature

ENVELOPE_TAG, ENTRY_TAG = b"ledger.envelope.v1\0", b"ledger.entry.v1\0"
PAYLOAD_TAG = b"ledger.payload.v2\0"  # format v2: commitment = SHA-256(tag || salt || bytes)
FILES = ["entries.jsonl", "entries.csv", "key_events.jsonl", "proofs.jsonl",
         "checkpoint.txt", "jwks.json"]
RESULT_KEYS = {"v", "ledger", "kind", "engine", "status", "constraint_id", "proof_ref",
               "subject", "producer", "idempotency_key", "admission", "att_verdict", "att_kid",
               "att_iss", "payloads"}
KIND_KEYS = {"result": (RESULT_KEYS, {"result", "preimage", "attestation", "query", "meta"}),
             "key_event": ({"v", "ledger", "kind", "action", "issuer", "kid", "thumbprint",
                            "producer", "payloads"}, {"event"}),
             "audit_run": ({"v", "ledger", "kind", "outcome", "producer", "payloads"},
                           {"report"}),
             "import": ({"v", "ledger", "kind", "source", "outcome", "producer", "payloads"},
                        {"report"})}
# format v2 (docs/format.md, "Format version 2"): results without "subject" (it is the
# committed payload "subject"), redaction and hold entries
V2_KIND_KEYS = {"result": (RESULT_KEYS - {"subject"},
                           {"result", "preimage", "attestation", "query", "meta", "subject"}),
                "redaction": ({"v", "ledger", "kind", "producer", "role", "payloads"},
                              {"request"}),
                "hold": ({"v", "ledger", "kind", "action", "producer", "role", "payloads"},
                         {"order"})}
DOC_OF = {"result": "result", "key_event": "event", "audit_run": "report",
          "redaction": "request", "hold": "order", "import": "report"}
FILTER_FIELD = {"result": {k: k for k in RESULT_KEYS},
                "key_event": {"status": "action", "att_iss": "issuer", "att_kid": "kid",
                              "constraint_id": "thumbprint", "producer": "producer"},
                "audit_run": {"status": "outcome", "producer": "producer"},
                "redaction": {"producer": "producer"},
                "hold": {"status": "action", "producer": "producer"},
                "import": {"subject": "source", "status": "outcome", "producer": "producer"}}
SKEW_US = 300 * 1_000_000


def sha(b: bytes) -> bytes:
    return hashlib.sha256(b).digest()


def digest(b: bytes) -> str:
    return "sha256:" + hashlib.sha256(b).hexdigest()


def canon(obj: Any) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    d = dict(pairs)
    if len(d) != len(pairs):
        raise ValueError("duplicate key")
    return d


def b64url(text: str) -> bytes:
    if not isinstance(text, str) or any(c not in "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnop"
                                         "qrstuvwxyz0123456789-_" for c in text):
        raise ValueError("not base64url")
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def hex32(text: Any) -> bytes:
    if not (isinstance(text, str) and len(text) == 71 and text.startswith("sha256:")
            and text[7:] == text[7:].lower()):
        raise ValueError(f"not sha256:<64 lowercase hex>: {text!r}")
    return bytes.fromhex(text[7:])


class Report:
    def __init__(self) -> None:
        self.findings: list[dict[str, Any]] = []
        self.abstentions: list[dict[str, Any]] = []

    def fail(self, file: str, seq: Any, code: str, message: str) -> None:
        self.findings.append({"file": file, "seq": seq, "code": code, "message": message})

    def abstain(self, file: str, seq: Any, code: str, message: str) -> None:
        self.abstentions.append({"file": file, "seq": seq, "code": code, "message": message})


# -- Merkle (RFC 9162 §2.1) --------------------------------------------------------------------
def root_from_inclusion(index: int, size: int, entry_hash: bytes, path: list[bytes]) -> bytes:
    if index >= size:
        raise ValueError("index beyond the tree")
    fn, sn, r = index, size - 1, sha(b"\x00" + entry_hash)
    for p in path:
        if sn == 0:
            raise ValueError("proof too long")
        if fn & 1 or fn == sn:
            r = sha(b"\x01" + p + r)
            while not fn & 1 and fn != 0:
                fn, sn = fn >> 1, sn >> 1
        else:
            r = sha(b"\x01" + r + p)
        fn, sn = fn >> 1, sn >> 1
    if sn != 0:
        raise ValueError("proof too short")
    return r


# -- keys and signatures ----------------------------------------------------------------------
def ed25519_keys(path: Path) -> list[tuple[str | None, bytes]]:
    """(key name, raw public key) of every Ed25519 OKP JWK in a JWKS file."""
    doc = json.loads(path.read_bytes())
    keys = doc.get("keys") if isinstance(doc, dict) else None
    out = []
    for k in keys if isinstance(keys, list) else []:
        if isinstance(k, dict) and k.get("kty") == "OKP" and k.get("crv") == "Ed25519":
            raw = b64url(k.get("x", ""))
            if len(raw) == 32:
                out.append((k.get("key_name"), raw))
    return out


def ed25519_ok(raw: bytes, sig: bytes, msg: bytes) -> bool:
    try:
        Ed25519PublicKey.from_public_bytes(raw).verify(sig, msg)
        return True
    except (InvalidSignature, ValueError):
        return False


def check_manifest_jwt(token: bytes, keys: list[tuple[str | None, bytes]]) -> tuple[bool, dict]:
    parts = token.decode("ascii").split(".")
    if len(parts) != 3:
        raise ValueError("not a compact JWS")
    header, claims = (json.loads(b64url(p), object_pairs_hook=unique) for p in parts[:2])
    if header.get("alg") != "EdDSA" or header.get("typ") != "ledger-export+jwt" \
            or "crit" in header:
        raise ValueError("header must be alg EdDSA, typ ledger-export+jwt")
    msg = f"{parts[0]}.{parts[1]}".encode("ascii")
    return any(ed25519_ok(raw, b64url(parts[2]), msg) for _, raw in keys), claims


def check_note(data: bytes, keys: list[tuple[str | None, bytes]]) -> tuple[bool, dict]:
    """(signed by a given key, {origin, size, root}) of a C2SP signed checkpoint note."""
    text = data.decode("utf-8")
    split = text.rfind("\n\n")
    if split < 0 or not text.endswith("\n"):
        raise ValueError("not a signed note")
    body, sigs = text[:split + 1], text[split + 2:-1].split("\n")
    lines = body[:-1].split("\n")
    if len(lines) < 3 or not lines[1].isdigit() or (lines[1] != "0" and lines[1][0] == "0"):
        raise ValueError("not a checkpoint body")
    root = base64.b64decode(lines[2], validate=True)
    if len(root) != 32 or base64.b64encode(root).decode() != lines[2]:
        raise ValueError("bad root hash")
    cp = {"origin": lines[0], "size": int(lines[1]), "root": root}
    good = False
    for line in sigs:
        if not line.startswith("\u2014 "):
            raise ValueError("bad signature line")
        name, _, b64 = line[2:].rpartition(" ")
        blob = base64.b64decode(b64, validate=True)
        for key_name, raw in keys:
            n = key_name or cp["origin"]
            key_id = sha(n.encode() + b"\n\x01" + raw)[:4]
            if n == name and blob[:4] == key_id:
                if not ed25519_ok(raw, blob[4:], body.encode("utf-8")):
                    return False, cp
                good = True
    return good, cp


# -- attestations (trust store folded from key events) ------------------------------------
class Trust:
    def __init__(self) -> None:
        self.keys: list[dict[str, Any]] = []

    def apply(self, seq: int, ev: dict[str, Any]) -> None:
        if ev.get("action") == "trust":
            self.keys.append({"issuer": ev["issuer"], "kid": ev["kid"], "jwk": ev["jwk"],
                              "thumbprint": ev["thumbprint"], "since": seq, "until": None,
                              "compromised": None})
            return
        for k in self.keys:
            if k["issuer"] == ev.get("issuer") and k["kid"] == ev.get("kid") and \
                    k["until"] is None and ev.get("thumbprint") in (None, k["thumbprint"]):
                k["until"] = seq
                if ev.get("action") == "revoke":
                    k["compromised"] = ev.get("compromised_since_us")

    def judge(self, token: str, seq: int, t: int, proof_ref: str, query: str | None,
              admission: str | None) -> tuple[str, str]:
        try:
            p = token.split(".")
            header, claims = (json.loads(b64url(x)) for x in p[:2])
            sig, msg = b64url(p[2]), f"{p[0]}.{p[1]}".encode()
        except (ValueError, IndexError):
            return "failed", "attestation_malformed"
        kid, iss = header.get("kid"), claims.get("iss")
        same = [k for k in self.keys if k["issuer"] == iss and k["kid"] == kid]
        if not any(k["issuer"] == iss and k["since"] < seq for k in self.keys):
            later = [k for k in same if k["since"] >= seq]
            if later and self._check(header, claims, sig, msg, later, None, t, proof_ref,
                                     query, admission)[0] == "verified":
                return "verified", "attestation_valid_later_key"
            return "abstained", "unknown_issuer_key"
        return self._check(header, claims, sig, msg, same, seq, t, proof_ref, query, admission)

    @staticmethod
    def _check(header: dict, claims: dict, sig: bytes, msg: bytes, keys: list[dict],
               seq: int | None, t: int, proof_ref: str, query: str | None,
               admission: str | None) -> tuple[str, str]:
        if header.get("alg") != "ES256" or header.get("typ") != "qwed-attestation+jwt" \
                or "crit" in header:
            return "failed", "attestation_header"
        active = [k for k in keys if seq is None or (
            k["since"] < seq and (k["until"] is None or seq <= k["until"]))]
        key = next((k for k in active if es256_ok(k["jwk"], sig, msg)), None)
        if key is None:
            return "failed", "attestation_signature_invalid"
        if any(c not in claims for c in ("iss", "sub", "iat", "exp", "jti", "qwed")):
            return "failed", "attestation_claims_missing"
        if key["compromised"] is not None and t >= key["compromised"]:
            return "failed", "attestation_key_compromised"
        iat, exp, q = claims["iat"], claims["exp"], claims["qwed"]
        if type(iat) is not int or type(exp) is not int or not isinstance(q, dict) \
                or not isinstance(q.get("result"), dict):
            return "failed", "attestation_claims_missing"
        if iat * 1_000_000 > t + SKEW_US or exp * 1_000_000 <= t:
            return "failed", "attestation_time"
        if q["result"].get("status") != "VERIFIED" or q.get("proof_hash") != proof_ref:
            return "failed", "attestation_binding"
        if query is not None and q.get("query_hash") != digest(query.encode("utf-8")):
            return "failed", "attestation_query_mismatch"
        if admission is not None and q.get("admission") != admission:
            return "failed", "attestation_admission_mismatch"
        return "verified", "attestation_valid"


def es256_ok(jwk: dict, sig: bytes, msg: bytes) -> bool:
    try:
        x, y = (int.from_bytes(b64url(jwk[c]), "big") for c in ("x", "y"))
        key = ec.EllipticCurvePublicNumbers(x, y, ec.SECP256R1()).public_key()
        if len(sig) != 64:
            return False
        der = encode_dss_signature(int.from_bytes(sig[:32], "big"),
                                   int.from_bytes(sig[32:], "big"))
        key.verify(der, msg, ec.ECDSA(hashes.SHA256()))
        return True
    except (InvalidSignature, ValueError, KeyError, TypeError):
        return False


# -- the bundle -----------------------------------------------------------------------------
class Bundle:
    def __init__(self, directory: Path, trusted: list[tuple[str | None, bytes]] | None) -> None:
        self.dir, self.trusted, self.r = directory, trusted, Report()
        self.manifest: dict[str, Any] = {}
        self.cp: dict[str, Any] | None = None
        self.trust = Trust()

    def read(self, name: str) -> bytes | None:
        path = self.dir / name
        if not path.is_file():
            self.r.fail(name, None, "file_missing", f"{name} is missing")
            return None
        return path.read_bytes()

    def run(self) -> Report:
        try:
            own = ed25519_keys(self.dir / "jwks.json")
        except (OSError, ValueError, KeyError, binascii.Error):
            own = []
        keys = self.trusted if self.trusted is not None else own
        self.signatures(keys)
        self.files()
        proofs = self.proofs()
        events = self.walk("key_events.jsonl")
        for row in events:
            if row["kind"] == "key_event" and row["doc"] is not None:
                self.trust.apply(row["seq"], row["doc"])
        rows = self.walk("entries.jsonl")
        self.redactions(rows)
        for row in rows:
            self.attestation(row)
        for name, file_rows in (("key_events.jsonl", events), ("entries.jsonl", rows)):
            self.intervals(name, file_rows, proofs.get(name, []))
        self.claims(rows, events)
        return self.r

    def signatures(self, keys: list[tuple[str | None, bytes]]) -> None:
        token, body = self.read("manifest.jwt"), self.read("manifest.json")
        claims: dict[str, Any] = {}
        if token is not None:
            try:
                ok, claims = check_manifest_jwt(token, keys)
                self.signed("manifest.jwt", ok)
            except (ValueError, UnicodeDecodeError) as exc:
                self.r.fail("manifest.jwt", None, "manifest_jwt_malformed", str(exc))
        if body is not None:
            if claims and claims.get("manifest_sha256") != digest(body):
                self.r.fail("manifest.json", None, "manifest_digest_mismatch",
                            "manifest.json does not hash to the signed manifest_sha256")
            try:
                self.manifest = json.loads(body, object_pairs_hook=unique)
                if canon(self.manifest) + b"\n" != body:
                    raise ValueError("not canonical")
            except ValueError as exc:
                self.r.fail("manifest.json", None, "manifest_malformed", str(exc))
                self.manifest = {}
        note = self.read("checkpoint.txt")
        if note is not None:
            try:
                ok, self.cp = check_note(note, keys)
                self.signed("checkpoint.txt", ok)
            except (ValueError, UnicodeDecodeError, binascii.Error) as exc:
                self.r.fail("checkpoint.txt", None, "checkpoint_malformed", str(exc))
        want = self.manifest.get("checkpoint") or {}
        if self.cp and (want.get("size"), want.get("root_hash"), self.manifest.get("origin")) \
                != (self.cp["size"], self.cp["root"].hex(), self.cp["origin"]):
            self.r.fail("checkpoint.txt", None, "checkpoint_manifest_mismatch",
                        "not the checkpoint the manifest names")

    def signed(self, name: str, ok: bool) -> None:
        if not ok:
            self.r.fail(name, None, "signature_invalid", "no valid signature by a known key")
        elif self.trusted is None:
            self.r.abstain(name, None, "untrusted_key", "verified only with the bundle's "
                           "own jwks.json (give --jwks)")

    def files(self) -> None:
        listed = self.manifest.get("files") or {}
        if self.manifest and sorted(listed) != sorted(FILES):
            self.r.fail("manifest.json", None, "manifest_malformed", "wrong file list")
        for name, want in listed.items():
            data = self.read(name) if name in FILES else None
            if data is not None and want != {"sha256": digest(data), "bytes": len(data)}:
                self.r.fail(name, None, "file_digest_mismatch", "not the file the manifest "
                            "signs")

    def lines(self, name: str) -> list[tuple[int, bytes, Any]]:
        data = self.read(name)
        out = []
        for n, raw in enumerate((data or b"").splitlines(keepends=True), 1):
            try:
                obj = json.loads(raw.decode("utf-8"), object_pairs_hook=unique)
                if canon(obj) + b"\n" != raw:
                    raise ValueError("not canonical")
            except ValueError as exc:
                self.r.fail(name, None, "line_invalid", f"line {n}: {exc}")
                continue
            out.append((n, raw, obj))
        return out

    def proofs(self) -> dict[str, list[dict[str, Any]]]:
        out: dict[str, list[dict[str, Any]]] = {}
        for n, _, p in self.lines("proofs.jsonl"):
            try:
                assert set(p) == {"file", "first_seq", "seq", "tree_size", "inclusion_path"}
                assert p["file"] in ("entries.jsonl", "key_events.jsonl")
                assert all(type(p[k]) is int and p[k] >= 0 for k in ("first_seq", "seq"))
                assert p["first_seq"] <= p["seq"] and self.cp and p["tree_size"] == self.cp["size"]
                p["path"] = [bytes.fromhex(h) for h in p["inclusion_path"]]
                assert all(len(h) == 32 and h.hex() == t for h, t in zip(p["path"],
                                                                         p["inclusion_path"],
                                                                         strict=True))
            except (AssertionError, ValueError, TypeError, KeyError):
                self.r.fail("proofs.jsonl", p.get("seq") if isinstance(p, dict) else None,
                            "proof_invalid", f"line {n} is not a valid proof record")
                continue
            out.setdefault(p["file"], []).append(p)
        return out

    # -- entries ------------------------------------------------------------------------
    def walk(self, name: str) -> list[dict[str, Any]]:
        rows: list[dict[str, Any]] = []
        for n, _, obj in self.lines(name):
            seq = obj.get("seq") if isinstance(obj, dict) else None
            try:
                row = self.entry(name, obj)
            except (ValueError, KeyError, TypeError, AttributeError, binascii.Error) as exc:
                self.r.fail(name, seq, "entry_invalid", f"line {n}: {exc}")
                continue
            if rows and row["seq"] <= rows[-1]["seq"]:
                self.r.fail(name, row["seq"], "out_of_order", "seq does not increase")
                continue
            if rows and row["seq"] == rows[-1]["seq"] + 1 and \
                    row["prev_hash"] != rows[-1]["entry_hash"]:
                self.r.fail(name, row["seq"], "broken_link", "prev_hash is not the previous "
                            "entry's entry_hash")
            if rows and row["t"] < rows[-1]["t"]:
                self.r.fail(name, row["seq"], "time_reversed", "recorded_at decreases")
            rows.append(row)
        return rows

    def entry(self, name: str, o: dict[str, Any]) -> dict[str, Any]:
        """Recompute one entry (format.md §3–§5, §10); fail() on every mismatch."""
        if set(o) != {"seq", "kind", "recorded_at_us", "envelope", "body_hash", "prev_hash",
                      "entry_hash", "payloads"}:
            raise ValueError("wrong keys")
        seq, t, kind = o["seq"], o["recorded_at_us"], o["kind"]
        if type(seq) is not int or type(t) is not int or seq < 0 or t < 0:
            raise ValueError("seq/recorded_at_us must be non-negative integers")

        def fail(code: str, msg: str) -> None:
            self.r.fail(name, seq, code, msg)

        envelope = o["envelope"].encode("utf-8")
        body, prev, ehash = (hex32(o[k]) for k in ("body_hash", "prev_hash", "entry_hash"))
        if sha(ENVELOPE_TAG + envelope) != body:
            fail("body_hash_mismatch", "the envelope does not hash to body_hash")
        if sha(ENTRY_TAG + prev + struct.pack(">QQ", seq, t) + body) != ehash:
            fail("entry_hash_mismatch", "entry_hash does not recompute")
        env = json.loads(envelope, object_pairs_hook=unique)
        v = env.get("v")
        keys, names = (V2_KIND_KEYS if v == 2 else KIND_KEYS)[kind]
        if canon(env) != envelope or set(env) != keys or set(env["payloads"]) != names or \
                v not in (1, 2) or env["kind"] != kind or \
                env["ledger"] != self.manifest.get("ledger_id"):
            fail("envelope_invalid", "envelope not canonical, wrong keys, version or ledger")
        committed = {k: v for k, v in env["payloads"].items() if v is not None}
        if {k: p["digest"] for k, p in o["payloads"].items()} != committed:
            fail("payload_set_mismatch", "payloads differ from the envelope's digests")
        salted = v == 2 and kind == "result"
        data: dict[str, bytes] = {}
        absent: dict[str, Any] = {}  # payload name -> the redaction seq its record cites
        for pname, p in o["payloads"].items():
            if not {"digest", "data_b64"} <= set(p) <= {"digest", "data_b64", "salt_b64",
                                                        "redacted_by"}:
                raise ValueError(f"payload {pname} has the wrong keys")
            if p["data_b64"] is None:
                absent[pname] = p.get("redacted_by")
                continue
            raw = base64.b64decode(p["data_b64"], validate=True)
            if salted:  # the hiding commitment of format v2
                salt = base64.b64decode(p.get("salt_b64") or "", validate=True)
                got = digest(PAYLOAD_TAG + salt + raw) if len(salt) == 32 else None
            else:
                got = digest(raw)
            if base64.b64encode(raw).decode() != p["data_b64"] or got != committed.get(pname):
                fail("payload_digest_mismatch", f"payload {pname} does not hash to its digest")
                continue
            data[pname] = raw
        doc_bytes = data.get(DOC_OF[kind])
        doc = json.loads(doc_bytes) if doc_bytes is not None else None
        if kind == "result":
            self.contract(fail, env, doc, data)
        elif kind == "key_event" and doc is not None:
            self.key_event(fail, env, doc, doc_bytes)  # type: ignore[arg-type]
        return {"seq": seq, "t": t, "kind": kind, "env": env, "doc": doc, "data": data,
                "absent": absent, "prev_hash": prev, "entry_hash": ehash, "file": name}

    def redactions(self, rows: list[dict[str, Any]]) -> None:
        """Absent payloads: abstained "redacted" when an earlier redaction entry of the bundle
        names them (docs/format.md, "Redaction"), else failed; a payload present although a
        redaction erased it fails too."""
        erased: dict[tuple[int, str], int] = {}
        for row in rows:
            doc = row["doc"]
            if row["kind"] != "redaction" or not isinstance(doc, dict) or \
                    doc.get("format") != "ledger-redaction/1":
                continue
            for t in doc.get("targets") or []:
                if isinstance(t, dict) and type(t.get("seq")) is int and t["seq"] < row["seq"]:
                    for pname in t.get("payloads") or []:
                        erased.setdefault((t["seq"], pname), row["seq"])
        for row in rows:
            seq = row["seq"]
            for pname, cited in row["absent"].items():
                by = erased.get((seq, pname))
                if by is None:
                    self.r.fail("entries.jsonl", seq, "payload_missing",
                                f"payload {pname} is not in the bundle")
                elif cited != by:
                    self.r.fail("entries.jsonl", seq, "redaction_marker_invalid",
                                f"payload {pname} cites redaction {cited}, not {by}")
                else:
                    self.r.abstain("entries.jsonl", seq, "redacted",
                                   f"payload {pname} was erased by redaction {by}")
            for pname in row["data"]:
                if (seq, pname) in erased:
                    self.r.fail("entries.jsonl", seq, "redaction_not_applied",
                                f"payload {pname} is present although redaction "
                                f"{erased[(seq, pname)]} erased it")

    @staticmethod
    def contract(fail: Any, env: dict, doc: Any, data: dict[str, bytes]) -> None:
        status, proof_ref = env["status"], env["proof_ref"]
        if status not in ("VERIFIED", "UNVERIFIABLE", "BLOCKED"):
            fail("invalid_status", "status is not VERIFIED, UNVERIFIABLE or BLOCKED")
        if (status == "VERIFIED") != (proof_ref is not None):
            fail("proof_contract", "VERIFIED must carry a proof_ref, the others must not")
        if env.get("v", 1) == 1 and status == "VERIFIED" and \
                env["payloads"]["preimage"] != proof_ref:
            fail("proof_mismatch", "the preimage's digest is not the proof_ref")
        if env.get("v", 1) == 2 and status == "VERIFIED" and (
                env["payloads"]["preimage"] is None or ("preimage" in data and
                                                        digest(data["preimage"]) != proof_ref)):
            fail("proof_mismatch", "the preimage's SHA-256 is not the proof_ref")
        if env["payloads"]["attestation"] is not None and status != "VERIFIED":
            fail("attestation_on_non_verified", "only VERIFIED rows carry attestations")
        if not isinstance(doc, dict):
            return
        if doc.get("status") != status or doc.get("proof_ref") != proof_ref:
            fail("result_envelope_mismatch", "result status/proof_ref differ from the envelope")
        if doc.get("is_authoritative") is not (doc.get("proof_ref") is not None):
            fail("authoritative_inconsistent", "is_authoritative != (proof_ref is not null)")
        msg = doc.get("agent_message")
        if not isinstance(msg, str) or not msg.strip():
            fail("empty_agent_message", "agent_message is empty")
        dev = doc.get("developer_fields")
        checks = dev.get("advisory_checks") if isinstance(dev, dict) else None
        for c in checks if isinstance(checks, list) else []:
            # true or the integer 1 (submissions.md); 1.0 == 1 in Python but is not advisory
            flag = c.get("advisory_only", True) if isinstance(c, dict) else True
            if flag is not True and not (type(flag) is int and flag == 1):
                fail("non_advisory_check", "an advisory check is not advisory_only")

    @staticmethod
    def key_event(fail: Any, env: dict, doc: dict, doc_bytes: bytes) -> None:
        if canon(doc) != doc_bytes or any(doc.get(k) != env[k] for k in (
                "action", "issuer", "kid", "thumbprint")):
            fail("key_event_invalid", "the event document does not match its envelope")
        if doc.get("action") == "trust":
            jwk = doc.get("jwk") or {}
            members = canon({k: jwk.get(k) for k in ("crv", "kty", "x", "y")})
            thumb = base64.urlsafe_b64encode(sha(members)).rstrip(b"=").decode()
            if thumb != doc.get("thumbprint"):
                fail("key_event_invalid", "thumbprint is not the RFC 7638 thumbprint of jwk")

    def attestation(self, row: dict[str, Any]) -> None:
        token = row["data"].get("attestation")
        if token is None or row["kind"] != "result" or row["env"]["status"] != "VERIFIED":
            return
        query = row["data"].get("query")
        disp, code = self.trust.judge(token.decode("ascii"), row["seq"], row["t"],
                                      row["env"]["proof_ref"],
                                      query.decode("utf-8") if query is not None else None,
                                      row["env"]["admission"])
        if disp == "failed":
            self.r.fail("entries.jsonl", row["seq"], code, "the attestation does not verify")
        elif disp == "abstained":
            self.r.abstain("entries.jsonl", row["seq"], code, "no trusted key for its issuer")

    # -- proofs, counts, filters -------------------------------------------------------------
    def intervals(self, name: str, rows: list[dict[str, Any]],
                  proofs: list[dict[str, Any]]) -> None:
        by_seq = {r["seq"]: r for r in rows}
        covered: set[int] = set()
        for p in proofs:
            span = range(p["first_seq"], p["seq"] + 1)
            missing = [s for s in span if s not in by_seq]
            if missing or covered & set(span):
                self.r.fail(name, missing[0] if missing else p["seq"], "interval_incomplete",
                            "a proven interval lacks entries or overlaps another")
                continue
            covered |= set(span)
            last = by_seq[p["seq"]]
            try:
                if not self.cp or root_from_inclusion(p["seq"], self.cp["size"],
                                                      last["entry_hash"], p["path"]) \
                        != self.cp["root"]:
                    raise ValueError("root mismatch")
            except ValueError as exc:
                self.r.fail(name, p["seq"], "inclusion_invalid", str(exc))
        for s in sorted(set(by_seq) - covered):
            self.r.fail("proofs.jsonl", s, "proof_missing", f"no proof covers {name} {s}")

    def claims(self, rows: list[dict[str, Any]], events: list[dict[str, Any]]) -> None:
        m = self.manifest
        if not m:
            return
        by_status: dict[str, int] = {}
        by_kind: dict[str, int] = {}
        event_hashes = {e["seq"]: e["entry_hash"] for e in events}
        rng, filters = m.get("range") or {}, m.get("filters") or {}
        for r in rows:
            fields = {c: r["env"].get(f) for c, f in FILTER_FIELD[r["kind"]].items()}
            status = str(fields.get("status"))
            by_status[status] = by_status.get(status, 0) + 1
            by_kind[r["kind"]] = by_kind.get(r["kind"], 0) + 1
            if not rng.get("start", 0) <= r["seq"] < rng.get("end", 0):
                self.r.fail("entries.jsonl", r["seq"], "entry_out_of_range", "outside range")
            for f, values in filters.items():
                if f in ("since", "until"):
                    continue  # RFC 3339 parsing is left to the ledger's verifier
                value = r["kind"] if f == "kind" else fields.get(f)
                if value not in values:
                    self.r.fail("entries.jsonl", r["seq"], "entry_outside_filter", f)
            if r["kind"] == "key_event" and event_hashes.get(r["seq"]) != r["entry_hash"]:
                self.r.fail("entries.jsonl", r["seq"], "key_event_not_listed", "missing")
        got = {"entries": len(rows), "key_events": len(events), "by_status": by_status,
               "by_kind": by_kind}
        if m.get("counts") != got:
            self.r.fail("entries.jsonl", None, "count_mismatch", f"manifest {m.get('counts')}"
                        f", bundle {got}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("directory", type=Path)
    ap.add_argument("--jwks", type=Path, help="trusted ledger keys (JWKS with Ed25519 keys)")
    ap.add_argument("--json", action="store_true", help="print the report as JSON")
    args = ap.parse_args(argv)
    if not args.directory.is_dir():
        print(f"error: {args.directory} is not a directory", file=sys.stderr)
        return 2
    try:
        trusted = ed25519_keys(args.jwks) if args.jwks else None
    except (OSError, ValueError, binascii.Error) as exc:
        print(f"error: cannot read {args.jwks}: {exc}", file=sys.stderr)
        return 2
    r = Bundle(args.directory, trusted).run()
    if args.json:
        print(json.dumps({"findings": r.findings, "abstentions": r.abstentions}, indent=2))
    for f in r.findings[:20]:
        print(f"  {f['file']} seq {f['seq']}: {f['code']}: {f['message']}", file=sys.stderr)
    outcome = "failed" if r.findings else "unverified" if r.abstentions else "passed"
    print(f"verify_bundle: {outcome}: {len(r.findings)} finding(s), "
          f"{len(r.abstentions)} abstention(s)", file=sys.stderr)
    return {"passed": 0, "failed": 1, "unverified": 3}[outcome]


if __name__ == "__main__":
    sys.exit(main())
