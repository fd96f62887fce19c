#!/usr/bin/env python3
"""Independent verifier of ledger export bundles (``ledger-export/1`` and ``/2``).

Written from the documents only — docs/format.md (payloads, envelopes, the chain),
docs/format-checkpoint.md (Merkle tree, signed notes), docs/format-attestation.md (the
attestation rules), docs/anchoring.md (witness cosignatures) and docs/export.md (the
bundle) — with the Python standard library, plus ``cryptography`` for the signature
algorithms (Ed25519 manifest JWT, checkpoint note and witness cosignatures, ES256
attestations).  It imports nothing from the ledger: that it agrees with ``ledger
verify-export`` is the evidence that the documents are complete.

It recomputes every digest of the bundle: file SHA-256s, payload digests, proof_refs
from their preimages, envelope (body) hashes, entry hashes and links, Merkle leaves and
inclusion proofs up to the signed checkpoint root, in the order proofs.jsonl must give
them.  It also checks the envelope key sets, the result contract, the key-event
documents, the attestations (trust store folded from key_events.jsonl, the codes of
docs/format-attestation.md), the manifest's range, filters and counts, jwks.json, and
regenerates the entries.csv view.  With --witness-key it checks the witness quorum on
checkpoint.txt's cosignature lines.  It does not apply an engine policy (configuration,
not format), and it does NOT check RFC 3161 timestamp tokens (timestamps.json): that
needs a CMS signature and certificate-chain verifier, which ``cryptography`` does not
provide; check them with ``ledger verify-export --tsa-certs`` or ``openssl ts -verify``
(docs/anchoring.md).

A ``ledger-export/2`` bundle (docs/tenants.md, "A complete tenant export") carries each
entry's ``tenant`` and ``tseq``: entries of a tenant other than ``default`` are hashed with
the tenant link, links are checked along each tenant's chain, a proof interval holds one
tenant's run, and a tenant export (a manifest ``tenant`` object) is proven complete when its
head is a leaf of the heads tree the checkpoint's ``tenants`` line commits to and the
entries are exactly the chain from the tenant's genesis to that head (for a tenant without
entries: the manifest's ``absence`` shows the adjacent head leaves that bracket its id, so
it has none).  The report says
``complete`` (--json) for every bundle: a proven tenant chain, or a contiguous export
without filters, with no finding and both signatures verified by --jwks keys.

Usage:  scripts/verify_bundle.py DIR [--jwks FILE] [--witness-key FILE ... [--quorum N]]
                                 [--json]
Exit:   0 everything verified; 1 a finding; 3 no finding but something could not be
        confirmed (no --jwks, an issuer with no trusted key); 2 usage.
"""

from __future__ import annotations

import argparse
import base64
import binascii
import csv
import hashlib
import io
import json
import re
import struct
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature

ENVELOPE_TAG, ENTRY_TAG = b"ledger.envelope.v1\0", b"ledger.entry.v1\0"
PAYLOAD_TAG = b"ledger.payload.v2\0"  # format v2: commitment = SHA-256(tag || salt || bytes)
GENESIS_TAG = b"ledger.genesis.v1\0"
# tenants (docs/tenants.md): the link and genesis of every tenant but "default"
TENANT_ENTRY_TAG, TENANT_GENESIS_TAG = b"ledger.entry.tenant.v1\0", b"ledger.genesis.tenant.v1\0"
DEFAULT_TENANT = "default"
TENANT_RE = re.compile(r"[a-z0-9][a-z0-9._-]{0,62}\Z")
EXPORT_FORMATS = ("ledger-export/1", "ledger-export/2")
LINE_KEYS = {"seq", "kind", "recorded_at_us", "envelope", "body_hash", "prev_hash",
             "entry_hash", "payloads"}
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
                        {"report"}),
             "reverify_run": ({"v", "ledger", "kind", "outcome", "producer", "payloads"},
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
          "redaction": "request", "hold": "order", "import": "report",
          "reverify_run": "report"}
# the envelope fields a document repeats (docs/format.md section 7.1, step 5)
DOC_FIELDS = {"audit_run": ("outcome",), "import": ("outcome", "source"),
              "reverify_run": ("outcome",)}

FILTER_FIELD = {"result": {k: k for k in RESULT_KEYS},
                "key_event": {"status": "action", "att_iss": "issuer", "att_kid": "kid",
                              "constraint_id": "thumbprint", "producer": "producer"},
                "audit_run": {"status": "outcome", "producer": "producer"},
                "redaction": {"producer": "producer"},
                "hold": {"status": "action", "producer": "producer"},
                "import": {"subject": "source", "status": "outcome", "producer": "producer"},
                "reverify_run": {"status": "outcome", "producer": "producer"}}
SKEW_US = 300 * 1_000_000
MANIFEST_KEYS = ("ledger_id", "origin", "range", "counts", "checkpoint", "files", "filters")
REDACTIONS = "redactions.jsonl"  # listed only when the bundle has one
PROOF_ORDER = ("key_events.jsonl", REDACTIONS, "entries.jsonl")  # the order of proofs.jsonl
ABSENT = object()  # a manifest's tenant object without "absence"


def need(ok: Any, why: str = "") -> None:
    """A check of the bundle: raises AssertionError when ``ok`` is false.  A function, not
    ``assert``, so that the checks also run under ``python -O``."""
    if not ok:
        raise AssertionError(why)


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


B64URL_ALPHABET = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")


def b64url(text: Any, what: str = "the value") -> bytes:
    """Canonical unpadded base64url (docs/export.md, manifest.jwt): the alphabet only, no
    '=', the unused low bits of the last character zero."""
    if not isinstance(text, str) or len(text) % 4 == 1 or any(c not in B64URL_ALPHABET
                                                              for c in text):
        raise ValueError(f"{what} is not base64url")
    raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    if base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii") != text:
        raise ValueError(f"{what} is not canonical base64url")
    return raw


def b64url_lenient(text: str) -> bytes:
    """base64url as the attestation rules read it (docs/format-attestation.md §3 and §7:
    padding optional, characters outside the alphabet skipped)."""
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def b64std(text: str, what: str) -> bytes:
    """Canonical padded standard base64 (RFC 4648 §4), as in signed notes."""
    try:
        raw = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise ValueError(f"{what} is not valid base64") from None
    if base64.b64encode(raw).decode("ascii") != text:
        raise ValueError(f"{what} is not canonical base64")
    return raw


