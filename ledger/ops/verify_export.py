"""Export bundles (format ``ledger-export/1``, docs/export.md): the file format, and the
offline verifier behind ``ledger verify-export``.

No database: this module never imports ``ledger.store`` or SQLAlchemy (a test keeps it
so).  Rows rebuilt from ``entries.jsonl`` go through the same pure per-row checks as
``ledger audit`` (:class:`ledger.core.audit.ChainAuditor`); consecutive seqs get link
checks, and each run of consecutive rows is anchored by its own ``prev_hash`` and proven
by the inclusion proof of its declared interval's last entry (``proofs.jsonl``) against
the signed checkpoint.  Attestations are judged with a trust store folded from
``key_events.jsonl``.  Every finding names the bundle file and, where there is one, the
seq; the report and exit codes are those of ``ledger audit`` (0 / 1 / 3).
"""

from __future__ import annotations

import base64
import binascii
import csv
import hashlib
import io
import json
from collections import Counter
from collections.abc import Iterator
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from ledger.clock import format_us, parse_rfc3339
from ledger.core.audit import (
    CONTRACT_VIOLATION,
    DELETED,
    FORKED,
    PAYLOAD_MODIFIED,
    REORDERED,
    SIGNATURE_INVALID,
    TRUNCATED,
    ChainAuditor,
)
from ledger.core.entry import COLUMN_MAP, PAYLOAD_MAP, parse_hash_hex
from ledger.core.merkle import leaf_hash, verify_inclusion
from ledger.core.note import Checkpoint, NoteError, parse_checkpoint_body, parse_note
from ledger.core.policy import Policy, PolicyError, parse_policy
from ledger.crypto.keys import PublicKeyRef, jwk_thumbprint, known_keys, load_public_keys
from ledger.crypto.trust import TrustStore, check_attestation
from ledger.errors import LedgerError, ProofError, UsageError

EXPORT_FORMAT = "ledger-export/1"
REPORT_FORMAT = "ledger-export-verification/1"
MANIFEST, MANIFEST_JWT = "manifest.json", "manifest.jwt"
ENTRIES, CSV_VIEW, KEY_EVENTS = "entries.jsonl", "entries.csv", "key_events.jsonl"
PROOFS, CHECKPOINT, JWKS = "proofs.jsonl", "checkpoint.txt", "jwks.json"
LISTED_FILES = (ENTRIES, CSV_VIEW, KEY_EVENTS, PROOFS, CHECKPOINT, JWKS)
LINE_KEYS = frozenset({"seq", "kind", "recorded_at_us", "envelope", "body_hash", "prev_hash",
                       "entry_hash", "payloads"})
PROOF_KEYS = frozenset({"file", "first_seq", "seq", "tree_size", "inclusion_path"})
CSV_HEADER = ["seq", "recorded_at", "kind", "engine", "status", "constraint_id", "proof_ref",
              "subject", "producer", "admission", "att_verdict", "att_kid", "agent_message",
              "entry_hash"]
_CSV_COLUMNS = CSV_HEADER[3:-2]
EXIT_CODES = {"passed": 0, "failed": 1, "unverified": 3}
_COLUMNS = tuple(dict.fromkeys(
    ["seq", "kind", "recorded_at"] + [c for m in COLUMN_MAP.values() for c in m.values()]
    + [c for m in PAYLOAD_MAP.values() for c in m.values()]
    + ["envelope", "body_hash", "prev_hash", "entry_hash"]))
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


# -- the format (shared with the writer, ledger/ops/export.py) ---------------------------
def dump_line(obj: dict[str, Any]) -> bytes:
    """One JSON Lines record: sorted keys, no spaces, raw UTF-8, a final LF."""
    return (json.dumps(obj, ensure_ascii=False, separators=(",", ":"), sort_keys=True)
            + "\n").encode("utf-8")


def entry_record(seq: int, kind: str, recorded_at_us: int, envelope: bytes, body: str,
                 prev: str, entry: str, payloads: dict[str, tuple[str, bytes | None]],
                 ) -> dict[str, Any]:
    """The ``entries.jsonl`` / ``key_events.jsonl`` object of one entry (hashes as text)."""
    return {"seq": seq, "kind": kind, "recorded_at_us": recorded_at_us,
            "envelope": envelope.decode("utf-8"), "body_hash": body, "prev_hash": prev,
            "entry_hash": entry,
            "payloads": {name: {"digest": d, "data_b64": None if data is None
                                else base64.b64encode(data).decode("ascii")}
                         for name, (d, data) in payloads.items()}}


_str = json.encoder.encode_basestring  # the C string encoder json.dumps uses (no ASCII escaping)


