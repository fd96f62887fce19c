"""What a reader may be shown of one stored entry: the values its hashes prove, and a verdict.

Every read path (the HTTP entries, ``ledger show``/``query``, the console, the charts, the
reports, the reader client) shapes an entry from :func:`check_entry`, never from the
indexed columns: the columns only find rows.  :func:`check_entry` recomputes, from what is
stored,

* the body hash of the envelope and the entry hash, and compares them with the stored
  hashes: the v1 link (``prev_hash || seq || recorded_at || body``) for an entry of the
  default tenant, the tenant link (``ledger.core.tenant``: it also binds the tenant and
  the entry's place ``tseq`` in the tenant's chain) for an entry of any other tenant;
* when the caller gives it, the hash the *next* entry of the same tenant links to (or the
  head hash after the last entry): the entry hash must be the one the chain carries on;
* each payload the envelope commits to against its digest (v1, and the documents of the
  other kinds) or its salted commitment (v2 results);
* the main document against the envelope (a result's ``status`` and ``proof_ref``; an
  event's fields);
* every indexed column against the envelope field it copies -- and a column that copies no
  field of that kind must be empty;

and returns the envelope's values, the checked payload bytes, and an :class:`Integrity`
verdict naming what did not check (docs/reads.md: the codes, the layers, worked examples).
A value that did not check is never returned as a value: a payload that does not match its
commitment is left out (``None``); a column that disagrees with its envelope is replaced by
the envelope's value.  A tampered row is data about the ledger, never an exception.

Pure: stdlib only, shared by the server and the reader client.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any

from ledger.core.entry import (
    COLUMN_MAP,
    DOC_FIELDS,
    DOC_PAYLOAD,
    FORMAT_V2,
    RESULT_FIELDS,
    V2_FIELDS,
    VERSIONS,
    body_hash,
    column_map,
    entry_hash,
    hash_hex,
    payload_commitment,
    payload_map,
)
from ledger.core.erasure import RedactionMap
from ledger.core.fastjson import loads as fast_loads
from ledger.core.fastjson import orjson_loads
from ledger.core.tenant import DEFAULT_TENANT, is_tenant, tenant_entry_hash, tseq_of

# The indexed copies of envelope fields in the entries table (every string column); a
# column that copies no field of an entry's kind must be NULL.
INDEXED_COLUMNS = RESULT_FIELDS
# The proven value that is no envelope field: the entry's tenant, bound by its entry hash
# (the v1 link is the default tenant's, the tenant link every other tenant's)
TENANT_VALUE = "tenant"

# The stable codes of a read verdict (docs/reads.md); each names what it covers.
ROW_UNREADABLE = "row_unreadable"              # stored values of the wrong type
ENVELOPE_HASH_MISMATCH = "envelope_hash_mismatch"  # the envelope is not what was hashed
ENTRY_HASH_MISMATCH = "entry_hash_mismatch"    # seq, time, prev or body hash rewritten
HASH_NOT_COMMITTED = "hash_not_committed"      # the next entry (or the head) links elsewhere
ENVELOPE_UNREADABLE = "envelope_unreadable"
FOREIGN_ENVELOPE = "foreign_envelope"          # another version, ledger or kind
COLUMN_MISMATCH = "column_mismatch"            # an indexed column differs from its envelope
PAYLOAD_DIGEST_MISMATCH = "payload_digest_mismatch"
PAYLOAD_MISSING = "payload_missing"            # committed, not stored, not redacted
DOCUMENT_UNREADABLE = "document_unreadable"
DOCUMENT_ENVELOPE_MISMATCH = "document_envelope_mismatch"
CODES = (ROW_UNREADABLE, ENVELOPE_HASH_MISMATCH, ENTRY_HASH_MISMATCH, HASH_NOT_COMMITTED,
         ENVELOPE_UNREADABLE, FOREIGN_ENVELOPE, COLUMN_MISMATCH, PAYLOAD_DIGEST_MISMATCH,
         PAYLOAD_MISSING, DOCUMENT_UNREADABLE, DOCUMENT_ENVELOPE_MISMATCH)
LAYERS = ("agent", "developer", "auditor")


@dataclass(frozen=True)
class Problem:
    """One thing that did not check: its code, the field (a column, a payload name,
    ``envelope``, ``entry_hash``) and, for auditors, the hashed value and the stored one."""

    code: str
    field: str
    expected: Any = None
    actual: Any = None

    def to_dict(self) -> dict[str, Any]:
        return {"code": self.code, "field": self.field, "expected": _jsonable(self.expected),
                "actual": _jsonable(self.actual)}


def _jsonable(value: Any) -> Any:
    if isinstance(value, (bytes, bytearray, memoryview)):
        return "0x" + bytes(value).hex()
    return value


@dataclass(frozen=True)
class Integrity:
    """The verdict on one entry as read: ``verified`` when every value served checked
    against what was hashed (an erased payload is named in ``redacted`` and served as
    absent, which does not make the entry unverified)."""

    problems: tuple[Problem, ...] = ()
    redacted: tuple[str, ...] = ()

    @property
    def verified(self) -> bool:
        return not self.problems

    @property
    def codes(self) -> list[str]:
        return list(dict.fromkeys(p.code for p in self.problems))

    @property
    def fields(self) -> list[str]:
        return list(dict.fromkeys(p.field for p in self.problems))

    def to_dict(self, layer: str = "auditor") -> dict[str, Any]:
        """The ``integrity`` object of a read answer for ``layer``: agents get the boolean
        and the codes; developers also the fields and the redacted payloads; auditors also
        each problem with the hashed (``expected``) and the stored (``actual``) value."""
        out: dict[str, Any] = {"verified": self.verified, "codes": self.codes}
        if layer in ("developer", "auditor"):
            out["fields"] = self.fields
            out["redacted"] = list(self.redacted)
        if layer == "auditor":
            out["problems"] = [p.to_dict() for p in self.problems]
        return out


@dataclass
class CheckedEntry:
    """An entry as a reader may see it.

    ``values``: every indexed column's *envelope* value (None where the kind has no such
    field; a v2 result's ``subject`` from its checked subject payload) and ``tenant``, the
    tenant the entry hash binds (None when the entry hash does not recompute); ``tseq``:
    the entry's place in its tenant's chain, when the entry hash binds it (tenants other
    than the default one); ``texts``: the
    bytes of each payload that matched its commitment (an unchecked, missing or erased one
    is absent); ``document``: the parsed main document when it checked and is a JSON
    object; ``stored``: every stored payload by name, checked or not (the auditor's
    forensic view, always beside ``integrity``); ``commitments``: what the envelope
    commits to, by payload name."""

    seq: int
    kind: str
    recorded_at: int
    envelope: dict[str, Any]
    values: dict[str, Any]
    texts: dict[str, bytes]
    document: dict[str, Any] | None
    commitments: dict[str, str]
    stored: dict[str, bytes]
    integrity: Integrity
    version: int | None = None
    salts: dict[str, bytes] = field(default_factory=dict)
    tseq: int | None = None

    @property
    def tenant(self) -> str | None:
        """The proven tenant (None: the entry hash did not recompute)."""
        value = self.values.get(TENANT_VALUE)
        return value if isinstance(value, str) else None


def row_tenant(row: Any) -> Any:
    """The stored tenant of ``row`` (``default`` for a row that has none: an entry read
    from a source from before tenants)."""
    return getattr(row, "tenant", DEFAULT_TENANT)


def row_tseq(row: Any) -> int | None:
    """The place of ``row`` in its tenant's chain as stored (a NULL ``tseq`` of the
    default tenant is its seq); None when it has none or it is not an integer."""
    tenant, seq, tseq = row_tenant(row), getattr(row, "seq", None), getattr(row, "tseq", None)
    if type(seq) is not int or tseq is not None and type(tseq) is not int \
            or not isinstance(tenant, str):
        return None
    got = tseq_of(tenant, seq, tseq)
    return got if got >= 0 else None


def link_of(row: Any, prev: bytes, body: bytes) -> bytes | None:
    """The entry hash ``row`` must have: the v1 link for the default tenant, the tenant
    link for another; None when its tenant is no tenant id or its tseq no non-negative
    integer (nothing can hash to such an entry).  Raises ValueError (TypeError,
    OverflowError) for stored values of the wrong type."""
    tenant = row_tenant(row)
    if tenant == DEFAULT_TENANT:
        return entry_hash(prev, row.seq, row.recorded_at, body)
    tseq = getattr(row, "tseq", None)
    if not is_tenant(tenant) or type(tseq) is not int or tseq < 0:
        return None
    return tenant_entry_hash(tenant, prev, row.seq, tseq, row.recorded_at, body)


def as_bytes(value: Any) -> bytes:
    """Stored bytes as bytes."""
    if type(value) is bytes:
        return value
    if isinstance(value, str):  # a tampered SQLite BLOB may read back as TEXT
        return value.encode("utf-8", "surrogatepass")
    return bytes(value)


def check_entry(row: Any, blobs: dict[int, Any], ledger_id: str, *,
                redactions: RedactionMap | None = None,
                next_prev: bytes | None = None,
                slots: Collection[int] | None = None) -> CheckedEntry:
    """Check one stored entry (``row``: an entries row, ``blobs``: its stored payloads by
    slot, each ``(salt or None, bytes)``) and return what may be shown of it.

    ``redactions``: the redaction map (an absent payload a redaction names is ``redacted``,
    any other absent committed payload is ``payload_missing``); ``next_prev``: the
    ``prev_hash`` of the next entry of the same tenant, or the head hash when this is the
    last (None: not checked); ``slots``: the payload slots that were read (None: all) -- a
    payload in another slot is neither checked nor served, and the verdict covers only what
    is served.  Never raises for stored data."""
    problems: list[Problem] = []
    seq = row.seq if type(row.seq) is int else -1
    kind = row.kind if isinstance(row.kind, str) else "?"
    t = row.recorded_at if type(row.recorded_at) is int else 0
    try:
        envelope, body = as_bytes(row.envelope), as_bytes(row.body_hash)
        prev, stored_hash = as_bytes(row.prev_hash), as_bytes(row.entry_hash)
        recomputed = link_of(row, prev, body)
    except (TypeError, ValueError, OverflowError) as exc:
        problems.append(Problem(ROW_UNREADABLE, "entry_hash", None, str(exc)))
        return CheckedEntry(seq, kind, t, {}, dict.fromkeys((*INDEXED_COLUMNS, TENANT_VALUE)),
                            {}, None, {}, {}, Integrity(tuple(problems)))
    if body_hash(envelope) != body:
        problems.append(Problem(ENVELOPE_HASH_MISMATCH, "envelope", hash_hex(body),
                                hash_hex(body_hash(envelope))))
    if recomputed is None:
        problems.append(Problem(ENTRY_HASH_MISMATCH, "tenant", None,
                                [_jsonable(row_tenant(row)), getattr(row, "tseq", None)]))
    elif recomputed != stored_hash:
        problems.append(Problem(ENTRY_HASH_MISMATCH, "entry_hash", hash_hex(recomputed),
                                hash_hex(stored_hash)))
    if next_prev is not None and next_prev != stored_hash:
        problems.append(Problem(HASH_NOT_COMMITTED, "entry_hash", hash_hex(next_prev),
                                hash_hex(stored_hash)))
    env = _envelope(envelope, problems)
    raw_v = env.get("v")
    v: int = raw_v if type(raw_v) is int else 0
    if env and (v not in VERSIONS or env.get("ledger") != ledger_id or env.get("kind") != kind
                or kind not in COLUMN_MAP or (v == FORMAT_V2 and kind not in V2_FIELDS)):
        problems.append(Problem(FOREIGN_ENVELOPE, "kind" if env.get("kind") != kind
                                else "envelope", [env.get("v"), env.get("ledger"),
                                                  env.get("kind")], [ledger_id, kind]))
        env = {}
    commitments: dict[str, str] = {}
    texts: dict[str, bytes] = {}
    stored: dict[str, bytes] = {}
    salts: dict[str, bytes] = {}
    redacted: list[str] = []
    if env:
        raw = env.get("payloads")
        committed = raw if isinstance(raw, dict) else {}
        for name, slot in payload_map(kind, v).items():
            d = committed.get(name)
            if not isinstance(d, str):
                continue
            commitments[name] = d
            if slots is not None and slot not in slots:
                continue
            got = blobs.get(slot)
            if got is None:
                by = (redactions or {}).get((seq, name))
                if by is not None and by > seq:
                    redacted.append(name)
                else:
                    problems.append(Problem(PAYLOAD_MISSING, name, d, None))
                continue
            salt, data = got
            data = as_bytes(data)
            stored[name] = data
            if salt is not None:
                salts[name] = as_bytes(salt)
            try:
                actual = payload_commitment(kind, v, None if salt is None else as_bytes(salt),
                                            data)
            except ValueError:
                actual = None
            if actual != d:
                problems.append(Problem(PAYLOAD_DIGEST_MISMATCH, name, d, actual))
            else:
                texts[name] = data
    values = _values(row, kind, v, env, texts, problems)
    linked = recomputed == stored_hash
    tenant = row_tenant(row)
    values[TENANT_VALUE] = tenant if linked else None
    document = _document(kind, env, texts, problems)
    return CheckedEntry(seq, kind, t, env, values, texts, document, commitments, stored,
                        Integrity(tuple(problems), tuple(redacted)),
                        v or None, salts,
                        getattr(row, "tseq", None) if linked and tenant != DEFAULT_TENANT
                        else None)


def _envelope(envelope: bytes, problems: list[Problem]) -> dict[str, Any]:
    # orjson itself: an envelope's values are text, null, or (v) a small integer; an integer
    # beyond 64 bits, which orjson reads as a float, can only be in an envelope written by
    # hand, and it then differs from the column (a string) exactly as the exact integer would
    try:
        env = orjson_loads(envelope)
    except ValueError:
        env = None
    if not isinstance(env, dict):
        problems.append(Problem(ENVELOPE_UNREADABLE, "envelope", None, None))
        return {}
    return env


def _values(row: Any, kind: str, v: Any, env: dict[str, Any], texts: dict[str, bytes],
            problems: list[Problem]) -> dict[str, Any]:
    """Each indexed column's envelope value; a column that differs is a problem."""
    mapping = column_map(kind, v) if env else {}
    by_column = {col: name for name, col in mapping.items()}
    values: dict[str, Any] = {}
    for col in INDEXED_COLUMNS:
        if col in by_column:
            value = env.get(by_column[col])
        elif col == "subject" and kind == "result" and v == FORMAT_V2:
            data = texts.get("subject")
            value = _utf8(data)
        else:
            value = None
        values[col] = value
        stored = getattr(row, col, None)
        if not env:
            continue  # nothing hashed to compare with: the envelope's problem says so
        if col == "subject" and kind == "result" and v == FORMAT_V2:
            if stored is not None:  # the subject of a v2 row is a payload, never a column
                problems.append(Problem(COLUMN_MISMATCH, col, None, stored))
        elif stored != value:
            problems.append(Problem(COLUMN_MISMATCH, col, value, stored))
    if not env:
        values = dict.fromkeys(INDEXED_COLUMNS)
    return values


def _utf8(data: bytes | None) -> str | None:
    if data is None:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def _document(kind: str, env: dict[str, Any], texts: dict[str, bytes],
              problems: list[Problem]) -> dict[str, Any] | None:
    """The parsed main document, when it checked against its commitment and says what the
    envelope says (a result's status and proof_ref, an event's fields)."""
    name = DOC_PAYLOAD.get(kind)
    data = texts.get(name) if name else None
    if data is None:
        return None
    try:
        doc = fast_loads(data)
    except ValueError:
        doc = None
    if not isinstance(doc, dict):
        problems.append(Problem(DOCUMENT_UNREADABLE, name or "document", None, None))
        return None
    pairs = {"status": "status", "proof_ref": "proof_ref"} if kind == "result" \
        else DOC_FIELDS.get(kind, {})
    bad = False
    for env_key, doc_key in pairs.items():
        if doc.get(doc_key) != env.get(env_key):
            problems.append(Problem(DOCUMENT_ENVELOPE_MISMATCH, f"{name}.{doc_key}",
                                    env.get(env_key), doc.get(doc_key)))
            bad = True
    return None if bad else doc
