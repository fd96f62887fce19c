"""The ``reverify_run`` entry's document: a re-verification run committed in the ledger
(docs/format.md section 10.4, docs/reverify.md).

The document (``ledger-reverify-run/1``; ``/2`` for one tenant, below; canonical JSON of
the envelope subset) is the ``ledger-reverify-report/1`` without its ``outcomes`` --
summary, counts by engine, range, filters, limits, re-executors, outcome -- plus::

    outcomes_digest = "sha256:" + hex(SHA-256(json.dumps(outcomes, sort_keys=True,
                                                         separators=(",", ":"))))

over the full outcome list of the report (every selected entry, in seq order; Python's
``json.dumps`` defaults otherwise: ``ensure_ascii=True``, floats by ``repr``), so a JSON
report, or the outcomes kept in ``reverify_outcomes``, can be checked against the ledger.
What the report has that the document leaves out: ``format``, ``ledger_id`` and ``origin``
(the envelope's ``ledger``), ``timing`` (this invocation's measurements) and
``outcomes`` (digested); ``limits.time_limit_s`` is written as the integer
``limits.time_limit_ms`` (the document holds no floats).

A run over one tenant's entries (the report's ``tenant``, ``ledger reverify --tenant T``)
is recorded as ``ledger-reverify-run/2``: the same keys plus ``tenant``, and its
``head_hash`` is that of the tenant's last entry below the range's end.

Pure: the standard library only.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import Any

RUN_FORMAT = "ledger-reverify-run/1"
TENANT_RUN_FORMAT = "ledger-reverify-run/2"  # /1 plus ``tenant`` (docs/format.md §10.4)
REPORT_FORMAT = "ledger-reverify-report/1"
DOC_KEYS = ("format", "run_id", "resumed", "range", "filters", "limits", "summary",
            "by_engine", "reexecutors", "workers", "worker_restarts", "outcome", "head_hash",
            "outcomes_digest", "started_at", "finished_at")
# the report's fields copied into the document unchanged
COPIED = ("run_id", "resumed", "range", "filters", "summary", "by_engine", "reexecutors",
          "workers", "worker_restarts", "outcome", "started_at", "finished_at")


def outcomes_digest(outcomes: Sequence[dict[str, Any]]) -> str:
    """The digest of a run's outcome list (the module docstring's recipe)."""
    body = json.dumps(list(outcomes), sort_keys=True, separators=(",", ":"))
    return "sha256:" + hashlib.sha256(body.encode("utf-8")).hexdigest()


def time_limit_ms(seconds: float) -> int:
    """``limits.time_limit_ms`` of a report's ``limits.time_limit_s``."""
    return int(round(seconds * 1000))


def run_document(report: dict[str, Any], head_hash: str | None) -> dict[str, Any]:
    """The ``ledger-reverify-run/1`` document of a complete ``report``; ``head_hash`` is
    ``sha256:<hex>`` of the stored entry hash of the last seq of the run's range (None for
    an empty range).  A report with ``tenant``: ``ledger-reverify-run/2`` with ``tenant``
    (``head_hash`` then that of the tenant's last entry below the range's end)."""
    limits = report["limits"]
    doc: dict[str, Any] = {k: report[k] for k in COPIED}
    doc.update(format=RUN_FORMAT, head_hash=head_hash,
               limits={"time_limit_ms": time_limit_ms(limits["time_limit_s"]),
                       "memory_mb": limits["memory_mb"], "hash_seed": limits["hash_seed"]},
               outcomes_digest=outcomes_digest(report["outcomes"]))
    out = {k: doc[k] for k in DOC_KEYS}
    if report.get("tenant") is not None:
        out.update(format=TENANT_RUN_FORMAT, tenant=report["tenant"])
    return out


def report_differences(doc: Any, report: Any) -> list[str]:
    """The names of the document's fields that a JSON ``report`` does not match (empty:
    the report is the one the document records).  Never raises for bad data."""
    if not isinstance(report, dict) or not isinstance(doc, dict):
        return ["report"]
    out = [k for k in (*COPIED, "tenant") if report.get(k) != doc.get(k)]
    limits: Any = report.get("limits")
    try:
        same = doc.get("limits") == {"time_limit_ms": time_limit_ms(limits["time_limit_s"]),
                                     "memory_mb": limits["memory_mb"],
                                     "hash_seed": limits["hash_seed"]}
    except (TypeError, KeyError, ValueError, OverflowError):
        same = False
    if not same:
        out.append("limits")
    outcomes = report.get("outcomes")
    if not isinstance(outcomes, list) or outcomes_digest(outcomes) != doc.get("outcomes_digest"):
        out.append("outcomes")
    return out


def report_of(doc: dict[str, Any], outcomes: list[dict[str, Any]]) -> dict[str, Any]:
    """A ``ledger-reverify-report/1``-shaped dict rebuilt from a recorded document and the
    run's outcomes (what the HTML report's re-execution section reads); no ``timing``."""
    limits = doc.get("limits") or {}
    ms = limits.get("time_limit_ms")
    tenant = {"tenant": doc["tenant"]} if doc.get("tenant") is not None else {}
    return {**{k: doc.get(k) for k in COPIED}, **tenant, "format": REPORT_FORMAT,
            "limits": {"time_limit_s": ms / 1000 if isinstance(ms, int) else None,
                       "memory_mb": limits.get("memory_mb"),
                       "hash_seed": limits.get("hash_seed")},
            "outcomes": outcomes}