def entry_line(seq: int, kind: str, recorded_at_us: int, envelope: bytes, body: str,
               prev: str, entry: str, payloads: dict[str, tuple[str, bytes | None]]) -> bytes:
    """``dump_line(entry_record(...))``, byte for byte, without building the dicts (the
    export's hot path; a test compares the two)."""
    items = []
    for name in sorted(payloads):
        d, data = payloads[name]
        b64 = "null" if data is None else '"' + base64.b64encode(data).decode("ascii") + '"'
        items.append(f'{_str(name)}:{{"data_b64":{b64},"digest":{_str(d)}}}')
    return (f'{{"body_hash":{_str(body)},"entry_hash":{_str(entry)},'
            f'"envelope":{_str(envelope.decode("utf-8"))},"kind":{_str(kind)},'
            f'"payloads":{{{",".join(items)}}},"prev_hash":{_str(prev)},'
            f'"recorded_at_us":{int(recorded_at_us)},"seq":{int(seq)}}}\n').encode()


def _cell(v: Any) -> str:
    text = "" if v is None else str(v)
    return "'" + text if text.startswith(_FORMULA_START) else text  # no spreadsheet formulas


_time_text = lru_cache(maxsize=4096)(format_us)  # a batch shares one recorded_at


def csv_row(seq: int, kind: str, recorded_at_us: int, columns: Any, agent_message: str | None,
            entry_hash: str) -> list[str]:
    """One ``entries.csv`` row; ``columns`` has the entries columns as attributes."""
    return [str(seq), _time_text(recorded_at_us), _cell(kind)] + [
        _cell(getattr(columns, c)) for c in _CSV_COLUMNS] + [_cell(agent_message), entry_hash]


def csv_bytes(rows: list[list[str]]) -> bytes:
    buf = io.StringIO()
    csv.writer(buf).writerows(rows)
    return buf.getvalue().encode("utf-8")


def envelope_columns(kind: str, env: dict[str, Any]) -> dict[str, Any]:
    """The entries columns an envelope of ``kind`` determines (payload digests included)."""
    cols = {c: env.get(f) for f, c in COLUMN_MAP.get(kind, {}).items()}
    digests = env.get("payloads") if isinstance(env.get("payloads"), dict) else {}
    cols.update({c: digests.get(n) for n, c in PAYLOAD_MAP.get(kind, {}).items()})
    return cols


_AGENT_MESSAGE = b'{"agent_message":"'


def agent_message(kind: str, result_bytes: bytes | None) -> str | None:
    """``agent_message`` of a result payload.  Its keys are sorted, so it is the first
    string: read just that (fast path), else parse the whole document."""
    if kind != "result" or result_bytes is None:
        return None
    if result_bytes.startswith(_AGENT_MESSAGE):
        try:
            text = result_bytes.decode("utf-8")
            msg, end = json.decoder.scanstring(text, len(_AGENT_MESSAGE))
            if text[end] == ",":
                return msg
        except (ValueError, IndexError):
            pass
    try:
        doc = json.loads(result_bytes)
    except ValueError:
        return None
    return doc.get("agent_message") if isinstance(doc, dict) else None


def default_policy() -> Policy:
    text = resources.files("ledger.data").joinpath("default_policy.json").read_text("utf-8")
    return parse_policy(json.loads(text), "default policy")


# -- rows rebuilt from the bundle -----------------------------------------------------
class BundleRow:
    """A bundle line as an entries row (the attributes ChainAuditor reads)."""

    __slots__ = _COLUMNS

    def __init__(self, values: dict[str, Any]) -> None:
        for c in _COLUMNS:
            setattr(self, c, values.get(c))


def _unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    d = dict(pairs)
    if len(d) != len(pairs):
        raise ValueError("duplicate key")
    return d


class _Line:
    """One parsed line; ``problem`` is (code, message) when it cannot be used."""

    def __init__(self, raw: bytes, lineno: int) -> None:
        self.raw, self.lineno, self.problem = raw, lineno, None
        self.obj: dict[str, Any] = {}
        self.seq: int | None = None
        try:
            # no duplicate-key hook: a duplicate key fails the canonical comparison below
            self.obj = json.loads(raw.decode("utf-8"))
        except (ValueError, RecursionError):
            self.problem = ("line_unreadable", f"line {lineno} is not a JSON object")
            self._guess_seq()
            return
        seq = self.obj.get("seq") if isinstance(self.obj, dict) else None
        self.seq = seq if type(seq) is int and seq >= 0 else None
        if not isinstance(self.obj, dict):
            self.problem = ("line_unreadable", f"line {lineno} is not a JSON object")
        elif dump_line(self.obj) != raw:
            self.problem = ("line_not_canonical", f"line {lineno} is not byte-identical "
                            + "to its canonical form (edited, re-encoded or truncated)")

    def _guess_seq(self) -> None:
        """The seq of an unreadable line, if its text still shows one (to name it)."""
        for key in (b'"seq":', b'"first_seq":'):
            i = self.raw.find(key)
            digits = self.raw[i + len(key):i + len(key) + 20].split(b",")[0].split(b"}")[0]
            if i >= 0 and digits.isdigit():
                self.seq = int(digits)
                return


def _iter_lines(path: Path, hasher: Any) -> Iterator[_Line]:
    with open(path, "rb") as fh:
        for n, raw in enumerate(fh, 1):
            hasher.update(raw)
            yield _Line(raw, n)


