"""Read-only listings of the ledger's own history: stored checkpoints (with their
cosigners and timestamps) and the audit runs recorded in ``audit_runs``.

Used by ``GET /v1/checkpoints`` and ``GET /v1/audits`` (the web console) and by the
HTML reports.  Nothing here writes.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from typing import Any

from ledger.clock import format_us
from ledger.core.explain import SEVERITIES, explain, finding_field, group_findings
from ledger.core.note import parse_checkpoint_body, parse_note
from ledger.errors import LedgerError, NoteError, NotFound, UsageError
from ledger.ops.checkpoint import consistency_proof
from ledger.ops.context import LedgerContext
from ledger.store import audit_runs as runs
from ledger.store.anchors import COSIGNATURE, TIMESTAMP, checkpoint_page
from ledger.store.db import connect

MAX_PAGE = 1000


def _consistency(ctx: LedgerContext, old: int | None, new: int) -> dict[str, Any] | None:
    """The RFC 9162 consistency proof from the stored tree between two checkpoint sizes:
    ``{"from": old, "path": [hex]}`` (``path`` null and ``error`` set when the stored tree
    cannot give one, e.g. the ledger shrank); None without an earlier checkpoint."""
    if old is None:
        return None
    if old == 0:  # every tree extends the empty tree: nothing to prove (RFC 9162)
        return {"from": 0, "path": []}
    try:
        return {"from": old, "path": [h.hex() for h in consistency_proof(ctx, old, new)]}
    except LedgerError as exc:
        return {"from": old, "path": None, "error": exc.message}


def checkpoints(ctx: LedgerContext, after: int = -1, limit: int = 100,
                consistency: bool = False) -> dict[str, Any]:
    """Stored checkpoints with ``size > after``, smallest first: ``{"checkpoints": [{size,
    created_at, root_b64, signers, cosigners, timestamps, note}], "next_after"}``.
    ``signers`` are the key names of the note's own signature lines; ``cosigners`` the
    witnesses whose cosignature lines are stored for it; ``timestamps`` the TSAs with the
    time each token was stored.  ``note`` is the signed note with the cosignature lines;
    ``root_hex`` the root as ``ledger checkpoint`` prints it.  With ``consistency``, each
    also has ``consistency``: the proof from the checkpoint before it (``_consistency``; for
    the first of a page with ``after`` >= 0, from the checkpoint of size ``after``)."""
    limit = max(1, min(limit, MAX_PAGE))
    page = checkpoint_page(ctx.engine, after, limit + 1)
    more = len(page) > limit
    out = []
    prev: int | None = None
    if consistency and after >= 0:
        before = checkpoint_page(ctx.engine, after - 1, 1)
        prev = before[0].size if before and before[0].size == after else None
    for cp in page[:limit]:
        try:
            note = parse_note(cp.note)
            body = parse_checkpoint_body(note.text)
            signers = sorted({s.name for s in note.signatures})
            root_b64 = note.text.split("\n")[2]
            origin = body.origin
        except NoteError:  # stored bytes the parser refuses: shown as they are
            signers, root_b64, origin = [], None, None
        cosigs = [a for a in cp.anchors if a.kind == COSIGNATURE]
        lines = "".join(a.data for a in cosigs if a.data not in cp.note)
        out.append({
            "size": cp.size, "created_at": format_us(cp.created_at), "origin": origin,
            "root_b64": root_b64, "signers": signers,
            "cosigners": [{"name": a.name, "created_at": format_us(a.created_at)}
                          for a in cosigs],
            "timestamps": [{"tsa": a.name, "created_at": format_us(a.created_at)}
                           for a in cp.anchors if a.kind == TIMESTAMP],
            "note": cp.note + lines,
            "root_hex": _root_hex(root_b64),
        })
        if consistency:
            out[-1]["consistency"] = _consistency(ctx, prev, cp.size)
            prev = cp.size
    return {"checkpoints": out, "next_after": out[-1]["size"] if more else None}


def _root_hex(root_b64: str | None) -> str | None:
    try:
        raw = base64.b64decode(root_b64 or "", validate=True)
    except ValueError:
        return None
    return raw.hex() if len(raw) == 32 else None


def _label(r: runs.RunRow, options: dict[str, Any]) -> dict[str, Any]:
    """What made a run and over what (docs/audit.md, "Recorded runs"): ``command`` (null for a
    library call and for runs recorded before runs were labelled), ``actor``, ``scope``
    (``whole ledger``, ``since last audit``, ``seqs [a, b)``), ``checkpoints`` (file names of
    the ``--checkpoint`` notes it was checked against)."""
    tenant = options.get("tenant")
    if isinstance(tenant, str):
        scope = f"tenant {tenant}: its chain in seqs [{r.range_start}, {r.range_end})"
    elif options.get("since_last"):
        scope = f"since the last passed audit: seqs [{r.range_start}, {r.range_end})"
    elif options.get("whole"):
        scope = f"whole ledger: seqs [{r.range_start}, {r.range_end})"
    else:
        scope = f"seqs [{r.range_start}, {r.range_end})"
    cps = options.get("checkpoints")
    return {"command": options.get("command"), "actor": options.get("actor"), "scope": scope,
            "checkpoints": [str(c) for c in cps] if isinstance(cps, list) else []}


def _run_doc(r: runs.RunRow, counts: dict[str, int]) -> dict[str, Any]:
    try:
        summary = json.loads(r.counts)
        options = json.loads(r.options)
    except ValueError:
        summary, options = {}, {}
    if not isinstance(options, dict):
        options = {}
    return {
        "run_id": r.id, "state": r.state, "started_at": format_us(r.started_at),
        "updated_at": format_us(r.updated_at),
        "range": {"start": r.range_start, "end": r.range_end}, "next_seq": r.next_seq,
        "summary": {k: summary.get(k) for k in ("rows", "verified", "failed", "unverified")},
        "attestations_checked": bool(options.get("attestations", True)),
        "policy": options.get("policy") or "default policy",
        "findings": counts.get("finding", 0), "abstentions": counts.get("abstention", 0),
        "label": _label(r, options),
        # the one tenant whose chain the run audited (ledger audit --tenant); null: the ledger
        "tenant": options.get("tenant") if isinstance(options.get("tenant"), str) else None,
    }


def _tenant_of(r: runs.RunRow) -> str | None:
    try:
        options = json.loads(r.options)
    except ValueError:
        return None
    tenant = options.get("tenant") if isinstance(options, dict) else None
    return tenant if isinstance(tenant, str) else None


def _tenant_page(conn: Any, tenant: str, before: int | None, limit: int) -> list[runs.RunRow]:
    """The first ``limit`` recorded audits of ``tenant``'s chain with ``id < before``."""
    out: list[runs.RunRow] = []
    while len(out) < limit:
        page = runs.run_page(conn, before, MAX_PAGE, runs.TENANT_AUDIT)
        out += [r for r in page if _tenant_of(r) == tenant]
        if len(page) < MAX_PAGE:
            break
        before = page[-1].id
    return out[:limit]


