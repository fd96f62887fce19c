"""Pure per-row audit checks with honest dispositions (design §6).

Every check on every row ends in exactly one of *verified*, *failed* (a
:class:`Finding` with a stable code and class) or *abstained* (an
:class:`Abstention` with a reason, routed to a person).  A row is failed if any
check failed, else unverified if any check abstained, else verified.

The caller streams rows in seq order through :meth:`ChainAuditor.check_row`,
passing each row's payload bytes; attestation judgement (crypto) is injected.
"""

from __future__ import annotations

import hashlib
import json
import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from operator import attrgetter, itemgetter
from typing import Any, Protocol

from ledger.core import contract
from ledger.core.contract import VERIFIED, document_clean, envelope_clean
from ledger.core.digest import digest_text
from ledger.core.entry import (
    COLUMN_MAP,
    COLUMN_MAP_V2,
    DOC_FIELDS,
    DOC_PAYLOAD,
    ENTRY_TAG,
    ENVELOPE_TAG,
    FORMAT_V2,
    FORMAT_VERSION,
    HASH_SIZE,
    MAX_U63,
    PAYLOAD_MAP_V2,
    PAYLOAD_TAG,
    SALT_SIZE,
    V2_FIELDS,
    VERSIONS,
    body_hash,
    column_map,
    entry_hash,
    hash_hex,
    payload_map,
    version_of,
)
from ledger.core.erasure import RedactionMap, absent_payload, present_payload
from ledger.core.fastjson import loads as fast_loads
from ledger.core.fastjson import orjson_loads as _orjson_loads
from ledger.core.finding import (
    EXIT_CODES,
    Abstention,
    Disposition,
    Finding,
    FindingClass,
    outcome,
    row_disposition,
)
from ledger.core.policy import Policy
from ledger.core.tenant import (
    DEFAULT_TENANT,
    TENANT_ENTRY_TAG,
    is_tenant,
    tenant_entry_hash,
    tenant_genesis,
    tseq_of,
)

# Finding classes by their short names (ledger.core.finding.FindingClass); the enum, the
# outcome and the exit codes are re-exported here for the audit job.
PAYLOAD_MODIFIED = FindingClass.PAYLOAD_MODIFIED
REORDERED = FindingClass.REORDERED
DELETED = FindingClass.DELETED
TRUNCATED = FindingClass.TRUNCATED
FORKED = FindingClass.FORKED
SIGNATURE_INVALID = FindingClass.SIGNATURE_INVALID
CONTRACT_VIOLATION = FindingClass.CONTRACT_VIOLATION
POLICY_VIOLATION = FindingClass.POLICY_VIOLATION
__all__ = ["EXIT_CODES", "Abstention", "AttestationJudge", "AuditedRow", "ChainAuditor",
           "Disposition", "Finding", "FindingClass", "RowOutcome", "outcome"]

STATUSES = contract.STATUSES


def _pair(mapping: dict[str, str],
          ) -> tuple[Callable[[dict[str, Any]], tuple[Any, ...]], Callable[[AuditedRow], Any]]:
    """Getters of ``mapping``'s envelope fields and of its columns, as equal-length tuples."""
    names, columns = list(mapping), list(mapping.values())
    if len(names) == 1:
        return (lambda d: (d[names[0]],)), (lambda r: (getattr(r, columns[0]),))
    # C getters: a missing envelope key raises KeyError, as d[name] does
    return itemgetter(*names), attrgetter(*columns)


class AuditedRow(Protocol):
    """An entries row as the audit reads it: a database row or a bundle line's
    :class:`ledger.core.bundle.BundleRow`.  Besides these, the columns of
    :data:`COLUMN_MAP` and :data:`PAYLOAD_MAP` are read by name.  Values written behind the
    ledger's back may have other types; the audit reports such a row as unreadable."""

    @property
    def seq(self) -> int: ...

    @property
    def kind(self) -> str: ...

    @property
    def recorded_at(self) -> int: ...

    @property
    def envelope(self) -> bytes | str: ...

    @property
    def body_hash(self) -> bytes | str: ...

    @property
    def prev_hash(self) -> bytes | str: ...

    @property
    def entry_hash(self) -> bytes | str: ...


def _as_bytes(value: bytes | str) -> bytes:
    """Stored bytes as bytes (a tampered SQLite BLOB may read back as TEXT)."""
    if isinstance(value, str):
        return value.encode("utf-8", "surrogatepass")
    return bytes(value)