def read_entry(obj: dict[str, Any]) -> tuple[BundleRow, dict[str, bytes], list[tuple[str, str]]]:
    """(row, {digest: bytes}, problems) from an entry line object.  Raises ValueError when
    the line lacks its fields or their types are wrong."""
    if set(obj) != LINE_KEYS:
        raise ValueError(f"keys are {sorted(obj)}, expected {sorted(LINE_KEYS)}")
    seq, kind, t = obj["seq"], obj["kind"], obj["recorded_at_us"]
    if not all(type(v) is int and v >= 0 for v in (seq, t)) or not isinstance(kind, str) \
            or not isinstance(obj["envelope"], str) or not isinstance(obj["payloads"], dict):
        raise ValueError("seq/recorded_at_us/kind/envelope/payloads have the wrong type")
    envelope = obj["envelope"].encode("utf-8")
    hashes = {k: parse_hash_hex(obj[k]) for k in ("body_hash", "prev_hash", "entry_hash")}
    try:
        env = json.loads(obj["envelope"])
    except ValueError:
        env = None
    env = env if isinstance(env, dict) else {}
    cols = envelope_columns(kind, env)
    committed = {n: d for n, d in (env.get("payloads") or {}).items() if d is not None} \
        if isinstance(env.get("payloads"), dict) else {}
    problems: list[tuple[str, str]] = []
    if set(obj["payloads"]) != set(committed) and env:
        problems.append(("payload_set_mismatch", f"payloads {sorted(obj['payloads'])} differ"
                         + f" from those the envelope commits to {sorted(committed)}"))
    blobs: dict[str, bytes] = {}
    for name, p in obj["payloads"].items():
        if not isinstance(p, dict) or set(p) != {"digest", "data_b64"}:
            raise ValueError(f"payload {name} is not {{digest, data_b64}}")
        if p["digest"] != committed.get(name, p["digest"]):
            problems.append(("payload_label_mismatch", f"payload {name} is labelled "
                             + f"{p['digest']} but the envelope commits to {committed[name]}"))
        data = p["data_b64"]
        if data is None:
            continue
        try:
            raw = base64.b64decode(data, validate=True) if isinstance(data, str) else None
        except (binascii.Error, ValueError):
            raw = None
        if raw is None or base64.b64encode(raw).decode("ascii") != data:
            problems.append(("payload_encoding_invalid",
                             f"payload {name} is not canonical base64"))
            continue
        blobs[committed.get(name, p["digest"])] = raw
    row = BundleRow({**cols, "seq": seq, "kind": kind, "recorded_at": t, "envelope": envelope,
                     **hashes})
    return row, blobs, problems


def matches(filters: dict[str, Any], row: BundleRow) -> bool:
    """Does ``row`` satisfy the manifest's ``filters`` document?  Raises ValueError."""
    for name, values in filters.items():
        if name == "since":
            if row.recorded_at < parse_rfc3339(values):
                return False
        elif name == "until":
            if row.recorded_at >= parse_rfc3339(values):
                return False
        elif name in _COLUMNS and isinstance(values, list):
            if getattr(row, name) not in values:
                return False
        else:
            raise ValueError(f"unknown filter {name!r}")
    return True


# -- signatures (Ed25519: the manifest JWT and the checkpoint note) --------------------
JWT_TYP = "ledger-export+jwt"
_UNTRUSTED = ("the %s verifies only with the bundle's own jwks.json; give the ledger's keys "
              "with --jwks")
_B64URL = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")


def _b64url(text: str) -> bytes:
    if not set(text) <= _B64URL or len(text) % 4 == 1:
        raise ValueError("not base64url")
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def parse_jwt(token: bytes) -> tuple[dict[str, Any], dict[str, Any], bytes, bytes]:
    """(header, claims, signing input, signature) of a compact JWS.  Raises ValueError."""
    parts = token.decode("ascii").split(".")
    if len(parts) != 3:
        raise ValueError("a compact JWS has three parts")
    header, claims = (json.loads(_b64url(p), object_pairs_hook=_unique) for p in parts[:2])
    if not isinstance(header, dict) or not isinstance(claims, dict):
        raise ValueError("header and claims must be JSON objects")  # noqa: TRY004
    return header, claims, f"{parts[0]}.{parts[1]}".encode("ascii"), _b64url(parts[2])


def _verifies(raw: bytes, signature: bytes, message: bytes) -> bool:
    try:
        Ed25519PublicKey.from_public_bytes(raw).verify(signature, message)
        return True
    except (InvalidSignature, ValueError):
        return False