def hex32(text: Any) -> bytes:
    if not (isinstance(text, str) and len(text) == 71 and text.startswith("sha256:")
            and text[7:] == text[7:].lower()):
        raise ValueError(f"not sha256:<64 lowercase hex>: {text!r}")
    return bytes.fromhex(text[7:])


class Report:
    def __init__(self) -> None:
        self.findings: list[dict[str, Any]] = []
        self.abstentions: list[dict[str, Any]] = []
        self.complete = False  # the bundle proves it holds every entry of what it exports

    def fail(self, file: str, seq: Any, code: str, message: str) -> None:
        self.findings.append({"file": file, "seq": seq, "code": code, "message": message})

    def abstain(self, file: str, seq: Any, code: str, message: str) -> None:
        self.abstentions.append({"file": file, "seq": seq, "code": code, "message": message})


# -- Merkle (RFC 9162 §2.1) --------------------------------------------------------------------
def root_from_inclusion(index: int, size: int, entry_hash: bytes, path: list[bytes]) -> bytes:
    return root_from_leaf(index, size, sha(b"\x00" + entry_hash), path)


def root_from_leaf(index: int, size: int, leaf: bytes, path: list[bytes]) -> bytes:
    """RFC 9162 §2.1.3.2: the root an inclusion proof of the leaf hash ``leaf`` leads to."""
    if not 0 <= index < size:
        raise ValueError("index beyond the tree")
    fn, sn, r = index, size - 1, leaf
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
    """(key name, raw public key) of every key of a JWKS file (docs/export.md, jwks.json):
    a JSON object whose ``keys`` list (or the object itself, a single JWK) holds Ed25519 OKP
    JWKs; raises ValueError for any other JSON object member of it (members that are not
    objects are skipped)."""
    doc = json.loads(path.read_bytes())
    keys = doc.get("keys") if isinstance(doc, dict) else None
    if not isinstance(keys, list):
        keys = [doc]
    out = []
    for k in keys:
        if not isinstance(k, dict):
            continue
        if k.get("kty") != "OKP" or k.get("crv") != "Ed25519" or not isinstance(k.get("x"), str):
            raise ValueError(f"JWK {k.get('kid')!r} is not an Ed25519 OKP key")
        try:
            raw = b64url_lenient(k["x"])
        except (binascii.Error, ValueError):
            raw = b""
        if len(raw) != 32:
            raise ValueError(f"JWK {k.get('kid')!r} has a bad x")
        out.append((k.get("key_name"), raw))
    return out


def ed25519_ok(raw: bytes, sig: bytes, msg: bytes) -> bool:
    try:
        Ed25519PublicKey.from_public_bytes(raw).verify(sig, msg)
        return True
    except (InvalidSignature, ValueError):
        return False


def check_manifest_jwt(token: bytes, keys: list[tuple[str | None, bytes]]) -> tuple[bool, dict]:
    """(signed by a given key, claims).  Every part canonical unpadded base64url, header and
    claims JSON objects without duplicate keys; raises ValueError naming the part."""
    parts = token.decode("ascii").split(".")
    if len(parts) != 3:
        raise ValueError("not a compact JWS")
    header, claims = (json.loads(b64url(p, n), object_pairs_hook=unique)
                      for p, n in zip(parts[:2], ("header", "claims"), strict=True))
    sig = b64url(parts[2], "signature")
    if not isinstance(header, dict) or not isinstance(claims, dict):
        raise ValueError("header and claims must be JSON objects")
    if header.get("alg") != "EdDSA" or header.get("typ") != "ledger-export+jwt" \
            or "crit" in header:
        raise ValueError("header must be alg EdDSA, typ ledger-export+jwt")
    msg = f"{parts[0]}.{parts[1]}".encode("ascii")
    return any(ed25519_ok(raw, sig, msg) for _, raw in keys), claims


MAX_NOTE_BYTES, MAX_SIGNATURES, MAX_EXTENSIONS = 1 << 20, 100, 16
Signature = tuple[str, bytes, bytes]  # (key name, 4-byte key ID, signature bytes)


def parse_note(data: bytes) -> tuple[str, list[Signature]]:
    """(note text, signature lines) of a C2SP signed note, read by the rules of
    docs/format-checkpoint.md ("Checkpoint and signed note"); raises ValueError."""
    if len(data) > MAX_NOTE_BYTES:
        raise ValueError("note is larger than 1 MiB")
    text = data.decode("utf-8")
    if any(c < " " and c != "\n" for c in text):
        raise ValueError("note contains a control character")
    split = text.rfind("\n\n")
    if split < 0 or not text.endswith("\n"):
        raise ValueError("not a signed note")
    body, block = text[:split + 1], text[split + 2:]
    lines = block[:-1].split("\n") if block else []
    if not lines or len(lines) > MAX_SIGNATURES:
        raise ValueError("a signed note has 1 to 100 signature lines")
    sigs = []
    for n, line in enumerate(lines, 1):
        name, sep, blob = line[2:].partition(" ")
        if not line.startswith("\u2014 ") or not sep or not name or any(
                c.isspace() or c == "+" for c in name):
            raise ValueError(f"signature line {n} is not '\u2014 <name> <base64>'")
        raw = b64std(blob, f"signature line {n}")
        if len(raw) < 5:
            raise ValueError(f"signature line {n} is shorter than a key ID and a signature")
        sigs.append((name, raw[:4], raw[4:]))
    return body, sigs


def parse_checkpoint(body: str) -> dict[str, Any]:
    """{origin, size, root} of a checkpoint note text; raises ValueError."""
    lines = body[:-1].split("\n")
    if not 3 <= len(lines) <= 3 + MAX_EXTENSIONS or not lines[0]:
        raise ValueError("not a checkpoint body")
    size = lines[1]
    if not (size.isascii() and size.isdigit()) or (size != "0" and size[0] == "0") or \
            len(size) > 19 or int(size) > 2**63 - 1:
        raise ValueError("bad tree size")
    root = b64std(lines[2], "root hash")
    if len(root) != 32:
        raise ValueError("bad root hash")
    return {"origin": lines[0], "size": int(size), "root": root, "extensions": lines[3:]}


def tenants_line(extensions: list[str]) -> tuple[int, bytes] | None:
    """(n, heads_root) of the checkpoint's ``tenants <n> <base64>`` extension line
    (docs/tenants.md); None without one; raises ValueError when it is malformed or repeated."""
    found = [x for x in extensions if x.startswith("tenants ")]
    if not found:
        return None
    parts = found[0].split(" ")
    if len(found) > 1 or len(parts) != 3 or not (parts[1].isascii() and parts[1].isdigit()) \
            or (parts[1] != "0" and parts[1][0] == "0"):
        raise ValueError(f"malformed tenants line {found[0]!r}")
    root = b64std(parts[2], "the heads root")
    if len(root) != 32:
        raise ValueError("the heads root is not 32 bytes")
    return int(parts[1]), root