# Non-result documents: payload name, {envelope field: document key} that must agree.
_DOC_FIELDS = {kind: (DOC_PAYLOAD[kind], fields) for kind, fields in DOC_FIELDS.items()}


# Fast equality of envelope fields vs columns (the slow path names the column).
_GETTERS = {**{(k, FORMAT_VERSION): _pair(m) for k, m in COLUMN_MAP.items()},
            **{(k, FORMAT_V2): _pair(m) for k, m in COLUMN_MAP_V2.items()}}
# A row's stored payloads: slot -> (salt or None, bytes) (ledger.store.entries.Payload).
Slots = dict[int, tuple[bytes | None, bytes]]
_REORDER_WINDOW = 16
_V2_RESULT_SLOTS = tuple(PAYLOAD_MAP_V2["result"].items())
_V2_MARK = b'"v":%d' % FORMAT_V2  # in every canonical (compact) v2 envelope
_TWO_U64 = struct.Struct(">QQ")  # seq and recorded_at in the entry hash's preimage
# SHA-256 states that have taken a domain tag, copied for each hash of the fused pass: a
# copy costs less than a new hash object (OpenSSL 3 looks the digest up for each new one),
# and the tag is not concatenated to the data first (never updated themselves: safe to share)
_ENVELOPE_H = hashlib.sha256(ENVELOPE_TAG)
_ENTRY_H = hashlib.sha256(ENTRY_TAG)
_TENANT_ENTRY_H = hashlib.sha256(TENANT_ENTRY_TAG)
_U64 = struct.Struct(">Q")
_PAYLOAD_H = hashlib.sha256(PAYLOAD_TAG)
_V2_ENV_GET, _V2_ROW_GET = _GETTERS[("result", FORMAT_V2)]
_POLICY_MEMO = 4096  # (engine, status, constraint id) -> no rule matches, per walk


@dataclass
class RowOutcome:
    seq: int
    findings: list[Finding] = field(default_factory=list)
    abstentions: list[Abstention] = field(default_factory=list)
    verified_checks: int = 0
    # about the ledger around this row (entries missing before it), not the row itself
    gap_findings: list[Finding] = field(default_factory=list)

    @property
    def disposition(self) -> Disposition:
        """Failed if any check failed, else abstained if any abstained, else verified."""
        return row_disposition(bool(self.findings), bool(self.abstentions))


# (token, row, result_doc, query_text) -> (disposition, code, message)
AttestationJudge = Callable[[str, AuditedRow, dict[str, Any] | None, str | None],
                            tuple[str, str, str]]


def _explained(jump: int, missing: int) -> bool:
    """A chain's tseq moved by ``jump`` past the expected place while ``missing`` entries
    of the ledger were found missing since its last entry: in order (0), or over entries
    the gap finding already reports (1..missing)."""
    return jump == 0 or 0 < jump <= missing


@dataclass
class TenantChain:
    """Where a tenant's chain stands in a walk: the hash its next entry must link to (None:
    nothing to link to), whether that entry failed its own hash, the tseq the next entry
    must have (None: not checked) and the seq of the last entry seen (-1: none)."""

    prev_hash: bytes | None
    prev_failed: bool = False
    next_tseq: int | None = None
    last_seq: int = -1
    missing: int = 0  # the walk's count of missing entries when the chain last moved


# tenant -> (the hash its first entry of the walk must link to, that entry's tseq); None
# for either: not known (not checked)
Anchors = Callable[[str], tuple["bytes | None", "int | None"]]