def check_jwt(token: bytes, keys: list[PublicKeyRef], trusted: bool,
              ) -> tuple[str, str, str, dict[str, Any] | None]:
    """(disposition, code, message, claims) of the manifest JWT.  ``keys`` are the
    verifier's trusted keys, or (``trusted`` False) the bundle's own jwks.json: then a
    valid signature only abstains, since anyone can put a key in a bundle."""
    try:
        header, claims, signing_input, signature = parse_jwt(token)
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        return "failed", "manifest_jwt_malformed", f"not a compact JWS: {exc}", None
    if header.get("alg") != "EdDSA" or header.get("typ") != JWT_TYP or "crit" in header:
        return ("failed", "manifest_jwt_header",
                f"header must be alg EdDSA, typ {JWT_TYP}, no crit", claims)
    kid = header.get("kid")
    ordered = sorted(keys, key=lambda k: jwk_thumbprint(k.public_raw) != kid)
    if any(_verifies(k.public_raw, signature, signing_input) for k in ordered):
        if trusted:
            return "verified", "manifest_signature_valid", "signed by a trusted key", claims
        return "abstained", "untrusted_key", _UNTRUSTED % "signature", claims
    where = "any trusted key" if trusted else "any key of the bundle's jwks.json"
    return "failed", "manifest_signature_invalid", f"signature does not verify with {where}", \
        claims


def check_note(data: bytes, keys: list[PublicKeyRef], trusted: bool,
               ) -> tuple[str, str, str, Checkpoint | None]:
    """(disposition, code, message, checkpoint) of the signed checkpoint note."""
    try:
        note = parse_note(data)
        cp = parse_checkpoint_body(note.text)
    except NoteError as exc:
        return "failed", "checkpoint_malformed", exc.message, None
    known = known_keys(keys, cp.origin)
    good = 0
    for sig in note.signatures:
        key = known.get((sig.name, sig.key_id))
        if key is None:
            continue
        if not _verifies(key.public_bytes_raw(), sig.signature, note.text.encode("utf-8")):
            return ("failed", "checkpoint_signature_invalid",
                    f"signature by {sig.name} ({sig.key_id.hex()}) does not verify", cp)
        good += 1
    if not good:
        where = "a trusted key" if trusted else "a key of the bundle's jwks.json"
        return "failed", "checkpoint_signature_invalid", f"no signature by {where}", cp
    if not trusted:
        return "abstained", "untrusted_key", _UNTRUSTED % "checkpoint", cp
    return "verified", "checkpoint_signature_valid", "signed by a trusted key", cp


# -- the verifier -------------------------------------------------------------------------
MAX_SMALL_FILE = 16 * 1024 * 1024


class _Interval:
    """A declared proof interval: entries [first, last] of one file, proven by the
    inclusion of ``last``; ``counts`` holds its rows' dispositions until it settles."""

    def __init__(self, first: int, last: int, path: list[bytes] | None, lineno: int) -> None:
        self.first, self.last, self.path, self.lineno = first, last, path, lineno
        self.expected, self.broken, self.counts = first, path is None, Counter()


class _ProofCursor:
    """Streams proofs.jsonl: key_events.jsonl intervals first, then entries.jsonl ones."""

    def __init__(self, v: Verifier) -> None:
        self.v, self.peeked, self.last = v, None, {ENTRIES: -1, KEY_EVENTS: -1}
        path = v.dir / PROOFS
        self.lines: Iterator[_Line] = iter(())
        if path.is_file():
            self.lines = _iter_lines(path, v.hasher(PROOFS))
        else:
            v.finding("file_missing", DELETED, f"{PROOFS} is missing", PROOFS)
        self._advance()

    def _advance(self) -> None:
        self.peeked = next(self.lines, None)

    def next_for(self, file: str) -> _Interval | None:
        while self.peeked is not None:
            line = self.peeked
            readable = isinstance(line.obj, dict) and "file" in line.obj
            if readable and line.obj["file"] != file:
                return None
            self._advance()
            iv = self._interval(line, file)
            if iv is not None:
                return iv
        return None

    def _interval(self, line: _Line, file: str) -> _Interval | None:
        v, o = self.v, line.obj
        if line.problem:
            v.finding(line.problem[0], PAYLOAD_MODIFIED, line.problem[1], PROOFS, line.seq)
        if not isinstance(o, dict) or set(o) != PROOF_KEYS or not all(
                type(o[k]) is int and o[k] >= 0 for k in ("first_seq", "seq", "tree_size")) \
                or o["first_seq"] > o["seq"]:
            if not line.problem:
                v.finding("proof_malformed", PAYLOAD_MODIFIED, f"line {line.lineno} is not "
                          "a proof record", PROOFS, line.seq)
            return None
        if o["first_seq"] <= self.last[file]:
            v.finding("proof_out_of_order", REORDERED, f"line {line.lineno} overlaps or "
                      "precedes the previous interval", PROOFS, o["seq"])
            return None
        self.last[file] = o["seq"]
        path = None
        try:
            path = [bytes.fromhex(h) for h in o["inclusion_path"]]
            if any(len(h) != 32 or h.hex() != t for h, t in zip(path, o["inclusion_path"])):
                raise ValueError("not 64 lowercase hex digits")
        except (ValueError, TypeError) as exc:
            v.finding("proof_malformed", PAYLOAD_MODIFIED, f"inclusion_path: {exc}", PROOFS,
                      o["seq"])
            path = None
        if v.checkpoint is not None and o["tree_size"] != v.checkpoint.size:
            v.finding("proof_tree_size_mismatch", PAYLOAD_MODIFIED, "tree_size is not the "
                      "checkpoint's size", PROOFS, o["seq"], v.checkpoint.size, o["tree_size"])
            path = None
        return _Interval(o["first_seq"], o["seq"], path, line.lineno)

    def drain(self) -> None:
        while self.peeked is not None:
            line = self.peeked
            self._advance()
            o = line.obj if isinstance(line.obj, dict) else {}
            self.v.finding("proof_without_entry", DELETED, f"line {line.lineno} proves "
                           f"{o.get('file')} entries that are not in the bundle (or is out "
                           "of place)", PROOFS, line.seq, pair=str(o.get("file")))


