"""Counts over the whole ledger for charts (``GET /v1/aggregates``, docs/http.md).

No indexed column is counted as an entry's value (docs/reads.md).  The counts come from two
places, and the answer says exactly which (``covers``):

* the **latest complete audit run from seq 0 that stored aggregates** (``audit_aggregates``,
  filled by the audit walk, which checks every row anyway; docs/audit.md "Aggregates"): its
  rows counted by hour under the values the audit verified (or only abstained on), and the
  rows it failed counted by hour as ``flagged``, under no value;
* the entries **after that run's range**, each checked now by the read check
  (``ledger.ops.verified.checked_headers``: hashes, chain link, columns against the envelope;
  not the contract, the policy or the attestations) and counted the same way, at most
  :data:`LIVE_MAX` of them (``covers.live.truncated`` says when more exist).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ledger.clock import format_us
from ledger.errors import UsageError
from ledger.ops.context import LedgerContext
from ledger.ops.query import _time
from ledger.ops.verified import checked_headers
from ledger.store import audit_runs as runs
from ledger.store import entries as repo
from ledger.store.db import connect

HOUR_US = 3_600_000_000
WIDTHS = {"hour": HOUR_US, "day": 24 * HOUR_US, "week": 7 * 24 * HOUR_US}
MAX_BUCKETS = 400
LIVE_MAX = 20_000  # ~1 s of read checks (about 21,600 rows/s on SQLite here)
LIVE_CHECK = ("read check of each entry (hashes, chain link, columns against the envelope); "
              "not the contract, the policy or the attestations, which the audit judges")
# the value series each layer is shown (agents: status only; auditors: also the producer)
SERIES = {"agent": ("status",), "developer": ("status", "engine"),
          "auditor": ("status", "engine", "producer")}


def _width(name: str, lo: int | None, hi: int | None) -> tuple[str, int]:
    if name != "auto":
        if name not in WIDTHS:
            raise UsageError("bucket must be auto, hour, day or week", field="bucket")
        return name, WIDTHS[name]
    span = (hi or 0) - (lo or 0)
    for label in ("hour", "day"):
        if span <= WIDTHS[label] * 150:
            return label, WIDTHS[label]
    return "week", WIDTHS["week"]


def aggregates(ctx: LedgerContext, layer: str, *, since: Any = None, until: Any = None,
               bucket: str = "auto", engines: Iterable[str] = (),
               producers: Iterable[str] = ()) -> dict[str, Any]:
    """Bucketed counts of the result entries for ``layer`` (see the module docstring):
    ``{"covers", "bucket", "buckets": [{"start", "results": [[status, engine?, producer?,
    n]], "unverified", "flagged", "attestations"?, "findings"?}], "engines"?, "producers"?}``.
    ``since``/``until`` (RFC 3339) select whole hours of the audited part and exact times of
    the live part; ``engines``/``producers`` select results (flagged rows, whose values are
    not known, are counted whatever they say).  Raises UsageError."""
    if layer not in SERIES:
        raise UsageError("layer must be agent, developer or auditor", field="layer")
    lo_us, hi_us = _time("since", since), _time("until", until)
    want_e, want_p = set(engines), set(producers)
    keys = SERIES[layer]
    counts: dict[tuple[int, tuple[Any, ...]], int] = {}  # (hour, series values) -> n
    att: dict[tuple[int, Any], int] = {}
    flagged: dict[int, int] = {}
    unverified: dict[int, int] = {}
    found: dict[tuple[int, str], int] = {}
    seen_e: set[str] = set()
    seen_p: set[str] = set()

    def add(hour: int, kind: Any, status: Any, engine: Any, producer: Any, verdict: Any,
            disposition: str, n: int) -> None:
        if disposition == "flagged":
            flagged[hour] = flagged.get(hour, 0) + n
            return
        if kind != "result":
            return
        if engine is not None:
            seen_e.add(engine)
        if producer is not None:
            seen_p.add(producer)
        if (want_e and engine not in want_e) or (want_p and producer not in want_p):
            return
        if disposition == "unverified":
            unverified[hour] = unverified.get(hour, 0) + n
        values = {"status": status, "engine": engine, "producer": producer}
        k = (hour, tuple(values[x] for x in keys))
        counts[k] = counts.get(k, 0) + n
        ak = (hour, verdict)
        att[ak] = att.get(ak, 0) + n

    lo_h = None if lo_us is None else lo_us - lo_us % HOUR_US
    with connect(ctx.engine) as conn:
        h = repo.read_head(conn)
        size = h.size if h is not None else 0
        run = runs.latest_aggregated_run(conn)
        audited_end = min(run.range_end, size) if run is not None else 0
        if run is not None:
            for (hour, kind, status, engine, producer, verdict, disposition,
                 n) in runs.aggregate_rows(conn, run.id, lo_h, hi_us):
                add(int(hour), kind, status, engine, producer, verdict, disposition, int(n))
            if layer == "auditor":
                for cls, t in runs.finding_times(conn, run.id):
                    if (lo_h is None or t >= lo_h) and (hi_us is None or t < hi_us):
                        fk = (t - t % HOUR_US, cls)
                        found[fk] = found.get(fk, 0) + 1
        live_end = min(size, audited_end + LIVE_MAX)
        live_rows = 0
        for c in checked_headers(conn, ctx.ledger_id, audited_end, live_end):
            live_rows += 1
            t = c.recorded_at
            if (lo_us is not None and t < lo_us) or (hi_us is not None and t >= hi_us):
                continue
            v = c.values
            add(t - t % HOUR_US, c.kind, v.get("status"), v.get("engine"), v.get("producer"),
                v.get("att_verdict"), "verified" if c.integrity.verified else "flagged", 1)
    hours = [k[0] for k in counts] + list(flagged)
    first, last = (min(hours), max(hours) + HOUR_US) if hours else (lo_us, hi_us)
    label, width = _width(bucket, lo_us if lo_us is not None else first,
                          hi_us if hi_us is not None else last)
    span_lo = lo_h if lo_h is not None else first
    if span_lo is not None and last is not None and (last - span_lo) // width > MAX_BUCKETS:
        raise UsageError(f"{(last - span_lo) // width} buckets of a {label}: at most "
                         f"{MAX_BUCKETS} (choose a wider bucket or a shorter range)",
                         field="bucket")
    out: dict[int, dict[str, Any]] = {}

    def slot(hour: int) -> dict[str, Any]:
        b = hour - hour % width if label != "week" else hour - (hour - 4 * 24 * HOUR_US) % width
        d = out.get(b)
        if d is None:
            d = out[b] = {"start": format_us(b), "results": {}, "unverified": 0, "flagged": 0,
                          "attestations": {}, "findings": {}}
        return d

    for (hour, values), n in counts.items():
        r = slot(hour)["results"]
        r[values] = r.get(values, 0) + n
    for hour, n in unverified.items():
        slot(hour)["unverified"] += n
    for hour, n in flagged.items():
        slot(hour)["flagged"] += n
    for (hour, verdict), n in att.items():
        a = slot(hour)["attestations"]
        a[verdict] = a.get(verdict, 0) + n
    for (hour, cls), n in found.items():
        f = slot(hour)["findings"]
        f[cls] = f.get(cls, 0) + n
    buckets = []
    for b in sorted(out):
        d = out[b]
        item: dict[str, Any] = {"start": d["start"],
                                "results": [[*k, n] for k, n in sorted(
                                    d["results"].items(), key=lambda kv: [str(x) for x in kv[0]])],
                                "unverified": d["unverified"], "flagged": d["flagged"]}
        if layer == "auditor":
            item["attestations"] = [[k, n] for k, n in sorted(
                d["attestations"].items(), key=lambda kv: str(kv[0]))]
            item["findings"] = [[k, n] for k, n in sorted(d["findings"].items())]
        buckets.append(item)
    doc: dict[str, Any] = {
        "covers": {
            "run_id": run.id if run is not None else None,
            "run_started_at": format_us(run.started_at) if run is not None else None,
            "audited": {"start": 0, "end": audited_end},
            "live": {"start": audited_end, "end": live_end, "rows": live_rows,
                     "checked": LIVE_CHECK, "truncated": live_end < size},
            "head": size, "complete": live_end >= size,
        },
        "bucket": label, "series": list(keys), "buckets": buckets,
    }
    if layer != "agent":
        doc["engines"] = sorted(seen_e)
    if layer == "auditor":
        doc["producers"] = sorted(seen_p)
    return doc