def audit_runs(ctx: LedgerContext, before: int | None = None, limit: int = 100,
               tenant: str | None = None) -> dict[str, Any]:
    """Recorded audit runs, newest first (``run_id < before``): ``{"runs": [...],
    "next_before"}``; each with its range, state, row counts and number of saved findings
    and abstentions.  ``tenant``: only the recorded audits of that tenant's chain
    (``ledger audit --tenant T --record``), never a run of the whole ledger."""
    limit = max(1, min(limit, MAX_PAGE))
    with connect(ctx.engine) as conn:
        page = runs.run_page(conn, before, limit + 1) if tenant is None \
            else _tenant_page(conn, tenant, before, limit + 1)
        more = len(page) > limit
        page = page[:limit]
        counts = runs.finding_counts(conn, [r.id for r in page])
    docs = [_run_doc(r, counts[r.id]) for r in page]
    return {"runs": docs, "next_before": docs[-1]["run_id"] if more else None}


FINDING_SORTS = ("seq", "-seq", "code", "severity")


@dataclass(frozen=True)
class FindingSelection:
    """Which of a run's findings ``finding_list`` holds: those of ``code``, ``cls`` and
    ``field`` (an incident's key; None: any), sorted by ``sort`` (one of
    :data:`FINDING_SORTS`), ``limit`` of them from ``offset`` (limit None: all)."""

    code: str | None = None
    cls: str | None = None
    field: str | None = None
    sort: str = "seq"
    offset: int = 0
    limit: int | None = None