def tenant_genesis(ledger_id: str, tenant: str) -> bytes:
    if tenant == DEFAULT_TENANT:
        return sha(GENESIS_TAG + ledger_id.encode("utf-8"))
    return sha(TENANT_GENESIS_TAG + ledger_id.encode("utf-8") + b"\0" + tenant.encode("ascii"))


def entry_link(tenant: str, prev: bytes, seq: int, tseq: int, t: int, body: bytes) -> bytes:
    """entry_hash: the v1 link for "default" (tseq not hashed), else the tenant link."""
    if tenant == DEFAULT_TENANT:
        return sha(ENTRY_TAG + prev + struct.pack(">QQ", seq, t) + body)
    tb = tenant.encode("ascii")
    return sha(TENANT_ENTRY_TAG + prev + struct.pack(">QQQ", seq, tseq, t) + bytes([len(tb)])
               + tb + body)


def check_note(data: bytes, keys: list[tuple[str | None, bytes]]) -> tuple[bool, dict]:
    """(signed by a given key, {origin, size, root, body, signatures}) of a signed
    checkpoint; a failing signature by a given key fails the note."""
    body, sigs = parse_note(data)
    cp = {**parse_checkpoint(body), "body": body, "signatures": sigs}
    good = False
    for name, key_id, sig in sigs:
        for key_name, raw in keys:
            n = key_name or cp["origin"]
            if n == name and key_id == sha(n.encode() + b"\n\x01" + raw)[:4]:
                if not ed25519_ok(raw, sig, body.encode("utf-8")):
                    return False, cp
                good = True
    return good, cp


# -- witnesses (docs/anchoring.md: cosignature/v1, verifier keys, the quorum) ----------------
def parse_vkey(line: str) -> tuple[str, bytes, int, bytes]:
    """(name, key ID, signature type, public key) of a verifier key
    ``<name>+<key ID hex>+<base64(type || key)>``; raises ValueError."""
    name, _, rest = line.strip().partition("+")
    hex_id, _, blob = rest.partition("+")
    if not name or any(c.isspace() or c == "+" for c in name) or len(hex_id) != 8 or \
            any(c not in "0123456789abcdef" for c in hex_id):
        raise ValueError(f"{line.strip()[:40]!r} is not <name>+<8 hex>+<base64 key>")
    raw = b64std(blob, f"key of {name}")
    if len(raw) < 2 or raw[0] in (0x01, 0x04) and len(raw) != 33:
        raise ValueError(f"{name}: an Ed25519 key is 32 bytes after its type byte")
    if sha(name.encode() + b"\n" + raw).hex()[:8] != hex_id:
        raise ValueError(f"{name}: the key ID does not match the key")
    return name, bytes.fromhex(hex_id), raw[0], raw[1:]


def load_vkeys(paths: list[Path]) -> list[tuple[str, bytes, bytes]]:
    """The witness keys (signature type 0x04, cosignature/v1) of the files, one vkey a line
    ('#' comments); a key given twice is one key."""
    out: list[tuple[str, bytes, bytes]] = []
    for path in paths:
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip() and not line.lstrip().startswith("#"):
                name, key_id, sig_type, key = parse_vkey(line)
                if sig_type == 0x04 and (name, key_id, key) not in out:
                    out.append((name, key_id, key))
    return out


def check_cosignatures(cp: dict[str, Any], witnesses: list[tuple[str, bytes, bytes]]
                       ) -> tuple[dict[str, int], dict[str, str]]:
    """({witness name: timestamp} of the valid cosignatures, {name: why} of the given
    witnesses whose line does not verify).  Lines of other keys are ignored."""
    valid: dict[str, int] = {}
    invalid: dict[str, str] = {}
    for name, key_id, sig in cp["signatures"]:
        for w_name, w_id, w_key in witnesses:
            if (name, key_id) != (w_name, w_id):
                continue
            ts = int.from_bytes(sig[:8], "big")
            msg = f"cosignature/v1\ntime {ts}\n".encode() + cp["body"].encode("utf-8")
            if len(sig) == 72 and ts <= 2**63 - 1 and ed25519_ok(w_key, sig[8:], msg):
                valid[name] = max(ts, valid.get(name, 0))
                invalid.pop(name, None)
            elif name not in valid:
                invalid[name] = "does not verify" if len(sig) == 72 else \
                    f"is {len(sig)} bytes after the key ID, not 72"
    return valid, invalid


