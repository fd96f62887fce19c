"""Export bundle format ``ledger-export/1`` (docs/export.md): file names, the JSON Lines
records of ``entries.jsonl`` / ``key_events.jsonl``, the ``entries.csv`` view, and
reading a line back into an entries row.

Pure: shared by the writer (:mod:`ledger.ops.export`) and the offline verifier
(:mod:`ledger.verify.bundle`); no I/O.
"""

from __future__ import annotations

import base64
import binascii
import csv
import io
import json
from collections.abc import Callable
from functools import lru_cache
from typing import Any

from ledger.core.entry import COLUMN_MAP, FORMAT_V2, column_map, parse_hash_hex, payload_map
from ledger.core.fastjson import dumps_line, is_canonical_line, loads_line, loads_text
from ledger.core.tenant import DEFAULT_TENANT, is_tenant
from ledger.core.timestamp import format_us, parse_rfc3339

EXPORT_FORMAT = "ledger-export/1"
# /2 (docs/tenants.md): every entry line also carries its tenant and tseq, intervals are runs
# of one tenant, and a tenant export's manifest proves the tenant's chain complete
EXPORT_FORMAT_V2 = "ledger-export/2"
EXPORT_FORMATS = (EXPORT_FORMAT, EXPORT_FORMAT_V2)
MANIFEST, MANIFEST_JWT = "manifest.json", "manifest.jwt"
ENTRIES, CSV_VIEW, KEY_EVENTS = "entries.jsonl", "entries.csv", "key_events.jsonl"
PROOFS, CHECKPOINT, JWKS = "proofs.jsonl", "checkpoint.txt", "jwks.json"
LISTED_FILES = (ENTRIES, CSV_VIEW, KEY_EVENTS, PROOFS, CHECKPOINT, JWKS)
# written (and listed) only when a payload of the exported range was erased: the redaction
# entries that explain it (docs/export.md, redactions.jsonl)
REDACTIONS = "redactions.jsonl"
# the order of the files' intervals in proofs.jsonl
PROOF_FILES = (KEY_EVENTS, REDACTIONS, ENTRIES)
LINE_KEYS = frozenset({"seq", "kind", "recorded_at_us", "envelope", "body_hash", "prev_hash",
                       "entry_hash", "payloads"})
LINE_KEYS_V2 = LINE_KEYS | {"tenant", "tseq"}
PROOF_KEYS = frozenset({"file", "first_seq", "seq", "tree_size", "inclusion_path"})
CSV_HEADER = ["seq", "recorded_at", "kind", "engine", "status", "constraint_id", "proof_ref",
              "subject", "producer", "admission", "att_verdict", "att_kid", "agent_message",
              "entry_hash"]
_CSV_COLUMNS = CSV_HEADER[3:-2]
_COLUMNS = tuple(dict.fromkeys(
    ["seq", "kind", "recorded_at"] + [c for m in COLUMN_MAP.values() for c in m.values()]
    + ["envelope", "body_hash", "prev_hash", "entry_hash", "payload_subject"]))
# Keys of one payload of a record: always digest and data_b64; salt_b64 for a v2 result
# payload; redacted_by for an erased one.
PAYLOAD_KEYS = frozenset({"digest", "data_b64"})
PAYLOAD_EXTRA_KEYS = frozenset({"salt_b64", "redacted_by"})
_PAYLOAD_ALLOWED = PAYLOAD_KEYS | PAYLOAD_EXTRA_KEYS
Extra = dict[str, Any]
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


# -- writing lines ------------------------------------------------------------------------
def dump_line(obj: dict[str, Any]) -> bytes:
    """One JSON Lines record: sorted keys, no spaces, raw UTF-8, a final LF."""
    return (json.dumps(obj, ensure_ascii=False, separators=(",", ":"), sort_keys=True)
            + "\n").encode("utf-8")


def entry_record(seq: int, kind: str, recorded_at_us: int, envelope: bytes, body: str,
                 prev: str, entry: str, payloads: dict[str, tuple[str, bytes | None, Extra]],
                 tenant: tuple[str, int] | None = None) -> dict[str, Any]:
    """The ``entries.jsonl`` / ``key_events.jsonl`` object of one entry (hashes as text);
    ``payloads``: name -> (digest, bytes or None, extra keys: ``salt_b64``,
    ``redacted_by``); ``tenant``: (tenant, tseq) in a ``ledger-export/2`` bundle."""
    more = {} if tenant is None else {"tenant": tenant[0], "tseq": tenant[1]}
    return {**more, "seq": seq, "kind": kind, "recorded_at_us": recorded_at_us,
            "envelope": envelope.decode("utf-8"), "body_hash": body, "prev_hash": prev,
            "entry_hash": entry,
            "payloads": {name: {"digest": d, "data_b64": None if data is None
                                else base64.b64encode(data).decode("ascii"), **extra}
                         for name, (d, data, extra) in payloads.items()}}