def _sorted(found: list[dict[str, Any]], sort: str) -> list[dict[str, Any]]:
    def seq(f: dict[str, Any]) -> int:
        return f["seq"] if isinstance(f.get("seq"), int) else -1
    if sort == "-seq":
        return sorted(found, key=seq, reverse=True)
    if sort == "code":
        return sorted(found, key=lambda f: (str(f.get("code")), seq(f)))
    if sort == "severity":
        rank = {s: i for i, s in enumerate(SEVERITIES)}
        return sorted(found, key=lambda f: (rank[explain(str(f.get("code")))["severity"]],
                                            str(f.get("code")), seq(f)))
    return sorted(found, key=seq)


def audit_run(ctx: LedgerContext, run_id: int, sel: FindingSelection | None = None,
              tenant: str | None = None) -> dict[str, Any]:
    """One recorded run with its saved findings and abstentions (row-level ones: the
    ledger-level findings of a run are in its JSON report only), its findings grouped into
    ``incidents`` (``ledger.core.explain.group_findings``, each with its explanation), and
    ``finding_list`` the findings ``sel`` selects (default: all, in seq order), with
    ``finding_total`` the number selected before paging.  ``tenant``: a run that is not a
    recorded audit of that tenant is answered as a missing one.  Raises NotFound."""
    sel = sel or FindingSelection()
    if sel.sort not in FINDING_SORTS:
        raise UsageError(f"sort must be one of {', '.join(FINDING_SORTS)}", field="sort")
    with connect(ctx.engine) as conn:
        r = runs.run_by_id(conn, run_id)
        if r is None or (tenant is not None and _tenant_of(r) != tenant):
            raise NotFound(f"no audit run {run_id}", field="run_id")
        saved = runs.run_findings(conn, run_id)
        counts = runs.finding_counts(conn, [run_id])[run_id]
    doc = _run_doc(r, counts)
    found = [json.loads(b) for k, b in saved if k == "finding"]
    doc["incidents"] = group_findings(found)
    chosen = [f for f in found
              if (sel.code is None or f.get("code") == sel.code)
              and (sel.cls is None or f.get("class") == sel.cls)
              and (sel.field is None or finding_field(f) == sel.field)]
    chosen = _sorted(chosen, sel.sort)
    doc["finding_total"] = len(chosen)
    end = None if sel.limit is None else sel.offset + sel.limit
    doc["finding_list"] = chosen[sel.offset:end]
    doc["abstention_list"] = [json.loads(b) for k, b in saved if k == "abstention"]
    doc["abstention_explain"] = {a: explain(a) for a in sorted(
        {str(x.get("reason")) for x in doc["abstention_list"]})}
    return doc


FINDING_CSV_COLUMNS = ("seq", "code", "class", "field", "severity", "message", "expected",
                       "actual", "run_id")


def findings_csv(doc: dict[str, Any]) -> bytes:
    """The ``finding_list`` of an :func:`audit_run` answer as CSV with a header
    (:data:`FINDING_CSV_COLUMNS`; ``field`` and ``severity`` as in its incidents; a value
    that is not text is its JSON text)."""
    import csv
    import io

    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\r\n")
    w.writerow(FINDING_CSV_COLUMNS)
    for f in doc["finding_list"]:
        row = {**f, "field": finding_field(f), "severity": explain(str(f.get("code")))[
            "severity"], "run_id": doc["run_id"]}
        w.writerow(["" if (v := row.get(c)) is None else v if isinstance(v, (str, int))
                    else json.dumps(v, sort_keys=True) for c in FINDING_CSV_COLUMNS])
    return buf.getvalue().encode("utf-8")