# -- attestations (docs/format-attestation.md; trust store folded from key events) ----------
class Trust:
    def __init__(self) -> None:
        self.keys: list[dict[str, Any]] = []

    def apply(self, seq: int, ev: dict[str, Any]) -> None:
        if ev.get("action") == "trust":
            self.keys.append({"issuer": ev.get("issuer"), "kid": ev["kid"], "jwk": ev["jwk"],
                              "thumbprint": ev["thumbprint"], "since": seq, "until": None,
                              "compromised": None})
            return
        for k in self.keys:
            if k["issuer"] == ev.get("issuer") and k["kid"] == ev.get("kid") and \
                    k["until"] is None and ev.get("thumbprint") in (None, k["thumbprint"]):
                k["until"] = seq
                if ev.get("action") == "revoke" and ev.get("compromised_since_us") is not None:
                    k["compromised"] = ev["compromised_since_us"]

    @staticmethod
    def active(k: dict[str, Any], seq: int) -> bool:
        return k["since"] < seq and (k["until"] is None or seq <= k["until"])

    def judge(self, token: str, seq: int, t: int, row: dict[str, Any]) -> tuple[str, str]:
        """(disposition, code) of one token as of the row's ``seq`` and time ``t`` (µs);
        ``row``: its proof_ref, query, admission and engine (None: not checked)."""
        try:
            p = token.split(".")
            if len(p) != 3:
                raise ValueError("three parts")
            header, claims = (json.loads(b64url_lenient(x)) for x in p[:2])
            sig, msg = b64url_lenient(p[2]), f"{p[0]}.{p[1]}".encode("ascii")
            if not isinstance(header, dict) or not isinstance(claims, dict):
                raise ValueError("not objects")
        except (ValueError, UnicodeError, binascii.Error, RecursionError):
            return "failed", "attestation_malformed"
        kid = header.get("kid") if isinstance(header.get("kid"), str) else None
        iss = claims.get("iss") if isinstance(claims.get("iss"), str) else None
        tok = (header, claims, sig, msg)
        foreign = [k for k in self.keys if k["issuer"] != iss and self.active(k, seq)]
        if iss is None or not any(k["issuer"] == iss and k["since"] < seq for k in self.keys):
            if any(es256_ok(k["jwk"], sig, msg) for k in foreign):
                return "failed", "attestation_issuer_mismatch"
            later = [k for k in self.keys if k["issuer"] == iss and k["kid"] == kid
                     and k["since"] >= seq]
            if later and self._check(tok, later, None, t, row)[0] == "verified":
                return "verified", "attestation_valid_later_key"
            return "abstained", "unknown_issuer_key"
        res = self._check(tok, [k for k in self.keys if k["issuer"] == iss and k["kid"] == kid],
                          seq, t, row)
        if res[1] in ("attestation_unknown_kid", "attestation_signature_invalid") and \
                any(es256_ok(k["jwk"], sig, msg) for k in foreign):
            return "failed", "attestation_issuer_mismatch"
        return res

    def _check(self, tok: tuple[dict, dict, bytes, bytes], keys: list[dict], seq: int | None,
               t: int, row: dict[str, Any]) -> tuple[str, str]:
        header, claims, sig, msg = tok
        if header.get("alg") != "ES256":
            return "failed", "attestation_alg_not_allowed"
        if header.get("typ") != "qwed-attestation+jwt":
            return "failed", "attestation_typ"
        if "crit" in header:
            return "failed", "attestation_crit"
        active = [k for k in keys if seq is None or self.active(k, seq)]
        if not active:
            return "failed", "attestation_unknown_kid"
        key = next((k for k in active if es256_ok(k["jwk"], sig, msg)), None)
        if key is None:
            return "failed", "attestation_signature_invalid"
        if any(c not in claims for c in ("iss", "sub", "iat", "exp", "jti", "qwed")):
            return "failed", "attestation_claims_missing"
        if key["compromised"] is not None and t >= key["compromised"]:
            return "failed", "attestation_key_compromised"
        code = claims_problem(claims, t, row)
        return ("verified", "attestation_valid") if code is None else ("failed", code)