class ChainAuditor:
    """Stateful walk over ``[start, end)``; ``anchor_hash`` is the prev_hash the
    first row of the default tenant must link to (genesis for seq 0, else the stored hash
    of its last entry before ``start``;
    None: nothing to link to, e.g. the first row of a filtered export run).  A
    ``ledger_id`` of None (a bundle manifest that names none) makes every envelope foreign.
    Each tenant's entries form their own chain (ledger.core.tenant): ``anchors(tenant)``
    gives where another tenant's chain starts in this walk (default: from its genesis when
    ``start`` is 0, else not checked)."""

    def __init__(self, ledger_id: str | None, start: int, anchor_hash: bytes | None, last_time: int,
                 policy: Policy, judge_attestation: AttestationJudge | None = None,
                 redactions: RedactionMap | None = None,
                 anchors: Anchors | None = None) -> None:
        # {(seq, payload name): redaction seq}: ledger.core.erasure.fold_redactions
        self.redactions: RedactionMap = redactions if redactions is not None else {}
        self.ledger_id = ledger_id
        self.expected_seq = start
        self.prev_hash = anchor_hash
        self.prev_failed_hash = False
        self.last_time = last_time
        self.policy = policy
        self.judge = judge_attestation
        # seqs with a redaction recorded for any payload: never on the fast path
        self._redacted_seqs = frozenset(seq for seq, _ in self.redactions)
        # the policy's verdict by (engine, status, constraint id), for the fused pass (a
        # policy is a pure function of the three: ledger.core.policy)
        self._policy_ok: dict[tuple[Any, Any, Any], bool] = {}
        # ``prev_hash``/``prev_failed_hash`` above are the default tenant's chain (the whole
        # ledger's chain when it has no other tenant); ``default_tseq`` is the tseq its next
        # entry must have (None: not known, not checked).  Other tenants' chains:
        # ``chains[tenant]``, started from ``anchors(tenant)`` at their first row of the walk
        self.default_tseq: int | None = None if start else 0
        self.chains: dict[str, TenantChain] = {}
        # entries found missing so far (seq gaps), and that count when the default chain
        # last moved: a chain's link or tseq jump over missing entries is the gap's finding
        self.missing = 0
        self.default_missing = 0
        self.anchors = anchors

    # Rows that pass every check take one fused pass (:meth:`_clean_v2_result`); any other
    # row -- and any row at all with ``fast = False`` -- takes the plain checks.  Both give
    # the same outcome and leave the same state (tests/core/test_audit_fast.py).
    fast = True
    # Rows carry their envelope parsed (``row.envelope_doc``, as json.loads reads
    # ``row.envelope``; None when it is no JSON): a bundle's rows, already parsed by
    # ledger.core.bundle.read_entry.  The fused pass then reads that instead of parsing again.
    parsed_envelopes = False

    # -- chain ------------------------------------------------------------
    # A walk over one tenant's entries only (``ledger audit --tenant``): their seqs are not
    # consecutive, so the global gap check is off (each chain's own checks stay on).
    sparse = False

    def check_row(self, row: Any, blobs: Slots) -> RowOutcome:
        """All checks of one row; ``blobs`` are its stored payloads by slot, each a
        ``(salt, data)`` pair (salt None for a plain digest).  Never raises for bad data:
        a row whose stored
        values cannot even be read (wrong types written behind the ledger's back)
        is one ``row_unreadable`` finding, and the walk goes on."""
        if self.fast:
            checks = self.clean_checks(row, blobs)
            if checks:
                return RowOutcome(row.seq, verified_checks=checks)
        return self.check_plain(row, blobs)

    def clean_checks(self, row: Any, blobs: Slots) -> int:
        """The fused pass alone (:meth:`_clean_v2_result`): the number of verified checks of
        a row that passes every check, with the walk moved on past it; 0 (state untouched)
        for any other row, which :meth:`check_plain` must then check.  A caller that only
        counts clean rows (the audit job) saves the :class:`RowOutcome` of each."""
        try:
            return self._clean_v2_result(row, blobs)
        except Exception:  # noqa: BLE001 - anything unusual is the plain path's to report
            return 0

    def check_plain(self, row: Any, blobs: Slots) -> RowOutcome:
        """Every check of :meth:`check_row` without the fused pass (which only ever gives
        the same outcome sooner)."""
        try:
            return self._check_row(row, blobs)
        except (TypeError, ValueError, AttributeError, OverflowError) as exc:
            out = RowOutcome(row.seq)
            out.findings.append(Finding("row_unreadable", row.seq, PAYLOAD_MODIFIED,
                                        f"stored values have the wrong type: {exc}"))
            self.expected_seq = row.seq + 1
            try:
                stored = _as_bytes(row.entry_hash)
            except (TypeError, ValueError):
                stored = b""
            tenant = getattr(row, "tenant", None) or DEFAULT_TENANT
            if tenant != DEFAULT_TENANT and isinstance(tenant, str):
                self.chains[tenant] = TenantChain(stored, True, None, row.seq)
            else:
                self.prev_failed_hash, self.prev_hash = True, stored
                self.default_tseq = None
            return out

    def _check_row(self, row: Any, blobs: Slots) -> RowOutcome:
        if self.sparse:
            self.expected_seq = row.seq
        out = RowOutcome(row.seq)
        f = out.findings
        envelope, body = _as_bytes(row.envelope), _as_bytes(row.body_hash)
        prev, stored_hash = _as_bytes(row.prev_hash), _as_bytes(row.entry_hash)
        if row.seq > self.expected_seq:
            self.missing += row.seq - self.expected_seq
        if row.seq != self.expected_seq:
            out.gap_findings.append(Finding("seq_gap", self.expected_seq, DELETED,
                             f"entries {self.expected_seq}..{row.seq - 1} are missing",
                             self.expected_seq, row.seq))
        own_ok = True
        if body_hash(envelope) != body:
            own_ok = False
            f.append(Finding("envelope_hash_mismatch", row.seq, PAYLOAD_MODIFIED,
                             "the envelope does not hash to the stored body_hash",
                             hash_hex(body), hash_hex(body_hash(envelope))))
        tenant = getattr(row, "tenant", None) or DEFAULT_TENANT
        if tenant != DEFAULT_TENANT:
            own_ok = self._check_tenant_link(row, tenant, prev, body, stored_hash, own_ok, f)
        else:
            own_ok = self._check_default_link(row, prev, body, stored_hash, own_ok, f)
        if row.recorded_at < self.last_time:
            f.append(Finding("time_reversed", row.seq, REORDERED,
                             "recorded_at is earlier than the previous entry's",
                             self.last_time, row.recorded_at))
        self.expected_seq = row.seq + 1
        self.last_time = max(self.last_time, row.recorded_at)
        if own_ok:
            out.verified_checks += 1
        self._check_content(row, envelope, blobs, out)
        return out

    def _check_default_link(self, row: Any, prev: bytes, body: bytes, stored_hash: bytes,
                            own_ok: bool, f: list[Finding]) -> bool:
        """The v1 link of a default-tenant row, its link to the previous default entry and
        its tseq; moves the default chain on.  Returns whether the row's own hash holds."""
        recomputed = entry_hash(prev, row.seq, row.recorded_at, body)
        if own_ok and recomputed != stored_hash:
            own_ok = False
            moved = self._moved_from(prev, row.seq, row.recorded_at, body, stored_hash)
            if moved is not None:
                f.append(Finding("entry_out_of_place", row.seq, REORDERED,
                                 f"this entry was hashed at seq {moved}", row.seq, moved))
            else:
                f.append(Finding("entry_hash_mismatch", row.seq, PAYLOAD_MODIFIED,
                                 "entry_hash does not recompute from prev/seq/time/body",
                                 hash_hex(recomputed), hash_hex(stored_hash)))
        if self.prev_hash is not None and prev != self.prev_hash \
                and row.seq == self.expected_seq:
            if own_ok and not self.prev_failed_hash and row.seq > 0:
                f.append(Finding("hash_not_committed", row.seq - 1, FORKED,
                                 f"entry {row.seq - 1} is not the entry that {row.seq} links to "
                                 "(rewritten with a recomputed hash, or history forked)",
                                 hash_hex(prev), hash_hex(self.prev_hash)))
            elif own_ok:
                f.append(Finding("broken_link", row.seq, FORKED,
                                 "prev_hash does not equal the previous entry's hash",
                                 hash_hex(self.prev_hash), hash_hex(prev)))
        tseq = tseq_of(DEFAULT_TENANT, row.seq, getattr(row, "tseq", None))
        # (a row that fails its own hash is already a finding, and the default link does not
        # bind tseq: its place is not checked, and the next row's is not either)
        if own_ok and self.default_tseq is not None and not _explained(
                tseq - self.default_tseq, self.missing - self.default_missing):
            f.append(Finding("tenant_seq_mismatch", row.seq, REORDERED,
                             f"tseq {tseq} is not the next place in tenant default's chain",
                             self.default_tseq, tseq))
        self.default_tseq = tseq + 1 if tseq >= 0 and own_ok else None
        self.default_missing = self.missing
        self.prev_hash = stored_hash
        self.prev_failed_hash = not own_ok
        return own_ok

    def _check_tenant_link(self, row: Any, tenant: str, prev: bytes, body: bytes,
                           stored_hash: bytes, own_ok: bool, f: list[Finding]) -> bool:
        """The tenant link of a row of another tenant (ledger.core.tenant), its link to the
        tenant's previous entry and its tseq; moves that chain on."""
        chain = self.chains.get(tenant)
        if chain is None:
            chain = self.chains[tenant] = self._start_chain(tenant)
        tseq = tseq_of(tenant, row.seq, getattr(row, "tseq", None))
        if tseq < 0 or not is_tenant(tenant):
            f.append(Finding("tenant_invalid", row.seq, PAYLOAD_MODIFIED,
                             "the entry's tenant or tseq breaks its rule", None, tenant))
            chain.prev_hash, chain.prev_failed, chain.next_tseq = stored_hash, True, None
            return False
        recomputed = tenant_entry_hash(tenant, prev, row.seq, tseq, row.recorded_at, body)
        if own_ok and recomputed != stored_hash:
            own_ok = False
            f.append(Finding("entry_hash_mismatch", row.seq, PAYLOAD_MODIFIED,
                             "entry_hash does not recompute from tenant/prev/seq/tseq/time/body",
                             hash_hex(recomputed), hash_hex(stored_hash)))
        gap = self.missing - chain.missing  # entries missing since the chain's last one
        if chain.prev_hash is not None and prev != chain.prev_hash and own_ok and not gap:
            if not chain.prev_failed and chain.last_seq >= 0:
                f.append(Finding("hash_not_committed", chain.last_seq, FORKED,
                                 f"entry {chain.last_seq} is not the entry that {row.seq} links "
                                 f"to in tenant {tenant}'s chain (rewritten, removed or forked)",
                                 hash_hex(prev), hash_hex(chain.prev_hash)))
            else:
                f.append(Finding("broken_link", row.seq, FORKED,
                                 f"prev_hash does not equal the hash of tenant {tenant}'s "
                                 "previous entry", hash_hex(chain.prev_hash), hash_hex(prev)))
        if chain.next_tseq is not None and not _explained(tseq - chain.next_tseq, gap):
            f.append(Finding("tenant_seq_mismatch", row.seq, REORDERED,
                             f"tseq {tseq} is not the next place in tenant {tenant}'s chain",
                             chain.next_tseq, tseq))
        chain.prev_hash, chain.prev_failed = stored_hash, not own_ok
        chain.next_tseq, chain.last_seq, chain.missing = tseq + 1, row.seq, self.missing
        return own_ok

    def _start_chain(self, tenant: str) -> TenantChain:
        if self.anchors is not None:
            prev, tseq = self.anchors(tenant)
            return TenantChain(prev, next_tseq=tseq)
        if self.expected_seq == 0 and self.ledger_id is not None and is_tenant(tenant):
            return TenantChain(tenant_genesis(self.ledger_id, tenant), next_tseq=0)
        return TenantChain(None)

    def _clean_v2_result(self, row: Any, blobs: Slots) -> int:
        """Every check of :meth:`_check_row` for a v2 result row, in one pass, when the row
        passes all of them: the number of verified checks, with the walk's state moved on
        as the plain path moves it.  0 (state untouched) at the first thing that is not
        clean, or that the plain path words itself (a gap, a redaction, an import, an
        attestation that does not verify); the plain path then checks the row from the
        start.  Nothing here may pass a row that the plain path would not."""
        envelope, body, prev = row.envelope, row.body_hash, row.prev_hash
        stored_hash, seq, t = row.entry_hash, row.seq, row.recorded_at
        # (the substring test: a v1 envelope -- every row of an older ledger -- never gets as
        # far as the hashes and the parse, which the plain path would then do again)
        if self.sparse:
            self.expected_seq = seq
        if type(envelope) is not bytes or type(body) is not bytes or type(prev) is not bytes \
                or type(stored_hash) is not bytes or row.kind != "result" \
                or _V2_MARK not in envelope \
                or seq != self.expected_seq \
                or type(t) is not int or t < self.last_time or seq in self._redacted_seqs:
            return 0
        tseq = getattr(row, "tseq", None)
        tseq = seq if tseq is None else tseq
        tenant = getattr(row, "tenant", DEFAULT_TENANT)
        chain = None
        if tenant == DEFAULT_TENANT:
            if prev != self.prev_hash or (self.default_tseq is not None
                                          and tseq != self.default_tseq):
                return 0
        else:  # another tenant's chain: only where it stands known and whole
            chain = self.chains.get(tenant)
            if chain is None or chain.prev_hash is None or prev != chain.prev_hash \
                    or chain.prev_failed or tseq != chain.next_tseq \
                    or self.missing != chain.missing:
                return 0
        sha = hashlib.sha256
        # ledger.core.entry.entry_hash, inlined (a negative seq or time makes the pack raise:
        # the plain path then reports the row)
        if len(prev) != HASH_SIZE or seq > MAX_U63 or t > MAX_U63:
            return 0
        h = _ENVELOPE_H.copy()
        h.update(envelope)
        if h.digest() != body:
            return 0
        if chain is None:
            h = _ENTRY_H.copy()
            h.update(prev + _TWO_U64.pack(seq, t) + body)
        else:  # ledger.core.tenant.tenant_entry_hash, inlined
            name = tenant.encode("ascii")
            h = _TENANT_ENTRY_H.copy()
            h.update(prev + _TWO_U64.pack(seq, tseq) + _U64.pack(t) + bytes((len(name),)) + name
                     + body)
        if h.digest() != stored_hash:
            return 0
        # orjson itself, without ledger.core.fastjson's guard for integers beyond 64 bits
        # (which orjson reads as floats where json.loads keeps them exact): every value this
        # pass reads from the two documents must be a str, None, a bool or a dict/list, or
        # equal a str column (every column compared is a string column:
        # tests/core/test_audit_fast.py), so such a float fails here exactly where the exact
        # integer fails the plain path's checks, and the plain path then words it
        env = row.envelope_doc if self.parsed_envelopes else _orjson_loads(envelope)
        if type(env) is not dict or env.get("v") != FORMAT_V2 \
                or env.get("ledger") != self.ledger_id or env.get("kind") != "result" \
                or row.subject is not None or not envelope_clean(env):
            return 0
        if _V2_ENV_GET(env) != _V2_ROW_GET(row):
            return 0
        digests = env.get("payloads") or {}
        texts: dict[str, bytes] = {}
        for name, slot in _V2_RESULT_SLOTS:
            d = digests.get(name)
            if d is None:
                continue
            got = blobs.get(slot)
            if got is None:
                return 0
            salt, data = got
            if type(salt) is not bytes or len(salt) != SALT_SIZE:
                return 0
            h = _PAYLOAD_H.copy()
            h.update(salt)
            h.update(data)
            if "sha256:" + h.hexdigest() != d:
                return 0
            texts[name] = data
        checks = 1 + len(texts)
        status, proof_ref = env.get("status"), env.get("proof_ref")
        if status == VERIFIED:  # a clean envelope: VERIFIED exactly when proof_ref is set
            pre = texts.get("preimage")
            if pre is None or "sha256:" + sha(pre).hexdigest() != proof_ref:
                return 0
            checks += 1
        result = texts.get("result")
        doc = _orjson_loads(result) if result is not None else None
        if type(doc) is not dict or doc.get("status") != status \
                or doc.get("proof_ref") != proof_ref or not document_clean(doc):
            return 0
        if self.policy.rules:
            key = (env.get("engine"), status, env.get("constraint_id"))
            ok = self._policy_ok.get(key)
            if ok is None:
                if len(self._policy_ok) >= _POLICY_MEMO:
                    self._policy_ok.clear()
                ok = self._policy_ok[key] = not self.policy.violations(*key)
            if not ok:
                return 0
        if digests.get("attestation") is not None:
            token = texts.get("attestation")
            if status != VERIFIED or token is None or self.judge is None:
                return 0
            query = texts["query"].decode("utf-8") if "query" in texts else None
            disp, _, _ = self.judge(token.decode("ascii"), row, env, query)
            if Disposition(disp) is not Disposition.VERIFIED:
                return 0  # the plain path judges it again and words the outcome
            checks += 1
        self.expected_seq = seq + 1
        if chain is None:
            self.prev_hash = stored_hash
            self.prev_failed_hash = False
            self.default_tseq = tseq + 1
        else:
            chain.prev_hash, chain.next_tseq, chain.last_seq = stored_hash, tseq + 1, seq
        self.last_time = t
        return checks

    def _moved_from(self, prev: bytes, seq: int, t: int, body: bytes, stored: bytes) -> int | None:
        for d in range(1, _REORDER_WINDOW + 1):
            for s in (seq - d, seq + d):
                if s >= 0 and entry_hash(prev, s, t, body) == stored:
                    return s
        return None

    # -- content ----------------------------------------------------------
    def _check_content(self, row: Any, envelope: bytes, blobs: Slots,
                       out: RowOutcome) -> None:
        f = out.findings
        try:
            env = fast_loads(envelope)
        except ValueError:
            f.append(Finding("envelope_unreadable", row.seq, PAYLOAD_MODIFIED,
                             "the envelope is not JSON"))
            return
        v = env.get("v")
        if v not in VERSIONS or env.get("ledger") != self.ledger_id \
                or env.get("kind") != row.kind or row.kind not in COLUMN_MAP \
                or (v == FORMAT_V2 and row.kind not in V2_FIELDS):
            f.append(Finding("foreign_envelope", row.seq, FORKED,
                             "envelope version, ledger id or kind does not match",
                             [version_of(row.kind) if row.kind in COLUMN_MAP else
                              FORMAT_VERSION, self.ledger_id, row.kind],
                             [v, env.get("ledger"), env.get("kind")]))
            return
        digests = env.get("payloads") or {}
        env_get, row_get = _GETTERS[(row.kind, v)]
        try:
            same = env_get(env) == row_get(row)
        except (KeyError, TypeError):
            same = False
        if not same:
            for name, column in column_map(row.kind, v).items():
                if env.get(name) != getattr(row, column):
                    f.append(Finding("column_mismatch", row.seq, PAYLOAD_MODIFIED,
                                     f"column {column} differs from the hashed envelope",
                                     env.get(name), getattr(row, column)))
        if v == FORMAT_V2 and row.kind == "result" and row.subject is not None:
            f.append(Finding("column_mismatch", row.seq, PAYLOAD_MODIFIED,
                             "column subject of a v2 row must be null (the subject is a "
                             "committed payload)", None, row.subject))
        texts: dict[str, bytes] = {}
        salted = v == FORMAT_V2 and row.kind == "result"
        for name, slot in payload_map(row.kind, v).items():
            d = digests.get(name)
            if d is None:
                continue
            stored = blobs.get(slot)
            if stored is None:
                got = absent_payload(row.seq, name, d, self.redactions)
                (f if isinstance(got, Finding) else out.abstentions).append(got)  # type: ignore[arg-type]
                continue
            salt, data = stored
            if self.redactions:
                late = present_payload(row.seq, name, self.redactions)
                if late is not None:
                    f.append(late)
            if salted:  # ledger.core.entry.commitment, inlined (the audit's hot path)
                actual = "sha256:" + hashlib.sha256(PAYLOAD_TAG + salt + data).hexdigest() \
                    if salt is not None and len(salt) == SALT_SIZE else None
            else:
                actual = digest_text(data)
            if actual != d:
                f.append(Finding("payload_digest_mismatch", row.seq, PAYLOAD_MODIFIED,
                                 f"payload {name} does not hash to its "
                                 f"{'commitment' if salted else 'digest'}", d, actual))
                continue
            texts[name] = data
            out.verified_checks += 1
        if row.kind == "result":
            self._check_result(row, env, texts, out)
        elif row.kind in _DOC_FIELDS:
            self._check_event_doc(row, env, texts, out)

    def _check_result(self, row: AuditedRow, env: dict[str, Any], texts: dict[str, bytes],
                      out: RowOutcome) -> None:
        f, seq = out.findings, row.seq
        status, proof_ref = env.get("status"), env.get("proof_ref")
        _contract_findings(seq, env, contract.ENVELOPE_RULES, f)
        pre_digest = (env.get("payloads") or {}).get("preimage")
        if status == "VERIFIED" and proof_ref is not None:
            if pre_digest is None and imported_provenance(env, texts) is not None:
                out.abstentions.append(Abstention(
                    seq, "proof_ref", "insufficient_evidence", "imported from a source that "
                    "kept no evidence preimage: proof_ref cannot be recomputed"))
            elif pre_digest is None:
                f.append(Finding("verified_without_evidence", seq, CONTRACT_VIOLATION,
                                 "a VERIFIED row stores no evidence preimage", proof_ref, None))
            elif "preimage" in texts:
                got = digest_text(texts["preimage"])
                if got != proof_ref:
                    f.append(Finding("proof_mismatch", seq, PAYLOAD_MODIFIED,
                                     "SHA-256 of the stored preimage is not the proof_ref",
                                     proof_ref, got))
                else:
                    out.verified_checks += 1
        doc = self._result_doc(seq, texts, f)
        if doc is not None:
            self._check_doc(seq, env, doc, f)
        for rule in self.policy.violations(env.get("engine"), status, env.get("constraint_id")):
            f.append(Finding(f"policy:{rule.id}", seq, POLICY_VIOLATION, rule.message,
                             None, {"engine": env.get("engine"), "status": status}))
        self._check_attestation(row, env, doc, texts, out)

    @staticmethod
    def _check_event_doc(row: AuditedRow, env: dict[str, Any], texts: dict[str, bytes],
                         out: RowOutcome) -> None:
        """A key_event/audit_run document must say what its hashed envelope says."""
        payload, fields = _DOC_FIELDS[row.kind]
        if payload not in texts:
            return
        try:
            doc = json.loads(texts[payload])
        except ValueError:
            doc = None
        if not isinstance(doc, dict):
            out.findings.append(Finding("document_unreadable", row.seq, PAYLOAD_MODIFIED,
                                        f"the {payload} document is not a JSON object"))
            return
        for name, doc_key in fields.items():
            if doc.get(doc_key) != env.get(name):
                out.findings.append(Finding("document_envelope_mismatch", row.seq,
                                            PAYLOAD_MODIFIED,
                                            f"{payload}.{doc_key} differs from the envelope",
                                            env.get(name), doc.get(doc_key)))

    @staticmethod
    def _result_doc(seq: int, texts: dict[str, bytes], f: list[Finding]) -> dict[str, Any] | None:
        if "result" not in texts:
            return None
        try:
            doc = fast_loads(texts["result"])
        except ValueError:
            f.append(Finding("result_unreadable", seq, PAYLOAD_MODIFIED, "result is not JSON"))
            return None
        if not isinstance(doc, dict):
            f.append(Finding("result_unreadable", seq, PAYLOAD_MODIFIED, "result is not an object"))
            return None
        return doc

    @staticmethod
    def _check_doc(seq: int, env: dict[str, Any], doc: dict[str, Any], f: list[Finding]) -> None:
        for key in ("status", "proof_ref"):
            if doc.get(key) != env.get(key):
                f.append(Finding("result_envelope_mismatch", seq, PAYLOAD_MODIFIED,
                                 f"result.{key} differs from the envelope",
                                 env.get(key), doc.get(key)))
        _contract_findings(seq, doc, contract.DOCUMENT_RULES, f)

    def _check_attestation(self, row: AuditedRow, env: dict[str, Any], doc: dict[str, Any] | None,
                           texts: dict[str, bytes], out: RowOutcome) -> None:
        digest = (env.get("payloads") or {}).get("attestation")
        if digest is None:
            return
        wrong = contract.violations({"status": env.get("status"), "attestation": digest},
                                    contract.ATTESTATION_RULES)
        if wrong:
            out.findings.extend(Finding(v.code or v.rejection, row.seq, CONTRACT_VIOLATION,
                                        v.finding_message) for v in wrong)
            return
        if "attestation" not in texts:
            return  # missing/modified payload already reported
        if self.judge is None:
            out.abstentions.append(Abstention(row.seq, "attestation", "no_trust_store",
                                              "attestations were not checked in this run"))
            return
        query = texts["query"].decode("utf-8") if "query" in texts else None
        imported = imported_provenance(env, texts) or {}
        if type(imported.get("source_timestamp_us")) is int:  # judged when the source recorded it
            row = _AtTime(row, imported["source_timestamp_us"])
        disp, code, message = self.judge(texts["attestation"].decode("ascii"), row, env, query)
        disp = Disposition(disp)
        if disp is Disposition.FAILED:
            out.findings.append(Finding(code, row.seq, SIGNATURE_INVALID, message))
        elif disp is Disposition.ABSTAINED:
            out.abstentions.append(Abstention(row.seq, "attestation", code, message))
        else:
            out.verified_checks += 1


