"""Import QWED 8.0's audit log (``VerificationLog`` rows) with its provenance verifiable.

``import_qwed(ctx, rows, ...)``: every row is re-verified as QWED verifies it
(ledger/core/qwed_log.py: entry hash, link to the organisation's previous row, HMAC
under the audit secret when given).  A row that verifies becomes one ``result`` entry:

* ``result`` = the stored result document (``DiagnosticResult.to_dict()``), ``engine`` =
  the domain in lower case, ``query`` = the row's query, ``admission`` when it is ADMIT
  or BLOCKED, ``subject`` = ``qwed:<organization>:<id>``;
* ``idempotency_key`` = ``qwed:<namespace>:<organization>:<id>``: a re-run replays
  (nothing new is appended), an interrupted run resumes where it stopped, and a row
  edited since it was imported is an ``idempotency_conflict`` (quarantined);
* ``meta.import`` = the provenance: source, namespace, organisation, source id, source
  entry hash, HMAC verdict (``valid`` or ``unchecked``), the source time, and every other
  column QWED hashed;
* no preimage (QWED keeps none): the audit abstains on its proof_ref with
  ``insufficient_evidence``; its attestation is judged against the trust store at the
  source row's time, here and in the audit.

A row that fails (hash, link, HMAC, or the ledger's own rules) is quarantined with its
reason and reported.  When the run appended anything, one ``import`` entry records the
source (``qwed:<namespace>``), the operator's ``--label`` if given, each organisation's head
(id and entry hash) and the counts (:func:`import_document`, docs/format.md §10.3).  It
records nothing of the importing machine: not the path of the dump, not the database URL
(the printed report shows them; the chain never holds them).  That entry is canonical
JSON, so a source holding a row id beyond ±(2^53-1) is refused (``check_id``) before
anything is appended: ``read_source`` checks every row before giving the first.

Tenants: ``tenants`` maps an organisation id (as text) to the tenant whose chain its rows
join, ``tenant`` is the tenant of every other organisation (``default`` unless given);
both are checked before any row is read.  The ``import`` entry itself is the operator's
record of the run and stays in the ``default`` tenant.  A re-run must map each organisation
as the first run did: a row already imported is replayed from wherever it is.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from ledger.core.canonical import MAX_SAFE_INTEGER
from ledger.core.qwed_log import ChainChecker, RowVerdict, as_datetime, canonical_ts
from ledger.core.submission import Submission, parse_submission
from ledger.core.tenant import DEFAULT_TENANT, check_tenant
from ledger.crypto.trust import TrustStore
from ledger.errors import LedgerError, SubmissionError, UsageError
from ledger.ops.append import (
    AttestationJudge,
    Judgement,
    Prepared,
    commit_batch,
    judge_attestation,
    prepare_event,
    prepare_result,
    quarantine,
)
from ledger.ops.context import LedgerContext
from ledger.ops.trust_store import load_trust_store
from ledger.store import qwed_source

CHUNK = 500
PRODUCER = "qwed-import"
REPORT_TYPE = "ledger-import/1"


@dataclass
class ImportReport:
    """What one import did (``ledger import qwed`` prints it as JSON)."""

    source: str  # where the rows were read (printed, never recorded in the chain)
    namespace: str
    hmac: str  # checked | unchecked
    dry_run: bool = False
    label: str | None = None  # the operator's description, recorded in the import entry
    rows: int = 0
    imported: int = 0
    replayed: int = 0
    legacy: int = 0
    quarantined: list[dict[str, Any]] = field(default_factory=list)
    organizations: dict[str, dict[str, Any]] = field(default_factory=dict)
    import_seq: int | None = None

    @property
    def outcome(self) -> str:
        return "quarantined" if self.quarantined or self.legacy else "clean"

    def to_dict(self) -> dict[str, Any]:
        out = dict(self.__dict__)
        out["outcome"] = self.outcome
        return out


def read_jsonl(path: str) -> Iterator[dict[str, Any]]:
    """Rows of a JSON Lines dump of the ``verificationlog`` table (one object a line,
    the table's column names; ``timestamp`` as ISO 8601 text), in chain order."""
    rows, n = [], 0
    try:
        with open(path, encoding="utf-8") as fh:
            for n, line in enumerate(fh, 1):  # noqa: B007 - n is reported below
                if line.strip():
                    obj = json.loads(line)
                    if not isinstance(obj, dict):
                        raise ValueError("not an object")
                    if obj.get("is_verified") in (0, 1):  # a boolean column dumped as 0/1
                        obj["is_verified"] = bool(obj["is_verified"])
                    rows.append(obj)
    except (OSError, ValueError) as exc:
        raise UsageError(f"cannot read the QWED dump {path} (line {n}): {exc}",
                         code="bad_source", field="source") from None
    for row in rows:  # all of them before the first is imported
        check_id(row)
    rows.sort(key=lambda r: (r.get("organization_id"), r.get("id")))
    return iter(rows)


def check_id(row: dict[str, Any], done: str = "nothing was imported") -> None:
    """Refuse a row whose ``id`` the import entry cannot record (its ``head_id`` is
    canonical JSON: an integer within ±(2^53-1)); QWED's own ids are unbounded."""
    rid = row.get("id")
    if type(rid) is not int or abs(rid) > MAX_SAFE_INTEGER:
        raise UsageError(
            f"QWED row id {rid!r} (organization {row.get('organization_id')}) is not an "
            f"integer within ±(2^53-1), the integers an import entry can record; {done}",
            code="bad_source", field="id")


def read_source(source: str, organization: int | None = None,
                ) -> tuple[str, Iterator[dict[str, Any]]]:
    """(a label safe to record, the rows) of ``source``: a SQLAlchemy URL of QWED's
    database (``sqlite:///qwed.db``, ``postgresql://...``) or a JSON Lines dump."""
    if "://" in source:
        return qwed_source.redacted(source), qwed_source.read_rows(source, organization)
    rows = read_jsonl(source)
    if organization is not None:
        rows = (r for r in rows if r.get("organization_id") == organization)
    return source, rows


def _us(value: Any) -> int:
    t = as_datetime(value)
    t = t.replace(tzinfo=UTC) if t.tzinfo is None else t
    return (t - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(microseconds=1)


def _submission(v: RowVerdict, source: str, namespace: str) -> dict[str, Any]:
    row = v.row
    org, rid = row["organization_id"], row["id"]
    provenance = {k: row.get(k) for k in ("user_id", "is_verified", "domain", "api_key_id",
                                          "verifier_version", "admission", "raw_llm_output",
                                          "previous_hash")}
    provenance.update(source="qwed", namespace=namespace, organization_id=org, source_id=rid,
                      source_entry_hash=row["entry_hash"], hmac=v.hmac,
                      source_timestamp=canonical_ts(as_datetime(row["timestamp"])),
                      source_timestamp_us=_us(row["timestamp"]))
    sub: dict[str, Any] = {"result": json.loads(row["result"]),
                           "engine": str(row["domain"]).lower(), "query": row["query"],
                           "subject": f"qwed:{org}:{rid}",
                           "idempotency_key": f"qwed:{namespace}:{org}:{rid}",
                           "meta": {"import": provenance}}
    if row.get("admission") in ("ADMIT", "BLOCKED"):
        sub["admission"] = row["admission"]
    return sub


def _judge_at(store: TrustStore, at_us: int) -> AttestationJudge:
    """The attestation verdict of an imported row, judged at the source row's time (the
    one append judge; its time bounds are not re-checked at the ledger's recorded time)."""
    def judge(sub: Submission) -> Judgement:
        j = judge_attestation(sub, store, store.last_event_seq + 1, at_us)
        return Judgement(j.fields)
    return judge


def _raw(row: dict[str, Any]) -> bytes:
    return json.dumps(row, default=str, ensure_ascii=False, sort_keys=True).encode("utf-8")


class _Run:
    """One import run: prepares rows, commits them in chunks, quarantines failures."""

    def __init__(self, ctx: LedgerContext, report: ImportReport,
                 tenants: Mapping[str, str] | None = None,
                 tenant: str = DEFAULT_TENANT) -> None:
        self.ctx, self.report = ctx, report
        self.tenants, self.tenant = dict(tenants or {}), tenant
        self.store = load_trust_store(ctx.engine)
        self.pending: list[tuple[Prepared, dict[str, Any]]] = []
        self.bad: list[tuple[bytes, dict[str, Any]]] = []

    def add(self, v: RowVerdict) -> None:
        row, rep = v.row, self.report
        # read_source has checked every row before the first; rows from elsewhere are
        # checked here, before their chunk is committed
        check_id(row, "the run stopped at this row")
        org = str(row.get("organization_id"))
        head = rep.organizations.setdefault(org, {"rows": 0})
        head["rows"] += 1
        if row.get("entry_hash"):
            head.update(head_id=row.get("id"), head_hash=row.get("entry_hash"))
        if v.state != "ok":
            self._quarantine(row, f"qwed_{v.reasons[0]}", ", ".join(v.reasons))
            rep.legacy += v.state == "legacy"
            return
        try:
            sub = parse_submission(_submission(v, rep.source, rep.namespace),
                                   require_evidence=False)
            p = prepare_result(sub, PRODUCER, _judge_at(self.store, _us(row["timestamp"])))
            p.seal(self.ctx.meta.ledger_id)
            p.tenant = self.tenants.get(org, self.tenant)
        except SubmissionError as exc:
            self._quarantine(row, exc.code, str(exc))
            return
        except (ValueError, TypeError) as exc:
            self._quarantine(row, "qwed_result_unreadable", str(exc))
            return
        p.raw, p.index = _raw(row), len(self.pending)
        self.pending.append((p, row))
        if len(self.pending) >= CHUNK:
            self.flush()

    def _quarantine(self, row: dict[str, Any], code: str, message: str) -> None:
        self.report.quarantined.append({"organization_id": row.get("organization_id"),
                                        "id": row.get("id"), "code": code, "reason": message})
        self.bad.append((_raw(row), {"code": code, "field": None,
                                     "message": f"QWED row {row.get('id')}: {message}"}))

    def _already(self) -> None:
        """Rows the ledger holds from an earlier run are not sent again: the same source
        entry hash is "replayed" (whatever HMAC verdict that run recorded); another one
        means the row changed since it was imported (``idempotency_conflict``)."""
        held = qwed_source.imported_meta(self.ctx.engine,
                                         [p.idempotency_key for p, _ in self.pending
                                          if p.idempotency_key is not None])
        keep = []
        for p, row in self.pending:
            if p.idempotency_key not in held:
                keep.append((p, row))
                continue
            meta = held[p.idempotency_key]
            try:
                was = json.loads(meta or b"{}").get("import", {}).get("source_entry_hash")
            except ValueError:
                was = None
            if was == row["entry_hash"]:
                self.report.replayed += 1
            else:
                self._quarantine(row, "idempotency_conflict", "the ledger holds another "
                                 "version of this row (imported before it changed)")
        self.pending = keep

    def flush(self) -> None:
        if self.pending:
            self._already()
        if self.pending and not self.report.dry_run:
            results = commit_batch(self.ctx.engine, self.ctx.meta.ledger_id, self.ctx.clock,
                                   [p for p, _ in self.pending],
                                   quotas=self.ctx.tenant_quotas)  # results: as a producer's
            for r, (_, row) in zip(results, self.pending, strict=True):
                if not r.ok:
                    self._quarantine(row, r.error["code"], r.error["message"])  # type: ignore
                elif r.replayed:
                    self.report.replayed += 1
                else:
                    self.report.imported += 1
        elif self.pending:
            self.report.imported += len(self.pending)
        self.pending = []
        if self.bad and not self.report.dry_run:
            quarantine(self.ctx, self.bad, PRODUCER)  # bounded like every quarantine write
        self.bad = []


MAX_LABEL = 256


def check_label(label: str | None) -> str | None:
    """``label`` as recorded: None, or 1..256 code points of text without control
    characters.  Raises UsageError (code ``bad_label``, field ``label``)."""
    if label is None:
        return None
    if not isinstance(label, str) or not label.strip() or len(label) > MAX_LABEL \
            or any(ord(c) < 0x20 or 0x7F <= ord(c) < 0xA0 for c in label):
        raise UsageError(f"label must be 1..{MAX_LABEL} characters of text without control "
                         "characters", code="bad_label", field="label")
    return label


def check_tenant_map(tenants: Mapping[str, str] | None, tenant: str | None,
                     ) -> tuple[dict[str, str], str]:
    """The organisation -> tenant map and the tenant of the others, checked.  Raises
    TenantError (field ``tenant``) or UsageError (field ``organization``)."""
    out: dict[str, str] = {}
    for org, t in (tenants or {}).items():
        if not str(org).lstrip("-").isdigit():
            raise UsageError(f"organization {org!r} is not an organisation id",
                             field="organization")
        out[str(int(org))] = check_tenant(t)
    return out, DEFAULT_TENANT if tenant is None else check_tenant(tenant)


def import_qwed(ctx: LedgerContext, rows: Iterable[dict[str, Any]], *, source: str,
                secret: bytes | None = None, namespace: str = "default",
                dry_run: bool = False, label: str | None = None,
                tenants: Mapping[str, str] | None = None,
                tenant: str | None = None) -> ImportReport:
    """Verify and import QWED ``VerificationLog`` rows (see the module docstring);
    ``tenants`` (organisation id -> tenant) and ``tenant`` (every other organisation)
    place each organisation's rows in a tenant's chain.

    ``source`` says where the rows were read, for the returned report only; ``label`` is
    the operator's description of the run, recorded in the import entry.  ``ctx`` has
    ``engine``, ``meta`` (``ledger_id``) and ``clock``.  Raises UsageError (a bad label),
    LedgerError when the ledger cannot be written; bad rows are reported, never raised.
    """
    tenant_of, others = check_tenant_map(tenants, tenant)
    report = ImportReport(source, namespace, "checked" if secret is not None else "unchecked",
                          dry_run, label=check_label(label))
    run, checker = _Run(ctx, report, tenant_of, others), ChainChecker(secret)
    for row in rows:
        report.rows += 1
        run.add(checker.check(row))
    run.flush()
    if report.imported and not dry_run:
        report.import_seq = _record(ctx, report)
    return report


def import_document(report: ImportReport) -> dict[str, Any]:
    """The ``ledger-import/1`` report document of an import entry (docs/format.md §10.5):
    exactly these keys, nothing of the importing machine (``report.source`` stays out)."""
    return {"type": REPORT_TYPE, "source": f"qwed:{report.namespace}", "label": report.label,
            "namespace": report.namespace, "outcome": report.outcome, "hmac": report.hmac,
            "rows": report.rows, "imported": report.imported, "replayed": report.replayed,
            "legacy": report.legacy, "quarantined": len(report.quarantined),
            "organizations": report.organizations}


def import_event(report: ImportReport) -> Prepared:
    """The prepared ``import`` entry of a run."""
    doc = import_document(report)
    return prepare_event("import", {"source": doc["source"], "outcome": report.outcome,
                                    "producer": PRODUCER}, "report", doc)


def _record(ctx: LedgerContext, report: ImportReport) -> int:
    ev = import_event(report)
    res = commit_batch(ctx.engine, ctx.meta.ledger_id, ctx.clock, [ev])[0]
    if not res.ok or res.seq is None:
        raise LedgerError(f"the import entry was not appended: {res.error}")
    return res.seq