def claims_problem(c: dict[str, Any], t: int, row: dict[str, Any]) -> str | None:
    """The code of the first of rules 3-15 (docs/format-attestation.md §5) broken."""
    def whole(v: Any) -> bool:
        return type(v) is int

    iat, exp, nbf = c["iat"], c["exp"], c.get("nbf")
    if not whole(iat) or not whole(exp) or nbf is not None and not whole(nbf):
        return "attestation_claims_missing"
    if iat * 1_000_000 > t + SKEW_US:
        return "attestation_not_yet_valid"
    if nbf is not None and nbf * 1_000_000 > t + SKEW_US:
        return "attestation_nbf_after_record"
    if exp * 1_000_000 <= t:
        return "attestation_expired_at_record"
    if not isinstance(c["jti"], str) or not isinstance(c["sub"], str):
        return "attestation_claims_missing"
    q = c["qwed"]
    res = q.get("result") if isinstance(q, dict) else None
    if not isinstance(q, dict) or not isinstance(res, dict):
        return "attestation_claims_missing"
    if "version" in q and q["version"] != "1.0":
        return "attestation_version_unsupported"
    if res.get("status") != "VERIFIED":
        return "attestation_status_mismatch"
    if q.get("proof_hash") != row["proof_ref"]:
        return "attestation_proof_mismatch"
    if row["query"] is not None and q.get("query_hash") != digest(row["query"].encode("utf-8")):
        return "attestation_query_mismatch"
    if row["admission"] is not None and q.get("admission") != row["admission"]:
        return "attestation_admission_mismatch"
    if "query_hash" in q and c["sub"] != q["query_hash"]:
        return "attestation_subject_mismatch"
    if row["engine"] is not None and "engine" in res and res["engine"] != row["engine"]:
        return "attestation_engine_mismatch"
    return None


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
    def __init__(self, directory: Path, trusted: list[tuple[str | None, bytes]] | None,
                 witnesses: list[tuple[str, bytes, bytes]] | None = None,
                 quorum: int | None = None) -> None:
        self.dir, self.trusted, self.r = directory, trusted, Report()
        self.witnesses = witnesses or []
        self.quorum = len({w[0] for w in self.witnesses}) if quorum is None else quorum
        self.manifest: dict[str, Any] = {}
        self.cp: dict[str, Any] | None = None
        self.trust = Trust()
        self.v2 = False  # a ledger-export/2 bundle: lines carry tenant and tseq
        self.signed_ok: dict[str, bool] = {}

    def read(self, name: str) -> bytes | None:
        path = self.dir / name
        if not path.is_file():
            self.r.fail(name, None, "file_missing", f"{name} is missing")
            return None
        return path.read_bytes()

    def run(self) -> Report:
        own: list[tuple[str | None, bytes]] = []
        if self.read("jwks.json") is not None:
            try:
                own = ed25519_keys(self.dir / "jwks.json")
            except (ValueError, UnicodeError, RecursionError) as exc:
                self.r.fail("jwks.json", None, "jwks_malformed", str(exc))
        keys = self.trusted if self.trusted is not None else own
        self.signatures(keys)
        self.files()
        proofs = self.proofs()
        events = self.walk("key_events.jsonl")
        for row in events:
            if row["kind"] == "key_event" and row["doc"] is not None:
                self.trust.apply(row["seq"], row["doc"])
        carried: list[dict[str, Any]] = []
        if REDACTIONS in (self.manifest.get("files") or {}):
            carried = self.walk(REDACTIONS)
            for row in carried:
                if row["kind"] != "redaction":
                    self.r.fail(REDACTIONS, row["seq"], "not_a_redaction", row["kind"])
        rows = self.walk("entries.jsonl")
        self.redactions(rows, carried)
        self.redaction_signatures(carried + rows, keys)
        for row in rows:
            self.attestation(row)
        for name, file_rows in (("key_events.jsonl", events), (REDACTIONS, carried),
                                ("entries.jsonl", rows)):
            self.intervals(name, file_rows, proofs.get(name, []))
        self.claims(rows, events)
        self.csv_view(rows)
        if self.witnesses or self.quorum:
            self.anchors()
        m = self.manifest
        whole = self.tenant_chain(rows) if "tenant" in m else bool(
            m.get("contiguous") is True and not m.get("filters"))
        signed = self.trusted is not None and len(self.signed_ok) == 2 and all(
            self.signed_ok.values())
        self.r.complete = bool(whole and signed and not self.r.findings)
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
                if self.manifest.get("format") not in EXPORT_FORMATS:
                    raise ValueError("format is not ledger-export/1 or ledger-export/2")
                if "tenant" in self.manifest and \
                        self.manifest["format"] != "ledger-export/2":
                    raise ValueError("a tenant export is ledger-export/2")
                for key in MANIFEST_KEYS:
                    if key not in self.manifest:
                        raise ValueError(f"{key} is missing")
            except (ValueError, AttributeError) as exc:
                self.r.fail("manifest.json", None, "manifest_malformed", str(exc))
                self.manifest = {}
            self.v2 = self.manifest.get("format") == "ledger-export/2"
            if claims and self.manifest and (claims.get("sub"), claims.get("iss")) != (
                    self.manifest["ledger_id"], self.manifest["origin"]):
                self.r.fail("manifest.jwt", None, "manifest_claims_mismatch", "sub/iss are "
                            "not the manifest's ledger_id/origin")
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
        self.signed_ok[name] = ok
        if not ok:
            self.r.fail(name, None, "signature_invalid", "no valid signature by a known key")
        elif self.trusted is None:
            self.r.abstain(name, None, "untrusted_key", "verified only with the bundle's "
                           "own jwks.json (give --jwks)")

    def files(self) -> None:
        listed = self.manifest.get("files") or {}
        if self.manifest and sorted(set(listed) - {REDACTIONS}) != sorted(FILES):
            self.r.fail("manifest.json", None, "manifest_malformed", "wrong file list")
        for name, want in listed.items():
            data = self.read(name) if name in FILES or name == REDACTIONS else None
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
                need(set(p) == {"file", "first_seq", "seq", "tree_size", "inclusion_path"})
                need(p["file"] in PROOF_ORDER)
                need(all(type(p[k]) is int and p[k] >= 0 for k in ("first_seq", "seq")))
                need(p["first_seq"] <= p["seq"] and self.cp and p["tree_size"] == self.cp["size"])
                p["path"] = [bytes.fromhex(h) for h in p["inclusion_path"]]
                need(all(len(h) == 32 and h.hex() == t for h, t in zip(p["path"],
                                                                         p["inclusion_path"],
                                                                         strict=True)))
            except (AssertionError, ValueError, TypeError, KeyError):
                self.r.fail("proofs.jsonl", p.get("seq") if isinstance(p, dict) else None,
                            "proof_invalid", f"line {n} is not a valid proof record")
                continue
            # the files' intervals in PROOF_ORDER, each file's by ascending seq, disjoint
            before = [q for f in PROOF_ORDER[PROOF_ORDER.index(p["file"]) + 1:]
                      for q in out.get(f, [])]
            mine = out.get(p["file"], [])
            if before or mine and p["first_seq"] <= mine[-1]["seq"]:
                self.r.fail("proofs.jsonl", p["seq"], "proof_out_of_order", f"line {n} "
                            "precedes or overlaps an earlier interval, or follows another "
                            "file's")
                continue
            out.setdefault(p["file"], []).append(p)
        return out

    # -- entries ------------------------------------------------------------------------
    def walk(self, name: str) -> list[dict[str, Any]]:
        rows: list[dict[str, Any]] = []
        last_of: dict[str, dict[str, Any]] = {}  # tenant -> its last row of the file
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
            # the previous entry of the same chain: the row before it when the seqs are
            # consecutive and (ledger-export/2) of one tenant, or the tenant's row of the
            # previous tseq
            mine = last_of.get(row["tenant"])
            if rows and row["seq"] == rows[-1]["seq"] + 1 and \
                    row["tenant"] == rows[-1]["tenant"] or \
                    self.v2 and mine is not None and mine["tseq"] == row["tseq"] - 1:
                before = rows[-1] if row["seq"] == rows[-1]["seq"] + 1 and \
                    row["tenant"] == rows[-1]["tenant"] else mine
                if row["prev_hash"] != before["entry_hash"]:  # type: ignore[index]
                    self.r.fail(name, row["seq"], "broken_link", "prev_hash is not the "
                                "previous entry's entry_hash")
            if self.v2 and mine is not None and row["tseq"] <= mine["tseq"]:
                self.r.fail(name, row["seq"], "tenant_seq_mismatch", f"tseq {row['tseq']} "
                            f"does not follow tseq {mine['tseq']} of tenant {row['tenant']}")
            last_of[row["tenant"]] = row
            if rows and row["t"] < rows[-1]["t"]:
                self.r.fail(name, row["seq"], "time_reversed", "recorded_at decreases")
            rows.append(row)
        return rows

    def entry(self, name: str, o: dict[str, Any]) -> dict[str, Any]:
        """Recompute one entry (format.md §3–§5, §10); fail() on every mismatch."""
        if set(o) != (LINE_KEYS | {"tenant", "tseq"} if self.v2 else LINE_KEYS):
            raise ValueError("wrong keys")
        seq, t, kind = o["seq"], o["recorded_at_us"], o["kind"]
        if type(seq) is not int or type(t) is not int or seq < 0 or t < 0:
            raise ValueError("seq/recorded_at_us must be non-negative integers")
        tenant, tseq = (o["tenant"], o["tseq"]) if self.v2 else (DEFAULT_TENANT, seq)
        if not isinstance(tenant, str) or not TENANT_RE.match(tenant) or \
                type(tseq) is not int or not 0 <= tseq <= 2**63 - 1:
            raise ValueError("tenant must be a tenant id and tseq a non-negative integer")

        def fail(code: str, msg: str) -> None:
            self.r.fail(name, seq, code, msg)

        envelope = o["envelope"].encode("utf-8")
        body, prev, ehash = (hex32(o[k]) for k in ("body_hash", "prev_hash", "entry_hash"))
        if sha(ENVELOPE_TAG + envelope) != body:
            fail("body_hash_mismatch", "the envelope does not hash to body_hash")
        if entry_link(tenant, prev, seq, tseq, t, body) != ehash:
            fail("entry_hash_mismatch", "entry_hash does not recompute (with the link of "
                 f"tenant {tenant})")
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
            salt_text = p.get("salt_b64")
            salt = base64.b64decode(salt_text or "", validate=True)
            # canonical base64 only: another text of the same bytes is an edited record
            if base64.b64encode(raw).decode() != p["data_b64"] or \
                    (salt_text is not None and base64.b64encode(salt).decode() != salt_text):
                fail("payload_encoding_invalid", f"payload {pname} is not canonical base64")
                continue
            if salted:  # the hiding commitment of format v2
                got = digest(PAYLOAD_TAG + salt + raw) if len(salt) == 32 else None
            else:
                got = digest(raw)
            if got != committed.get(pname):
                fail("payload_digest_mismatch", f"payload {pname} does not hash to its digest")
                continue
            data[pname] = raw
        doc_bytes = data.get(DOC_OF[kind])
        doc = json.loads(doc_bytes) if doc_bytes is not None else None
        if kind == "result":
            self.contract(fail, env, doc, data)
        elif kind == "key_event" and doc is not None:
            self.key_event(fail, env, doc, doc_bytes)  # type: ignore[arg-type]
        elif kind in DOC_FIELDS and doc_bytes is not None:
            self.document(fail, kind, env, doc, doc_bytes)
        return {"seq": seq, "t": t, "kind": kind, "env": env, "doc": doc, "data": data,
                "absent": absent, "prev_hash": prev, "entry_hash": ehash, "file": name,
                "tenant": tenant, "tseq": tseq}

    def redactions(self, rows: list[dict[str, Any]],
                   carried: list[dict[str, Any]] | None = None) -> None:
        """Absent payloads: abstained "redacted" when an earlier redaction entry of the bundle
        (in entries.jsonl or redactions.jsonl) names them (docs/format.md, "Redaction"), else
        failed; a payload present although a redaction erased it fails too."""
        erased: dict[tuple[int, str], int] = {}
        by_seq = {r["seq"]: r for r in (carried or []) + rows}
        for row in (by_seq[s] for s in sorted(by_seq)):
            doc = row["doc"]
            if row["kind"] != "redaction" or not isinstance(doc, dict) or \
                    doc.get("format") not in ("ledger-redaction/1", "ledger-redaction/2"):
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

    def redaction_signatures(self, rows: list[dict[str, Any]],
                             keys: list[tuple[str | None, bytes]]) -> None:
        """A redaction is signed by the ledger key (format ledger-redaction/2): an EdDSA JWS,
        typ ledger-redaction+jwt, claims exactly {"ledger": <ledger id>, "request_digest":
        sha256 of the canonical document without "signature"}.  An unsigned /1 document is
        abstained (redaction_unsigned), failed once a signed one came before it."""
        signed_before = None
        by_seq = {r["seq"]: r for r in rows}
        for row in (by_seq[s] for s in sorted(by_seq)):
            doc, seq, file = row["doc"], row["seq"], row["file"]
            if row["kind"] != "redaction" or not isinstance(doc, dict):
                continue
            if doc.get("format") == "ledger-redaction/1":
                if signed_before is None:
                    self.r.abstain(file, seq, "redaction_unsigned",
                                   "an unsigned ledger-redaction/1 request: who asked "
                                   "cannot be confirmed")
                else:
                    self.r.fail(file, seq, "redaction_unsigned",
                                f"an unsigned request after the signed redaction "
                                f"{signed_before}")
                continue
            if doc.get("format") != "ledger-redaction/2":
                continue
            signed_before = seq if signed_before is None else signed_before
            why = self.redaction_signature(doc, keys)
            if why == "untrusted":
                self.r.abstain(file, seq, "untrusted_key", "the redaction's "
                               "signature verifies only with the bundle's own jwks.json")
            elif why is not None:
                self.r.fail(file, seq, "redaction_signature_invalid", why)

    def redaction_signature(self, doc: dict[str, Any],
                            keys: list[tuple[str | None, bytes]]) -> str | None:
        token = doc.get("signature")
        parts = token.split(".") if isinstance(token, str) else []
        if len(parts) != 3:
            return "the signature is not a compact JWS"
        try:
            header, claims = (json.loads(b64url(p), object_pairs_hook=unique)
                              for p in parts[:2])
            sig = b64url(parts[2])
        except (ValueError, binascii.Error):
            return "the signature is not a compact JWS"
        if not isinstance(header, dict) or header.get("alg") != "EdDSA" or \
                header.get("typ") != "ledger-redaction+jwt" or "crit" in header:
            return "header must be alg EdDSA, typ ledger-redaction+jwt"
        body = {k: v for k, v in doc.items() if k != "signature"}
        want = {"ledger": self.manifest.get("ledger_id"), "request_digest": digest(canon(body))}
        if claims != want:
            return "the signature's claims are not this ledger and this request"
        msg = f"{parts[0]}.{parts[1]}".encode("ascii")
        if not any(ed25519_ok(raw, sig, msg) for _, raw in keys):
            return "the signature does not verify with the ledger's keys"
        return None if self.trusted is not None else "untrusted"

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
    def document(fail: Any, kind: str, env: dict, doc: Any, doc_bytes: bytes) -> None:
        """audit_run, import and reverify_run documents: a JSON object that repeats the
        envelope's fields (as ``ledger audit`` and ``ledger verify-export`` check them)."""
        if not isinstance(doc, dict):
            fail("document_unreadable", f"the {DOC_OF[kind]} document is not a JSON object")
            return
        for name in DOC_FIELDS[kind]:
            if doc.get(name) != env.get(name):
                fail("document_envelope_mismatch",
                     f"{DOC_OF[kind]}.{name} differs from the envelope")

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
        env = row["env"]
        binding = {"proof_ref": env["proof_ref"], "admission": env["admission"],
                   "engine": env["engine"],
                   "query": query.decode("utf-8", "replace") if query is not None else None}
        disp, code = self.trust.judge(token.decode("ascii", "replace"), row["seq"], row["t"],
                                      binding)
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
            if len({by_seq[s]["tenant"] for s in span}) > 1:
                self.r.fail(name, p["seq"], "proof_interval_mixed", "the interval holds "
                            "entries of several tenants: its proof does not reach them all")
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
                    try:
                        bound = rfc3339_us(values)
                    except (ValueError, TypeError, AttributeError):
                        self.r.fail("manifest.json", None, "manifest_malformed", f)
                        continue
                    if (r["t"] < bound) if f == "since" else (r["t"] >= bound):
                        self.r.fail("entries.jsonl", r["seq"], "entry_outside_filter", f)
                    continue
                value = r["kind"] if f == "kind" else r["tenant"] if f == "tenant" \
                    else fields.get(f)
                if f == "subject" and value is None and "subject" in r["data"]:
                    value = r["data"]["subject"].decode("utf-8", "replace")  # format v2
                if not isinstance(values, list) or value not in values:
                    self.r.fail("entries.jsonl", r["seq"], "entry_outside_filter", f)
            if r["kind"] == "key_event" and event_hashes.get(r["seq"]) != r["entry_hash"]:
                self.r.fail("entries.jsonl", r["seq"], "key_event_not_listed", "missing")
        got = {"entries": len(rows), "key_events": len(events), "by_status": by_status,
               "by_kind": by_kind}
        if m.get("counts") != got:
            self.r.fail("entries.jsonl", None, "count_mismatch", f"manifest {m.get('counts')}"
                        f", bundle {got}")


    # -- a tenant export (docs/tenants.md, "A complete tenant export") --------------------
    def tenant_chain(self, rows: list[dict[str, Any]]) -> bool:
        """Whether entries.jsonl is exactly the tenant's chain the checkpoint commits to:
        every row of the tenant, tseq 0, 1, ... linked from its genesis to the manifest's
        head, after ``count`` rows, and that head a leaf of the checkpoint's heads tree."""
        sec, m = self.manifest.get("tenant"), self.manifest
        try:
            if not isinstance(sec, dict) or \
                    set(sec) - {"absence"} != {"id", "count", "head_hash", "heads"} \
                    or not isinstance(sec["id"], str) or not TENANT_RE.match(sec["id"]) \
                    or type(sec["count"]) is not int or sec["count"] < 0:
                raise ValueError("tenant must be {id, count, head_hash, heads[, absence]}")
            if "absence" in sec and (sec["count"] != 0 or sec["heads"] is not None):
                raise ValueError("only a tenant without entries has an absence proof")
            tenant, count = sec["id"], sec["count"]
            head = None if sec["head_hash"] is None else hex32(sec["head_hash"])
            if (head is None) != (count == 0):
                raise ValueError("head_hash is null exactly when count is 0")
            if m.get("filters") != {"tenant": [tenant]}:
                raise ValueError("a tenant export's filters are {\"tenant\": [its id]}")
        except (ValueError, TypeError) as exc:
            self.r.fail("manifest.json", None, "manifest_malformed", f"tenant: {exc}")
            return False
        ok = True
        prev = tenant_genesis(str(m.get("ledger_id")), tenant)
        mine = [r for r in rows if r["tenant"] == tenant]
        for r in rows:
            if r["tenant"] != tenant:
                self.r.fail("entries.jsonl", r["seq"], "tenant_foreign_entry",
                            f"an entry of tenant {r['tenant']} in the export of {tenant}")
                ok = False
        for n, r in enumerate(mine):
            if r["tseq"] != n or r["prev_hash"] != prev:
                self.r.fail("entries.jsonl", r["seq"], "tenant_incomplete",
                            f"tseq {r['tseq']} where {n} comes next, or not linked to the "
                            "tenant's previous entry (or genesis)")
                ok = False
            prev = r["entry_hash"]
        if len(mine) != count or (count and prev != head):
            self.r.fail("entries.jsonl", None, "tenant_incomplete", f"{len(mine)} entries of "
                        f"the tenant ending at another hash; its head counts {count}")
            ok = False
        return self.tenant_head(tenant, count, head, sec["heads"], sec.get("absence", ABSENT)) \
            and ok

    def tenant_head(self, tenant: str, count: int, head: bytes | None, heads: Any,
                    absence: Any) -> bool:
        """Whether (tenant, count, head) is what the signed checkpoint commits to (for a
        tenant without entries under a tenants line: whether ``absence`` proves it has no
        leaf in the heads tree)."""
        if self.cp is None:
            return False
        try:
            line = tenants_line(self.cp["extensions"])
        except ValueError as exc:
            self.r.fail("checkpoint.txt", None, "tenant_head_unproven", str(exc))
            return False
        if line is None:  # only "default" had entries below the size: all of them
            want = self.cp["size"] if tenant == DEFAULT_TENANT else 0
            if absence is not ABSENT:
                self.r.fail("manifest.json", None, "tenant_absence_invalid", "an absence "
                            "proof under a checkpoint without a tenants line")
                return False
            if count != want or heads is not None:
                self.r.fail("manifest.json", None, "tenant_head_unproven", "without a "
                            "tenants line the default tenant's chain is every entry of the "
                            f"checkpoint and no other tenant has one (count {want})")
                return False
            return True
        if count == 0:
            return self.tenant_absent(tenant, absence, line)
        try:
            need(isinstance(heads, dict) and set(heads) == {"count", "index", "path"})
            need(heads["count"] == line[0] and type(heads["index"]) is int)
            path = [bytes.fromhex(x) for x in heads["path"]]
            need(all(len(x) == 32 and x.hex() == y for x, y in zip(path, heads["path"],
                                                                     strict=True)))
            tb = tenant.encode("ascii")
            leaf = sha(b"\x00" + bytes([len(tb)]) + tb + struct.pack(">Q", count)
                       + (head or b""))
            need(root_from_leaf(heads["index"], line[0], leaf, path) == line[1])
        except (AssertionError, ValueError, TypeError, KeyError):
            self.r.fail("manifest.json", None, "tenant_head_unproven", "the tenant head is "
                        "not a leaf of the heads tree the checkpoint commits to")
            return False
        return True

    def tenant_absent(self, tenant: str, absence: Any, line: tuple[int, bytes]) -> bool:
        """Whether the manifest's ``tenant.absence`` proves that the tenant has no leaf in
        the heads tree of the tenants line ``line`` = (n, heads_root): the leaves are sorted
        by id, so adjacent leaves i, i+1 with id_i < tenant < id_i+1, or leaf 0 alone with
        tenant < id_0, or leaf n-1 alone with id_n-1 < tenant, leave no place for it."""
        if absence is ABSENT:  # a bundle written before absence proofs
            self.r.abstain("manifest.json", None, "tenant_absence_unproven", "the tenant "
                           "has no head in the checkpoint; its absence is not proven")
            return False
        if isinstance(absence, dict) and type(absence.get("v")) is int and absence["v"] != 1:
            self.r.abstain("manifest.json", None, "tenant_absence_unproven", "absence proof "
                           f"version {absence['v']} is not known to this verifier")
            return False
        n, root = line
        try:
            need(isinstance(absence, dict) and set(absence) == {"v", "leaves", "left",
                                                                  "right"}, "its keys")
            need(type(absence["v"]) is int and absence["v"] == 1, "v is not the integer 1")
            need(type(absence["leaves"]) is int, "leaves is not an integer")
            need(absence["leaves"] == n, "leaves is not the n of the tenants line")
            key = tenant.encode("ascii")
            idx = {}
            for side in ("left", "right"):
                x = absence[side]
                if x is None:
                    continue
                need(isinstance(x, dict) and set(x) == {"id", "count", "head_hash", "index",
                                                        "path"}, f"{side}: its keys")
                need(isinstance(x["id"], str) and TENANT_RE.match(x["id"]), f"{side}: id")
                need(type(x["count"]) is int and 0 < x["count"] < 2**63, f"{side}: count")
                need(type(x["index"]) is int and isinstance(x["path"], list), side)
                path = [bytes.fromhex(p) for p in x["path"]]
                need(all(len(b) == 32 and b.hex() == p for b, p in zip(path, x["path"],
                                                                        strict=True)), side)
                tb = x["id"].encode("ascii")
                leaf = sha(b"\x00" + bytes([len(tb)]) + tb + struct.pack(">Q", x["count"])
                           + hex32(x["head_hash"]))
                need(root_from_leaf(x["index"], n, leaf, path) == root,
                     f"{side}: not leaf {x['index']} of the heads tree")
                need((tb < key) if side == "left" else (key < tb),
                     f"{side}: {x['id']} is not on the {side} of {tenant}")
                idx[side] = x["index"]
            need(idx, "neither a left nor a right leaf")
            if "left" not in idx:
                need(idx["right"] == 0, "a right leaf alone is not leaf 0")
            elif "right" not in idx:
                need(idx["left"] == n - 1, "a left leaf alone is not the last leaf")
            else:
                need(idx["right"] == idx["left"] + 1, "the leaves are not adjacent")
        except (AssertionError, ValueError, TypeError, KeyError) as exc:
            self.r.fail("manifest.json", None, "tenant_absence_invalid", "the proof that the "
                        f"tenant has no head in the checkpoint does not hold: {exc}")
            return False
        return True

    # -- the CSV view and the anchors ---------------------------------------------------
    def csv_view(self, rows: list[dict[str, Any]]) -> None:
        """entries.csv must be, byte for byte, the view docs/export.md defines of the
        entries (rows whose line could not be read are left out)."""
        data = self.read("entries.csv")
        if data is None:
            return
        buf = io.StringIO()
        out = csv.writer(buf)  # the excel dialect: CRLF, quotes only where needed
        out.writerow(CSV_HEADER)
        for r in rows:
            cols = {c: r["env"].get(f) for c, f in FILTER_FIELD[r["kind"]].items()}
            msg = None
            if r["kind"] == "result" and isinstance(r["doc"], dict):
                msg = r["doc"].get("agent_message")
            out.writerow([str(r["seq"]), rfc3339_text(r["t"]), cell(r["kind"])]
                         + [cell(cols.get(c)) for c in CSV_HEADER[3:-2]]
                         + [cell(msg), "sha256:" + r["entry_hash"].hex()])
        if buf.getvalue().encode("utf-8") != data:
            self.r.fail("entries.csv", None, "csv_view_mismatch", "entries.csv is not the "
                        "view of entries.jsonl")

    def anchors(self) -> None:
        """The witness quorum (docs/anchoring.md) on checkpoint.txt's cosignature lines."""
        if self.cp is None:
            return  # the checkpoint is already a finding
        valid, invalid = check_cosignatures(self.cp, self.witnesses)
        for name, why in sorted(invalid.items()):
            self.r.fail("checkpoint.txt", None, "cosignature_invalid",
                        f"the cosignature of witness {name} {why}")
        if len(valid) < self.quorum:
            self.r.fail("checkpoint.txt", None, "witness_quorum_not_met",
                        f"{len(valid)} valid cosignature(s) of the given witnesses "
                        f"({', '.join(sorted(valid)) or 'none'}), need {self.quorum}")