class _Tracker:
    """Merge-joins one file's rows with its declared intervals and settles their counts."""

    def __init__(self, v: Verifier, file: str, cursor: _ProofCursor, tally: Counter) -> None:
        self.v, self.file, self.cursor, self.tally, self.cur = v, file, cursor, tally, None

    def add(self, seq: int, entry_hash: bytes, disp: str) -> None:
        while True:
            if self.cur is None:
                self.cur = self.cursor.next_for(self.file)
            if self.cur is None or seq < self.cur.first:
                self.v.finding("proof_missing", DELETED, f"no interval of proofs.jsonl "
                               f"covers {self.file} entry {seq}", PROOFS, seq, pair=self.file)
                self.tally["failed"] += 1
                return
            if seq <= self.cur.last:
                break
            self._close()
        iv = self.cur
        if seq != iv.expected:
            self.v.finding("seq_gap", DELETED, f"entries {iv.expected}..{seq - 1} of the "
                           "proven interval are missing", self.file, iv.expected, pair=PROOFS)
            iv.broken = True
        iv.expected = seq + 1
        iv.counts[disp] += 1
        if seq == iv.last:
            if iv.path is not None and self.v.checkpoint is not None:
                cp = self.v.checkpoint
                try:
                    verify_inclusion(seq, cp.size, leaf_hash(entry_hash), iv.path, cp.root_hash)
                except (ProofError, ValueError) as exc:
                    self.v.finding("inclusion_invalid", FORKED, f"the proof on line "
                                   f"{iv.lineno} for {self.file} entry {seq} does not reach the "
                                   f"checkpoint root (the proof or the entry changed): {exc}",
                                   PROOFS, seq, pair=self.file)
                    iv.broken = True
            self._settle(iv)

    def _close(self) -> None:
        iv = self.cur
        self.v.finding("entry_missing", DELETED, f"entries {iv.expected}..{iv.last} are "
                       "declared in proofs.jsonl but missing", self.file, iv.expected, pair=PROOFS)
        iv.broken = True
        self._settle(iv)

    def _settle(self, iv: _Interval) -> None:
        self.cur = None
        n = sum(iv.counts.values())
        cp = self.v.signatures.get("checkpoint")
        if iv.broken or cp != "verified" and cp != "abstained" or self.v.checkpoint is None:
            self.tally["failed"] += n
        else:
            self.tally["failed"] += iv.counts["failed"]
            good = iv.counts["verified"]
            self.tally["verified" if cp == "verified" else "unverified"] += good
            self.tally["unverified"] += iv.counts["abstained"]

    def finish(self) -> None:
        if self.cur is not None:
            self._close()
        while (iv := self.cursor.next_for(self.file)) is not None:
            self.cur = iv
            self._close()


