"""Recorded re-verification runs read back: the ``reverify_run`` entries (docs/reverify.md,
"The run in the ledger") with the outcomes their digest proves.

Each entry is read through the read check (``ops.query``, ``core.readcheck``): its
document is served only when it checked against the entry's hashes.  The run's outcomes
are kept beside the chain (``reverify_outcomes``); they are *proven* only when the digest
of the outcome list is the ``outcomes_digest`` of that checked document, and every answer
says whether they are (``outcomes_proven``), so a reader is never shown them as proven
when they are not.
"""

from __future__ import annotations

import json
from typing import Any

from ledger.core.reexec import DISAGREES
from ledger.core.reverify_run import outcomes_digest
from ledger.core.tenant import DEFAULT_TENANT
from ledger.errors import NotFound, UsageError
from ledger.ops.context import LedgerContext
from ledger.ops.query import make_filters, query
from ledger.store import audit_runs as runs
from ledger.store import entries as repo
from ledger.store.db import connect

KIND = "reverify_run"
MAX_RUNS = 100
# the document fields each layer sees (agents: the verdict and the counts; developers: who
# re-executed and where; auditors: everything)
AGENT_DOC = ("outcome", "summary", "range", "tenant")
DEVELOPER_DOC = AGENT_DOC + ("run_id", "by_engine", "reexecutors", "started_at",
                             "finished_at")
# differing fields whose values a developer may see (layer 2: status and developer_fields;
# the proof_ref and the evidence are layer 3)
DEVELOPER_VALUES = ("status", "developer_fields.")


def _outcomes(ctx: LedgerContext, doc: dict[str, Any] | None,
              ) -> tuple[list[dict[str, Any]], bool]:
    """The stored outcomes of the run ``doc`` records and whether their digest is the
    recorded one (False when the document did not check)."""
    if not isinstance(doc, dict) or type(doc.get("run_id")) is not int:
        return [], False
    with connect(ctx.engine) as conn:
        rows = runs.reverify_outcome_rows(conn, doc["run_id"])
    try:
        outcomes = [json.loads(r) for r in rows]
    except ValueError:
        return [], False
    return outcomes, outcomes_digest(outcomes) == doc.get("outcomes_digest")


def _run(ctx: LedgerContext, row: dict[str, Any]) -> dict[str, Any]:
    doc = row.get("document") if row["integrity"]["verified"] else None
    outcomes, proven = _outcomes(ctx, doc)
    return {"seq": row["seq"], "recorded_at": row["recorded_at"], "producer": row["producer"],
            "entry_hash": row["entry_hash"], "integrity": row["integrity"],
            "document": doc, "outcomes": outcomes, "outcomes_proven": proven}


def _for_tenant(row: dict[str, Any], tenant: str) -> bool:
    """Whether an entry of ``tenant``'s chain is a run recorded for that tenant: its checked
    document names it.  A document that did not check is listed (without its document,
    as for every reader) only in the chain of a tenant other than ``default``, where every
    ``reverify_run`` entry is a tenant run: the default chain also holds the runs of the
    whole ledger."""
    doc = row.get("document") if row["integrity"]["verified"] else None
    if isinstance(doc, dict):
        return doc.get("tenant") == tenant
    return tenant != DEFAULT_TENANT


def recorded_runs(ctx: LedgerContext, before: int | None = None, limit: int = 20,
                  tenant: str | None = None) -> dict[str, Any]:
    """The ``reverify_run`` entries, newest first (seq < ``before``), each with its checked
    document, its run's stored outcomes and ``outcomes_proven``: ``{"runs", "next_before"}``
    (the auditor's view; :func:`project` narrows it).  ``tenant``: only the runs recorded
    for that tenant (``ledger reverify --tenant T --record``: entries of its chain whose
    document names it); a page may then hold fewer than ``limit`` runs."""
    if not 1 <= limit <= MAX_RUNS:
        raise UsageError(f"limit must be from 1 to {MAX_RUNS}", field="limit")
    filters = make_filters(kind=[KIND]) if tenant is None \
        else make_filters(kind=[KIND], tenant=tenant)
    page = query(ctx, filters, limit=limit, layer="auditor", order="desc", before=before)
    rows = page.rows if tenant is None else [r for r in page.rows if _for_tenant(r, tenant)]
    return {"runs": [_run(ctx, r) for r in rows], "next_before": page.next_before}


def recorded_run(ctx: LedgerContext, seq: int | None) -> dict[str, Any]:
    """The ``reverify_run`` entry at ``seq`` (None: the latest) as :func:`recorded_runs`
    gives each.  Raises NotFound (no such entry) or UsageError (another kind)."""
    with connect(ctx.engine) as conn:
        if seq is None:
            seq = repo.max_seq(conn, KIND)
            if seq is None:
                raise NotFound("no reverify_run entry is recorded (ledger reverify --record)",
                               field="reverify_run")
        row = repo.get_entry(conn, seq)
    if row is None:
        raise NotFound(f"no entry with seq {seq}", field="reverify_run")
    if row.kind != KIND:
        raise UsageError(f"entry {seq} is a {row.kind} entry, not a reverify_run entry "
                         "(ledger reverify --record)", code="not_a_reverify_run",
                         field="reverify_run")
    page = query(ctx, make_filters(kind=[KIND], start=seq, end=seq + 1), limit=1,
                 layer="auditor")
    return _run(ctx, page.rows[0])


def _difference(d: Any, layer: str) -> dict[str, Any]:
    d = d if isinstance(d, dict) else {}
    name = str(d.get("field"))
    if layer == "auditor" or name.startswith(DEVELOPER_VALUES):
        return {"field": name, "stored": d.get("stored"), "fresh": d.get("fresh")}
    return {"field": name, "withheld": "auditor layer"}


def project(run: dict[str, Any], layer: str) -> dict[str, Any]:
    """What ``layer`` sees of a recorded run: agents the verdict, the counts and the seqs
    that disagree (never an engine, a field or a value); developers also the re-executors,
    the engines and each differing field, with the values of status and developer fields;
    auditors everything, with the document."""
    doc = run["document"] if isinstance(run.get("document"), dict) else {}
    names = AGENT_DOC if layer == "agent" else DEVELOPER_DOC
    integrity = run["integrity"]
    if layer != "auditor":
        keep = ("verified", "codes") if layer == "agent" else ("verified", "codes", "fields",
                                                                "redacted")
        integrity = {k: integrity.get(k) for k in keep if k in integrity}
    out: dict[str, Any] = {"seq": run["seq"], "recorded_at": run["recorded_at"],
                           "integrity": integrity, **{k: doc.get(k) for k in names},
                           "outcomes_proven": run["outcomes_proven"]}
    dis = [o for o in run["outcomes"] if isinstance(o, dict) and o.get("outcome") == DISAGREES]
    if layer == "agent":
        out["disagreements"] = [{"seq": o.get("seq")} for o in dis]
        return out
    out["disagreements"] = [
        {"seq": o.get("seq"), "engine": o.get("engine"), "reexecutor": o.get("reexecutor"),
         "differences": [_difference(d, layer) for d in o.get("differences") or []]}
        for o in dis]
    if layer == "auditor":
        out.update(producer=run["producer"], entry_hash=run["entry_hash"], document=doc or None,
                   not_reexecuted=[{k: o.get(k) for k in ("seq", "engine", "outcome", "reason")}
                                   for o in run["outcomes"] if isinstance(o, dict)
                                   and o.get("outcome") not in (DISAGREES, "agrees")])
    return out