_str = json.encoder.encode_basestring  # the C string encoder json.dumps uses (no ASCII escaping)


def entry_line(seq: int, kind: str, recorded_at_us: int, envelope: bytes, body: str,
               prev: str, entry: str, payloads: dict[str, tuple[str, bytes | None, Extra]],
               tenant: tuple[str, int] | None = None) -> bytes:
    """``dump_line(entry_record(...))``, byte for byte (the export's hot path; tests
    compare the two).  The record holds only strings, integers, null and objects, for
    which orjson's sorted compact output is the standard encoder's
    (:func:`ledger.core.fastjson.is_canonical_line`); what orjson refuses (a lone
    surrogate, an integer beyond 64 bits) is written by the standard path."""
    record = entry_record(seq, kind, recorded_at_us, envelope, body, prev, entry, payloads,
                          tenant)
    line = dumps_line(record)
    if line is None and tenant is not None:
        return dump_line(record)
    return line if line is not None else _entry_line_std(
        seq, kind, recorded_at_us, envelope, body, prev, entry, payloads)


def _entry_line_std(seq: int, kind: str, recorded_at_us: int, envelope: bytes, body: str,
                    prev: str, entry: str, payloads: dict[str, tuple[str, bytes | None, Extra]],
                    ) -> bytes:
    """:func:`entry_line` with the standard library only."""
    items = []
    for name in sorted(payloads):
        d, data, extra = payloads[name]
        b64 = "null" if data is None else '"' + base64.b64encode(data).decode("ascii") + '"'
        more = ""
        if "redacted_by" in extra:
            more += f',"redacted_by":{int(extra["redacted_by"])}'
        if "salt_b64" in extra:
            salt = extra["salt_b64"]
            more += ',"salt_b64":' + ("null" if salt is None else _str(salt))
        items.append(f'{_str(name)}:{{"data_b64":{b64},"digest":{_str(d)}{more}}}')
    return (f'{{"body_hash":{_str(body)},"entry_hash":{_str(entry)},'
            f'"envelope":{_str(envelope.decode("utf-8"))},"kind":{_str(kind)},'
            f'"payloads":{{{",".join(items)}}},"prev_hash":{_str(prev)},'
            f'"recorded_at_us":{int(recorded_at_us)},"seq":{int(seq)}}}\n').encode()


# -- the CSV view -------------------------------------------------------------------------
def _cell(v: object) -> str:
    text = "" if v is None else str(v)
    return "'" + text if text.startswith(_FORMULA_START) else text  # no spreadsheet formulas


_time_text = lru_cache(maxsize=4096)(format_us)  # a batch shares one recorded_at


def csv_row(seq: int, kind: str, recorded_at_us: int, columns: object, agent_message: str | None,
            entry_hash: str) -> list[str]:
    """One ``entries.csv`` row; ``columns`` has the entries columns as attributes."""
    return [str(seq), _time_text(recorded_at_us), _cell(kind)] + [
        _cell(getattr(columns, c)) for c in _CSV_COLUMNS] + [_cell(agent_message), entry_hash]


def csv_bytes(rows: list[list[str]]) -> bytes:
    buf = io.StringIO()
    csv.writer(buf).writerows(rows)
    return buf.getvalue().encode("utf-8")


def envelope_columns(kind: str, env: dict[str, Any]) -> dict[str, Any]:
    """The entries columns an envelope of ``kind`` determines."""
    try:
        m = column_map(kind, FORMAT_V2 if env.get("v") == FORMAT_V2 else 1)
    except KeyError:
        m = {}
    return {c: env.get(f) for f, c in m.items()}


_AGENT_MESSAGE = b'{"agent_message":"'
# json's own string scanner (the C one where built); typeshed leaves the undocumented name
# out, its signature is that of _json.scanstring
_scanstring: Callable[[str, int], tuple[str, int]] = \
    json.decoder.scanstring  # type: ignore[attr-defined]


def agent_message(kind: str, result_bytes: bytes | None) -> str | None:
    """``agent_message`` of a result payload.  Its keys are sorted, so it is the first
    string: read just that (fast path), else parse the whole document."""
    if kind != "result" or result_bytes is None:
        return None
    if result_bytes.startswith(_AGENT_MESSAGE):
        try:
            text = result_bytes.decode("utf-8")
            msg, end = _scanstring(text, len(_AGENT_MESSAGE))
            if text[end] == ",":
                return msg
        except (ValueError, IndexError):
            pass
    try:
        doc = json.loads(result_bytes)
    except ValueError:
        return None
    return doc.get("agent_message") if isinstance(doc, dict) else None