CSV_HEADER = ["seq", "recorded_at", "kind", "engine", "status", "constraint_id", "proof_ref",
              "subject", "producer", "admission", "att_verdict", "att_kid", "agent_message",
              "entry_hash"]


def cell(value: Any) -> str:
    """A text cell of entries.csv: null is empty; the formula guard prefixes "'"."""
    text = "" if value is None else str(value)
    return "'" + text if text.startswith(("=", "+", "-", "@", "\t", "\r")) else text


EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def rfc3339_text(us: int) -> str:
    return (EPOCH + timedelta(microseconds=us)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def rfc3339_us(text: str) -> int:
    """µs since the epoch of an RFC 3339 time (the manifest writes UTC with ``Z``)."""
    t = datetime.fromisoformat(text[:-1] + "+00:00" if text.endswith("Z") else text)
    delta = (t if t.tzinfo else t.replace(tzinfo=UTC)) - EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("directory", type=Path)
    ap.add_argument("--jwks", type=Path, help="trusted ledger keys (JWKS with Ed25519 keys)")
    ap.add_argument("--witness-key", type=Path, action="append", default=[], metavar="FILE",
                    help="witness verifier keys (vkey lines, docs/anchoring.md); repeatable")
    ap.add_argument("--quorum", type=int, default=None, metavar="N",
                    help="valid cosignatures needed from distinct --witness-key witnesses "
                         "(default: all of them)")
    ap.add_argument("--json", action="store_true", help="print the report as JSON")
    args = ap.parse_args(argv)
    if not args.directory.is_dir():
        print(f"error: {args.directory} is not a directory", file=sys.stderr)
        return 2
    try:
        trusted = ed25519_keys(args.jwks) if args.jwks else None
    except (OSError, ValueError, binascii.Error) as exc:
        print(f"error: --jwks: cannot read {args.jwks}: {exc}", file=sys.stderr)
        return 2
    try:
        witnesses = load_vkeys(args.witness_key)
    except (OSError, ValueError) as exc:
        print(f"error: --witness-key: {exc}", file=sys.stderr)
        return 2
    names = len({w[0] for w in witnesses})
    if args.quorum is not None and not 0 <= args.quorum <= names:
        print(f"error: --quorum {args.quorum} must be between 0 and the {names} distinct "
              "witness(es) of --witness-key", file=sys.stderr)
        return 2
    r = Bundle(args.directory, trusted, witnesses, args.quorum).run()
    if args.json:
        print(json.dumps({"findings": r.findings, "abstentions": r.abstentions,
                          "complete": r.complete}, indent=2))
    for f in r.findings[:20]:
        print(f"  {f['file']} seq {f['seq']}: {f['code']}: {f['message']}", file=sys.stderr)
    outcome = "failed" if r.findings else "unverified" if r.abstentions else "passed"
    print(f"verify_bundle: {outcome}: {len(r.findings)} finding(s), "
          f"{len(r.abstentions)} abstention(s), complete: {str(r.complete).lower()}",
          file=sys.stderr)
    return {"passed": 0, "failed": 1, "unverified": 3}[outcome]


if __name__ == "__main__":
    sys.exit(main())