def _contract_findings(seq: int, view: dict[str, Any], rules: tuple[contract.Rule, ...],
                       f: list[Finding]) -> None:
    """The result-contract rules (ledger.core.contract) as findings on row ``seq``."""
    found = contract.violations(view, rules)
    if found:
        f.extend(Finding(v.code or v.rejection, seq, CONTRACT_VIOLATION, v.finding_message,
                         v.expected, v.actual) for v in found)


def imported_provenance(env: dict[str, Any], texts: dict[str, bytes]) -> dict[str, Any] | None:
    """``meta.import`` of a VERIFIED row written by an import (ledger/ops/qwed_import.py).

    Only an import appends a VERIFIED row without a preimage (every other append must
    give one), so provenance counts only on such a row: a producer's own ``meta`` can
    never turn a missing preimage into an abstention or move its attestation's time.
    """
    if env.get("status") != "VERIFIED" or (env.get("payloads") or {}).get("preimage") \
            is not None or "meta" not in texts:
        return None
    try:
        meta = json.loads(texts["meta"])
    except ValueError:
        return None
    imported = meta.get("import") if isinstance(meta, dict) else None
    return imported if isinstance(imported, dict) else None


class _AtTime:
    """A row seen at another time (an imported attestation is judged at the source's)."""

    def __init__(self, row: Any, recorded_at: int) -> None:
        self._row, self.recorded_at = row, recorded_at

    def __getattr__(self, name: str) -> Any:
        return getattr(self._row, name)