# -- reading lines ------------------------------------------------------------------------
class BundleRow:
    """A bundle line as an entries row (the attributes ChainAuditor reads: an
    :class:`ledger.core.audit.AuditedRow`).  The linked parts were type-checked by
    :func:`read_entry`; the other columns are the envelope's fields, unverified JSON values
    (None where the envelope lacks them)."""

    __slots__ = _COLUMNS + ("redacted_by", "envelope_doc", "tenant", "tseq")
    seq: int
    kind: str
    recorded_at: int
    envelope: bytes
    body_hash: bytes
    prev_hash: bytes
    entry_hash: bytes
    engine: Any
    status: Any
    constraint_id: Any
    proof_ref: Any
    subject: Any
    producer: Any
    idempotency_key: Any
    admission: Any
    att_verdict: Any
    att_kid: Any
    att_iss: Any
    payload_subject: Any
    redacted_by: dict[str, int]
    # the envelope as json.loads reads it (None when it is no JSON), for the audit's fused
    # pass (ChainAuditor.parsed_envelopes), which then does not parse it again
    envelope_doc: Any

    tenant: str | None  # a ledger-export/2 line's (None: /1, the default tenant)
    tseq: int | None

    def __init__(self, values: dict[str, Any]) -> None:
        for c in _COLUMNS:
            setattr(self, c, values.get(c))
        self.redacted_by: dict[str, int] = {}
        self.envelope_doc = None
        self.tenant = self.tseq = None


def unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """``object_pairs_hook`` that rejects a duplicate key with ValueError."""
    d = dict(pairs)
    if len(d) != len(pairs):
        raise ValueError("duplicate key")
    return d


class BundleLine:
    """One parsed line; ``problem`` is (code, message) when it cannot be used, and ``obj``
    is the line's JSON object (empty when the line is not one)."""

    def __init__(self, raw: bytes, lineno: int) -> None:
        self.raw, self.lineno = raw, lineno
        self.problem: tuple[str, str] | None = None
        self.obj: dict[str, Any] = {}
        self.seq: int | None = None
        try:
            # no duplicate-key hook: a duplicate key fails the canonical comparison below
            obj, canonical = loads_line(raw)
        except (ValueError, RecursionError):
            self.problem = ("line_unreadable", f"line {lineno} is not a JSON object")
            self._guess_seq()
            return
        if not isinstance(obj, dict):
            self.problem = ("line_unreadable", f"line {lineno} is not a JSON object")
            return
        self.obj = obj
        seq = obj.get("seq")
        self.seq = seq if type(seq) is int and seq >= 0 else None
        if not canonical and is_canonical_line(obj, raw) is None and dump_line(obj) != raw:
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