class Verifier:
    """One verification of one bundle directory; :meth:`run` returns the report."""

    def __init__(self, directory: str | Path, trusted: list[PublicKeyRef] | None,
                 policy: Policy, check_attestations: bool = True) -> None:
        self.dir, self.trusted, self.policy = Path(directory), trusted, policy
        self.check_attestations = check_attestations
        self.findings: list[dict[str, Any]] = []
        self.abstentions: list[dict[str, Any]] = []
        self.hashers: dict[str, Any] = {}
        self.signatures: dict[str, str] = {}
        self.checkpoint: Checkpoint | None = None
        self.manifest: dict[str, Any] = {}
        self.tally: Counter = Counter()
        self.events: Counter = Counter()
        self.counts: dict[str, Counter] = {"by_status": Counter(), "by_kind": Counter()}
        self.key_event_hashes: dict[int, bytes] = {}
        self.store = TrustStore()

    # -- bookkeeping ------------------------------------------------------------------
    def finding(self, code: str, cls: str, message: str, file: str, seq: int | None = None,
                expected: Any = None, actual: Any = None, pair: str | None = None) -> None:
        """``pair``: the other file of a disagreement (an entries file and proofs.jsonl);
        the finding is moved to whichever of the two no longer has its signed digest."""
        f = {"code": code, "seq": seq, "class": cls, "message": message,
             "expected": expected, "actual": actual, "file": file}
        if pair is not None:
            f["_pair"] = pair
        self.findings.append(f)

    def abstain(self, check: str, reason: str, message: str, file: str,
                seq: int | None = None) -> None:
        self.abstentions.append({"seq": seq, "check": check, "reason": reason,
                                 "message": message, "file": file})

    def hasher(self, name: str) -> Any:
        self.hashers[name] = h = hashlib.sha256()
        self.hashers[name + ":size"] = 0
        return h

    def _small(self, name: str) -> bytes | None:
        path = self.dir / name
        if not path.is_file():
            self.finding("file_missing", DELETED, f"{name} is missing", name)
            return None
        with open(path, "rb") as fh:
            data = fh.read(MAX_SMALL_FILE + 1)
        if len(data) > MAX_SMALL_FILE:
            self.finding("file_too_large", PAYLOAD_MODIFIED, f"{name} is too large", name)
            return None
        self.hasher(name).update(data)
        return data

    # -- the run ----------------------------------------------------------------------
    def run(self) -> dict[str, Any]:
        if not self.dir.is_dir():
            raise UsageError(f"{self.dir} is not a directory", code="no_bundle", field="dir")
        bundle_keys = self._bundle_keys()
        keys = self.trusted if self.trusted is not None else bundle_keys
        self._manifest(keys)
        self._checkpoint(keys)
        cursor = _ProofCursor(self)
        self._walk(KEY_EVENTS, cursor, self.events, None)
        judge = self._judge() if self.check_attestations else None
        self._walk(ENTRIES, cursor, self.tally, judge)
        cursor.drain()
        self._csv()
        self._file_digests()
        self._counts()
        return self._report()

    def _bundle_keys(self) -> list[PublicKeyRef]:
        if self._small(JWKS) is None:
            return []
        try:
            return load_public_keys(self.dir / JWKS)
        except (LedgerError, ValueError) as exc:  # keys.py lets binascii.Error through
            self.finding("jwks_malformed", PAYLOAD_MODIFIED, str(exc), JWKS)
            return []

    def _manifest(self, keys: list[PublicKeyRef]) -> None:
        token, body = self._small(MANIFEST_JWT), self._small(MANIFEST)
        claims = None
        if token is not None:
            disp, code, msg, claims = check_jwt(token, keys, self.trusted is not None)
            self._signature("manifest", disp, code, msg, MANIFEST_JWT)
        if body is None:
            return
        digest = "sha256:" + hashlib.sha256(body).hexdigest()
        if claims is not None and claims.get("manifest_sha256") != digest:
            self.finding("manifest_digest_mismatch", PAYLOAD_MODIFIED, "manifest.json does "
                         "not hash to the signed manifest_sha256", MANIFEST,
                         expected=claims.get("manifest_sha256"), actual=digest)
        try:
            doc = json.loads(body, object_pairs_hook=_unique)
            if not isinstance(doc, dict) or doc.get("format") != EXPORT_FORMAT:
                raise ValueError(f"format is not {EXPORT_FORMAT}")
            if body != dump_line(doc):
                raise ValueError("not in canonical form")
            for key in ("ledger_id", "origin", "range", "counts", "checkpoint", "files",
                        "filters"):
                if key not in doc:
                    raise ValueError(f"{key} is missing")
        except (ValueError, RecursionError) as exc:
            self.finding("manifest_malformed", PAYLOAD_MODIFIED, str(exc), MANIFEST)
            return
        self.manifest = doc
        if claims is not None and (claims.get("sub"), claims.get("iss")) != (
                doc["ledger_id"], doc["origin"]):
            self.finding("manifest_claims_mismatch", PAYLOAD_MODIFIED, "the JWT's sub/iss are "
                         "not the manifest's ledger_id/origin", MANIFEST_JWT)

    def _signature(self, what: str, disp: str, code: str, msg: str, file: str) -> None:
        self.signatures[what] = disp
        if disp == "failed":
            self.finding(code, SIGNATURE_INVALID, msg, file)
        elif disp == "abstained":
            self.abstain(f"{what}_signature", code, msg, file)

    def _checkpoint(self, keys: list[PublicKeyRef]) -> None:
        data = self._small(CHECKPOINT)
        if data is None:
            return
        disp, code, msg, cp = check_note(data, keys, self.trusted is not None)
        self._signature("checkpoint", disp, code, msg, CHECKPOINT)
        self.checkpoint = cp
        want = self.manifest.get("checkpoint") or {}
        if cp is not None and (want.get("size"), want.get("root_hash"), self.manifest.get(
                "origin")) != (cp.size, cp.root_hash.hex(), cp.origin):
            self.finding("checkpoint_manifest_mismatch", PAYLOAD_MODIFIED, "checkpoint.txt "
                         "is not the checkpoint the manifest names (origin, size, root)",
                         CHECKPOINT, expected=want, actual={"size": cp.size,
                                                            "root_hash": cp.root_hash.hex()})

    def _judge(self) -> Any:
        store = self.store

        def judge(token: str, row: Any, env: dict[str, Any], query: str | None):
            r = check_attestation(token, store=store, seq=row.seq,
                                  recorded_at_us=row.recorded_at,
                                  proof_ref=env.get("proof_ref"), query=query,
                                  admission=env.get("admission"))
            return r.disposition, r.code, r.message
        return judge

    # -- entries and key events ---------------------------------------------------------
    def _walk(self, file: str, cursor: _ProofCursor, tally: Counter, judge: Any) -> None:
        path = self.dir / file
        if not path.is_file():
            self.finding("file_missing", DELETED, f"{file} is missing", file)
            lines: Iterator[_Line] = iter(())
        else:
            lines = _iter_lines(path, self.hasher(file))
        tracker = _Tracker(self, file, cursor, tally)
        ledger_id = self.manifest.get("ledger_id")
        auditor, last_seq, last_time = None, -1, 0
        self.csv_rows: list[list[str]] = []
        for line in lines:
            tally["rows"] += 1
            if line.problem:
                self.finding(line.problem[0], PAYLOAD_MODIFIED, line.problem[1], file, line.seq)
                if line.problem[0] == "line_unreadable":
                    tally["failed"] += 1
                    continue
            try:
                row, blobs, problems = read_entry(line.obj)
            except (ValueError, TypeError, AttributeError) as exc:
                self.finding("line_malformed", PAYLOAD_MODIFIED, f"line {line.lineno}: {exc}",
                             file, line.seq)
                tally["failed"] += 1
                continue
            for code, msg in problems:
                self.finding(code, PAYLOAD_MODIFIED, msg, file, row.seq)
            if row.seq <= last_seq:
                self.finding("entry_out_of_order", REORDERED, f"seq {row.seq} follows seq "
                             f"{last_seq}", file, row.seq, last_seq + 1, row.seq)
                tally["failed"] += 1
                continue
            if auditor is None or row.seq != last_seq + 1:
                auditor = ChainAuditor(ledger_id, row.seq, row.prev_hash, last_time,
                                       self.policy, judge)
            outcome = auditor.check_row(row, blobs)
            last_seq, last_time = row.seq, max(last_time, row.recorded_at)
            n = len(self.findings)
            self.findings += [{**f.to_dict(), "file": file} for f in outcome.findings]
            self.abstentions += [{**a.to_dict(), "file": file} for a in outcome.abstentions]
            (self._key_event if file == KEY_EVENTS else self._entry)(row, blobs)
            failed = line.problem or problems or len(self.findings) > n
            disp = "failed" if failed else "abstained" if outcome.abstentions else "verified"
            tracker.add(row.seq, row.entry_hash, disp)
        tracker.finish()

    def _key_event(self, row: BundleRow, blobs: dict[str, bytes]) -> None:
        if row.kind != "key_event":
            self.finding("not_a_key_event", PAYLOAD_MODIFIED, f"kind is {row.kind!r}",
                         KEY_EVENTS, row.seq)
            return
        self.key_event_hashes[row.seq] = row.entry_hash
        data = blobs.get(row.doc_digest) if row.doc_digest else None
        if data is not None and "sha256:" + hashlib.sha256(data).hexdigest() == row.doc_digest:
            try:
                self.store.apply(row.seq, json.loads(data))
            except (ValueError, KeyError, TypeError):
                pass  # the key event's content check already reported it

    def _entry(self, row: BundleRow, blobs: dict[str, bytes]) -> None:
        m, seq = self.manifest, row.seq
        rng = m.get("range") or {}
        if not (rng.get("start", 0) <= seq < (rng.get("end") if rng.get("end") is not None
                                               else seq + 1)):
            self.finding("entry_out_of_range", CONTRACT_VIOLATION, "seq is outside the "
                         "manifest's range", ENTRIES, seq, rng, seq)
        try:
            ok = matches(m.get("filters") or {}, row)
        except (ValueError, TypeError) as exc:
            self.finding("manifest_malformed", PAYLOAD_MODIFIED, f"filters: {exc}", MANIFEST)
            m["filters"], ok = {}, True
        if not ok:
            self.finding("entry_outside_filter", CONTRACT_VIOLATION, "the entry does not "
                         "match the manifest's filters", ENTRIES, seq)
        if row.kind == "key_event" and self.key_event_hashes.get(seq) != row.entry_hash:
            self.finding("key_event_not_listed", DELETED, "this key event is not in "
                         "key_events.jsonl", ENTRIES, seq)
        self.counts["by_status"][str(row.status)] += 1
        self.counts["by_kind"][row.kind] += 1
        msg = agent_message(row.kind, blobs.get(row.doc_digest) if row.doc_digest else None)
        self.csv_rows.append(csv_row(seq, row.kind, row.recorded_at, row, msg,
                                     "sha256:" + row.entry_hash.hex()))
        if len(self.csv_rows) >= 1000:
            self._csv_flush()

    def _csv_flush(self) -> None:
        if "csv:expected" not in self.hashers:
            self.hashers["csv:expected"] = hashlib.sha256(csv_bytes([CSV_HEADER]))
        self.hashers["csv:expected"].update(csv_bytes(self.csv_rows))
        self.csv_rows = []

    def _csv(self) -> None:
        self._csv_flush()
        path = self.dir / CSV_VIEW
        if not path.is_file():
            self.finding("file_missing", DELETED, f"{CSV_VIEW} is missing", CSV_VIEW)
            return
        h = self.hasher(CSV_VIEW)
        with open(path, "rb") as fh:
            while chunk := fh.read(1 << 20):
                h.update(chunk)
        if h.digest() != self.hashers["csv:expected"].digest():
            self.finding("csv_view_mismatch", PAYLOAD_MODIFIED, "entries.csv is not the view "
                         "of entries.jsonl", CSV_VIEW)

    # -- the manifest's claims --------------------------------------------------------
    def _file_digests(self) -> None:
        self._check_digests()
        bad = {f["file"] for f in self.findings if f["code"] in ("file_digest_mismatch",
                                                                  "file_missing")}
        for f in self.findings:
            other = f.pop("_pair", None)
            if other is not None and (f["file"] in bad) != (other in bad):
                f["file"] = f["file"] if f["file"] in bad else other

    def _check_digests(self) -> None:
        listed = self.manifest.get("files") or {}
        if self.manifest and set(listed) != set(LISTED_FILES):
            self.finding("manifest_malformed", PAYLOAD_MODIFIED, f"files lists {sorted(listed)}"
                         f", expected {sorted(LISTED_FILES)}", MANIFEST)
        for name, want in listed.items():
            h = self.hashers.get(name)
            if h is None or not isinstance(want, dict):
                continue
            size = (self.dir / name).stat().st_size
            got = "sha256:" + h.hexdigest()
            if (want.get("sha256"), want.get("bytes")) != (got, size):
                cls = TRUNCATED if isinstance(want.get("bytes"), int) and size < want[
                    "bytes"] else PAYLOAD_MODIFIED
                self.finding("file_digest_mismatch", cls, f"{name} is not the file the "
                             "manifest signs", name, None, want, {"sha256": got, "bytes": size})

    def _counts(self) -> None:
        want = self.manifest.get("counts")
        if not isinstance(want, dict):
            return
        got = {"entries": self.tally["rows"], "key_events": self.events["rows"],
               "by_status": dict(self.counts["by_status"]),
               "by_kind": dict(self.counts["by_kind"])}
        for key, value in got.items():
            if want.get(key) != value:
                self.finding("count_mismatch", DELETED, f"the manifest counts {key} "
                             f"{want.get(key)}, the bundle has {value}",
                             KEY_EVENTS if key == "key_events" else ENTRIES, None,
                             want.get(key), value)

    def _report(self) -> dict[str, Any]:
        m = self.manifest
        summary = {k: self.tally[k] for k in ("rows", "verified", "failed", "unverified")}
        summary["key_events"] = self.events["rows"]
        report = {
            "format": REPORT_FORMAT, "bundle": str(self.dir), "ledger_id": m.get("ledger_id"),
            "origin": m.get("origin"), "range": m.get("range"), "summary": summary,
            "signatures": self.signatures, "trusted_keys": self.trusted is not None,
            "attestations_checked": self.check_attestations,
            "findings": sorted(self.findings, key=lambda f: (f["seq"] is not None,
                                                             f["seq"] or 0)),
            "abstentions": self.abstentions,
        }
        report["outcome"] = outcome(report)
        return report


def outcome(report: dict[str, Any]) -> str:
    if report["findings"]:
        return "failed"
    return "unverified" if report["summary"]["unverified"] or report["abstentions"] \
        else "passed"


def summary_line(report: dict[str, Any]) -> str:
    s = report["summary"]
    review = s["unverified"] or report["abstentions"]
    line = (f"verify-export complete: {s['rows']} rows, {s['verified']} verified, "
            f"{s['failed']} failed, {s['unverified']} unverified"
            + (" (human review needed)" if review else ""))
    extra = sum(1 for f in report["findings"] if f["seq"] is None)
    if extra:
        line += f"; {extra} bundle-level finding(s)"
    return line


def verify_export(directory: str | Path, jwks: str | Path | None = None,
                  policy_path: str | Path | None = None,
                  check_attestations: bool = True) -> dict[str, Any]:
    """Verify the bundle in ``directory`` with no database and return the report.

    ``jwks``: the trusted ledger keys (a JWKS or PEM file); without it the signature
    checks abstain (outcome ``unverified`` at best).  Raises UsageError for an unreadable
    key or policy file, or a missing directory; never raises for bad bundle content.
    """
    try:
        trusted = load_public_keys(jwks) if jwks is not None else None
    except ValueError as exc:  # a malformed base64 key in the file
        raise UsageError(f"cannot read the keys in {jwks}: {exc}", code="bad_jwks",
                         field="jwks") from None
    try:
        policy = default_policy() if policy_path is None else parse_policy(
            json.loads(Path(policy_path).read_text("utf-8")), str(policy_path))
    except (OSError, ValueError, PolicyError) as exc:
        raise UsageError(f"cannot use policy: {exc}", code="bad_policy", field="policy") \
            from None
    return Verifier(directory, trusted, policy, check_attestations).run()