def read_entry(obj: dict[str, Any], v2: bool = False,
               ) -> tuple[BundleRow, dict[int, tuple[bytes | None, bytes]], list[tuple[str, str]]]:
    """(row, {slot: (salt, bytes)}, problems) from an entry line object (``v2``: of a
    ``ledger-export/2`` bundle, with ``tenant`` and ``tseq``).  Raises ValueError
    when the line lacks its fields or their types are wrong.  ``row.redacted_by`` maps the
    names of payloads exported as erased to the redaction seq the record cites."""
    keys = LINE_KEYS_V2 if v2 else LINE_KEYS
    if obj.keys() != keys:
        raise ValueError(f"keys are {sorted(obj)}, expected {sorted(keys)}")
    if v2 and (not is_tenant(obj["tenant"]) or type(obj["tseq"]) is not int
               or obj["tseq"] < 0):
        raise ValueError("tenant must be a tenant id and tseq a non-negative integer")
    seq, kind, t = obj["seq"], obj["kind"], obj["recorded_at_us"]
    if not all(type(v) is int and v >= 0 for v in (seq, t)) or not isinstance(kind, str) \
            or not isinstance(obj["envelope"], str) or not isinstance(obj["payloads"], dict):
        raise ValueError("seq/recorded_at_us/kind/envelope/payloads have the wrong type")
    envelope = obj["envelope"].encode("utf-8")
    hashes = {k: parse_hash_hex(obj[k]) for k in ("body_hash", "prev_hash", "entry_hash")}
    try:
        parsed = loads_text(envelope)
    except ValueError:
        parsed = None
    env = parsed if isinstance(parsed, dict) else {}
    cols = envelope_columns(kind, env)
    env_payloads = env.get("payloads")
    committed: dict[str, Any] = {n: d for n, d in env_payloads.items() if d is not None} \
        if isinstance(env_payloads, dict) else {}
    problems: list[tuple[str, str]] = []
    if set(obj["payloads"]) != set(committed) and env:
        problems.append(("payload_set_mismatch", f"payloads {sorted(obj['payloads'])} differ"
                         + f" from those the envelope commits to {sorted(committed)}"))
    blobs: dict[int, tuple[bytes | None, bytes]] = {}
    try:
        slots = payload_map(kind, FORMAT_V2 if env.get("v") == FORMAT_V2 else 1)
    except KeyError:
        slots = {}
    redacted_by: dict[str, int] = {}
    for name, p in obj["payloads"].items():
        if not isinstance(p, dict) or not PAYLOAD_KEYS <= p.keys() <= _PAYLOAD_ALLOWED:
            raise ValueError(f"payload {name} is not {{digest, data_b64[, salt_b64]"
                             "[, redacted_by]}")
        if "redacted_by" in p:
            if type(p["redacted_by"]) is not int or p["data_b64"] is not None:
                raise ValueError(f"payload {name}: redacted_by must be a seq, data_b64 null")
            redacted_by[name] = p["redacted_by"]
        salt = _b64(p.get("salt_b64"))
        if p.get("salt_b64") is not None and canonical_b64(p["salt_b64"]) is None:
            problems.append(("payload_encoding_invalid",
                             f"payload {name} salt_b64 is not canonical base64"))
            continue
        if p["digest"] != committed.get(name, p["digest"]):
            problems.append(("payload_label_mismatch", f"payload {name} is labelled "
                             + f"{p['digest']} but the envelope commits to {committed[name]}"))
        data = p["data_b64"]
        if data is None:
            continue
        raw = canonical_b64(data)
        if raw is None:
            problems.append(("payload_encoding_invalid",
                             f"payload {name} is not canonical base64"))
            continue
        if name in slots:
            blobs[slots[name]] = (salt, raw)
    subject = blobs.get(slots["subject"]) if "subject" in slots else None
    row = BundleRow({**cols, "seq": seq, "kind": kind, "recorded_at": t, "envelope": envelope,
                     **hashes, "payload_subject": None if subject is None
                     else subject[1].decode("utf-8", "replace")})
    row.redacted_by = redacted_by
    row.envelope_doc = parsed
    if v2:
        row.tenant, row.tseq = obj["tenant"], obj["tseq"]
    return row, blobs, problems


def canonical_b64(text: Any) -> bytes | None:
    """The bytes of ``text`` when it is canonical base64 (RFC 4648 §4 -- the alphabet, the
    padding -- and the one encoding of its bytes: re-encoding them gives back the very
    text), else None.  Strict decoding already refuses everything but the alphabet, padding
    other than at the end and a length that is no multiple of 4; what is left is padding
    after a whole last group (a length longer than the bytes' encoding) and a last group
    whose unused bits are not zero, so the length is compared and only that group is
    encoded again."""
    if not isinstance(text, str):
        return None
    try:
        raw = binascii.a2b_base64(text, strict_mode=True)
    except (binascii.Error, ValueError):
        return None
    if len(text) != (len(raw) + 2) // 3 * 4:  # e.g. "0000=": padding after a whole group
        return None
    tail = len(raw) % 3
    if tail and binascii.b2a_base64(raw[-tail:], newline=False) != text[-4:].encode("ascii"):
        return None
    return raw


def _b64(text: Any) -> bytes | None:
    """A salt's base64 (None stays None; anything unreadable is an empty salt, which no
    commitment matches)."""
    if text is None:
        return None
    try:
        return binascii.a2b_base64(text, strict_mode=True) if isinstance(text, str) else b""
    except (binascii.Error, ValueError):
        return b""


def matches(filters: dict[str, Any], row: BundleRow) -> bool:
    """Does ``row`` satisfy the manifest's ``filters`` document?  Raises ValueError."""
    for name, values in filters.items():
        if name == "since":
            if row.recorded_at < parse_rfc3339(values):
                return False
        elif name == "until":
            if row.recorded_at >= parse_rfc3339(values):
                return False
        elif name == "subject" and isinstance(values, list):
            if (row.subject if row.subject is not None else row.payload_subject) not in values:
                return False
        elif name == "tenant" and isinstance(values, list):
            if (row.tenant or DEFAULT_TENANT) not in values:
                return False
        elif name in _COLUMNS and isinstance(values, list):
            if getattr(row, name) not in values:
                return False
        else:
            raise ValueError(f"unknown filter {name!r}")
    return True
