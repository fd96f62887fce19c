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

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Connection

from ledger.clock import format_us
from ledger.core.finding import LEDGER_LEVEL_CODES
from ledger.core.readcheck import CheckedEntry, as_bytes, check_entry, row_tenant, row_tseq
from ledger.errors import UsageError
from ledger.ops.context import LedgerContext
from ledger.ops.filters import Filters, TimeBound, _time, make_filters
from ledger.ops.query import iter_pages
from ledger.ops.verified import checked_headers, successor_links
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


@dataclass
class _Tally:
    """The counts of one answer by hour, filled by :meth:`add` (one call per stored
    aggregate row or live entry), with the engines and producers seen."""

    keys: tuple[str, ...]
    want_e: set[str]
    want_p: set[str]
    counts: dict[tuple[int, tuple[Any, ...]], int] = field(default_factory=dict)
    att: dict[tuple[int, Any], int] = field(default_factory=dict)
    flagged: dict[int, int] = field(default_factory=dict)
    unverified: dict[int, int] = field(default_factory=dict)
    found: dict[tuple[int, str], int] = field(default_factory=dict)
    seen_e: set[str] = field(default_factory=set)
    seen_p: set[str] = field(default_factory=set)

    def add(self, hour: int, kind: Any, status: Any, engine: Any, producer: Any,
            verdict: Any, disposition: str, n: int) -> None:
        if disposition == "flagged":
            self.flagged[hour] = self.flagged.get(hour, 0) + n
            return
        if kind != "result":
            return
        if engine is not None:
            self.seen_e.add(engine)
        if producer is not None:
            self.seen_p.add(producer)
        if (self.want_e and engine not in self.want_e) or \
                (self.want_p and producer not in self.want_p):
            return
        if disposition == "unverified":
            self.unverified[hour] = self.unverified.get(hour, 0) + n
        values = {"status": status, "engine": engine, "producer": producer}
        k = (hour, tuple(values[x] for x in self.keys))
        self.counts[k] = self.counts.get(k, 0) + n
        ak = (hour, verdict)
        self.att[ak] = self.att.get(ak, 0) + n


def _add_audited(conn: Connection, run: runs.RunRow, layer: str, tally: _Tally, lo_h: int | None,
                 hi_us: int | None) -> None:
    """The stored aggregates of ``run`` (and, for auditors, its findings by hour)."""
    for (hour, kind, status, engine, producer, verdict, disposition,
         n) in runs.aggregate_rows(conn, run.id, lo_h, hi_us):
        tally.add(int(hour), kind, status, engine, producer, verdict, disposition, int(n))
    if layer == "auditor":
        for cls, t in runs.finding_times(conn, run.id):
            if (lo_h is None or t >= lo_h) and (hi_us is None or t < hi_us):
                fk = (t - t % HOUR_US, cls)
                tally.found[fk] = tally.found.get(fk, 0) + 1


def _add_live(ctx: LedgerContext, conn: Connection, tally: _Tally, start: int, end: int,
              lo_us: int | None, hi_us: int | None) -> int:
    """The entries ``[start, end)``, each read-checked now; returns how many were read."""
    live_rows = 0
    for c in checked_headers(conn, ctx.ledger_id, start, end):
        live_rows += 1
        t = c.recorded_at
        if (lo_us is not None and t < lo_us) or (hi_us is not None and t >= hi_us):
            continue
        v = c.values
        tally.add(t - t % HOUR_US, c.kind, v.get("status"), v.get("engine"), v.get("producer"),
                  v.get("att_verdict"), "verified" if c.integrity.verified else "flagged", 1)
    return live_rows


def _tenant_checked(conn: Connection, ledger_id: str, tenant: str, f: Filters, limit: int,
                    ) -> Iterator[CheckedEntry]:
    """The first ``limit`` entries of ``tenant`` that ``f``'s time window selects (read by the
    ``(tenant, seq)`` index, nothing of another tenant), each read-checked as
    :func:`checked_headers` checks a row: one entry of the tenant links to the next one read
    when their tseqs follow (no entry of the tenant missing between them), the others to
    their tenant's next stored entry or head (``successor_links``)."""
    head = repo.read_head(conn)
    size = head.size if head is not None else 0
    taken = 0
    for page in iter_pages(conn, f, tenant=tenant, digest_columns=(),
                           page=min(2000, limit + 1)):
        rows = [row for row, _ in page][:limit - taken]
        links: dict[int, bytes] = {}
        for a, b in zip(rows, rows[1:], strict=False):
            ta, tb = row_tseq(a), row_tseq(b)
            if ta is not None and tb == ta + 1 and row_tenant(a) == row_tenant(b):
                links[a.seq] = as_bytes(b.prev_hash)
        if head is not None and size:
            links.setdefault(size - 1, head.head_hash)
        links.update(successor_links(conn, [r for r in rows if r.seq not in links], size))
        for row in rows:
            yield check_entry(row, {}, ledger_id, next_prev=links.get(row.seq), slots=())
        taken += len(rows)
        if taken >= limit:
            return


def _add_tenant(ctx: LedgerContext, conn: Connection, tally: _Tally, tenant: str,
                lo_us: int | None, hi_us: int | None) -> tuple[int, bool]:
    """The entries of ``tenant`` in the time window, each read-checked now, at most
    :data:`LIVE_MAX`; returns how many were read and whether more are left."""
    f = make_filters(since=lo_us, until=hi_us)
    rows = 0
    for c in _tenant_checked(conn, ctx.ledger_id, tenant, f, LIVE_MAX + 1):
        rows += 1
        if rows > LIVE_MAX:
            return LIVE_MAX, True
        t, v = c.recorded_at, c.values
        tally.add(t - t % HOUR_US, c.kind, v.get("status"), v.get("engine"), v.get("producer"),
                  v.get("att_verdict"), "verified" if c.integrity.verified else "flagged", 1)
    return rows, False


def _slots(tally: _Tally, label: str, width: int) -> dict[int, dict[str, Any]]:
    """The tally's hours added up into buckets of ``width`` (weeks from Monday), by the
    bucket's first µs."""
    out: dict[int, dict[str, Any]] = {}

    def slot(hour: int) -> dict[str, Any]:
        b = hour - hour % width if label != "week" else hour - (hour - 4 * 24 * HOUR_US) % width
        d = out.get(b)
        if d is None:
            d = out[b] = {"start": format_us(b), "results": {}, "unverified": 0, "flagged": 0,
                          "attestations": {}, "findings": {}}
        return d

    for (hour, values), n in tally.counts.items():
        r = slot(hour)["results"]
        r[values] = r.get(values, 0) + n
    for hour, n in tally.unverified.items():
        slot(hour)["unverified"] += n
    for hour, n in tally.flagged.items():
        slot(hour)["flagged"] += n
    for (hour, verdict), n in tally.att.items():
        a = slot(hour)["attestations"]
        a[verdict] = a.get(verdict, 0) + n
    for (hour, cls), n in tally.found.items():
        f = slot(hour)["findings"]
        f[cls] = f.get(cls, 0) + n
    return out


def _buckets(out: dict[int, dict[str, Any]], layer: str) -> list[dict[str, Any]]:
    """The answer's buckets in time order, their series sorted."""
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
    return buckets


def _bucket_width(tally: _Tally, bucket: str, lo_us: int | None, hi_us: int | None,
                  lo_h: int | None) -> tuple[str, int]:
    """The bucket's name and width; UsageError when the span needs over MAX_BUCKETS."""
    hours = [k[0] for k in tally.counts] + list(tally.flagged)
    first, last = (min(hours), max(hours) + HOUR_US) if hours else (lo_us, hi_us)
    label, width = _width(bucket, lo_us if lo_us is not None else first,
                          hi_us if hi_us is not None else last)
    span_lo = lo_h if lo_h is not None else first
    if span_lo is not None and last is not None and (last - span_lo) // width > MAX_BUCKETS:
        raise UsageError(f"{(last - span_lo) // width} buckets of a {label}: at most "
                         f"{MAX_BUCKETS} (choose a wider bucket or a shorter range)",
                         field="bucket")
    return label, width


def aggregates(ctx: LedgerContext, layer: str, *, since: TimeBound = None,
               until: TimeBound = None, bucket: str = "auto", engines: Iterable[str] = (),
               producers: Iterable[str] = (), tenant: str | None = None) -> dict[str, Any]:
    """Bucketed counts of the result entries for ``layer`` (see the module docstring):
    ``{"covers", "bucket", "buckets": [{"start", "results": [[status, engine?, producer?,
    n]], "unverified", "flagged", "attestations"?, "findings"?}], "engines"?, "producers"?}``.
    ``since``/``until`` (RFC 3339) select whole hours of the audited part and exact times of
    the live part; ``engines``/``producers`` select results (flagged rows, whose values are
    not known, are counted whatever they say).  ``tenant``: the counts of that tenant's
    entries only (:func:`_tenant_covers`).  Raises UsageError."""
    if layer not in SERIES:
        raise UsageError("layer must be agent, developer or auditor", field="layer")
    lo_us, hi_us = _time("since", since), _time("until", until)
    keys = SERIES[layer]
    tally = _Tally(keys, set(engines), set(producers))
    lo_h = None if lo_us is None else lo_us - lo_us % HOUR_US
    with connect(ctx.engine) as conn:
        if tenant is not None:
            covers = _tenant_covers(ctx, conn, tally, tenant, layer, lo_us, hi_us)
        else:
            covers = _covers(ctx, conn, tally, layer, lo_us, lo_h, hi_us)
    label, width = _bucket_width(tally, bucket, lo_us, hi_us, lo_h)
    doc: dict[str, Any] = {
        "covers": covers, "bucket": label, "series": list(keys),
        "buckets": _buckets(_slots(tally, label, width), layer),
    }
    if layer != "agent":
        doc["engines"] = sorted(tally.seen_e)
    if layer == "auditor":
        doc["producers"] = sorted(tally.seen_p)
    return doc


def _covers(ctx: LedgerContext, conn: Connection, tally: _Tally, layer: str,
            lo_us: int | None, lo_h: int | None, hi_us: int | None) -> dict[str, Any]:
    """The whole ledger counted into ``tally``: the latest aggregated audit run, then the
    entries after it read-checked now; what was counted."""
    h = repo.read_head(conn)
    size = h.size if h is not None else 0
    run = runs.latest_aggregated_run(conn)
    audited_end = min(run.range_end, size) if run is not None else 0
    if run is not None:
        _add_audited(conn, run, layer, tally, lo_h, hi_us)
    live_end = min(size, audited_end + LIVE_MAX)
    live_rows = _add_live(ctx, conn, tally, audited_end, live_end, lo_us, hi_us)
    return {
        "run_id": run.id if run is not None else None,
        "run_started_at": format_us(run.started_at) if run is not None else None,
        "audited": {"start": 0, "end": audited_end},
        "live": {"start": audited_end, "end": live_end, "rows": live_rows,
                 "checked": LIVE_CHECK, "truncated": live_end < size},
        "head": size, "complete": live_end >= size,
    }


def _tenant_covers(ctx: LedgerContext, conn: Connection, tally: _Tally, tenant: str,
                   layer: str, lo_us: int | None, hi_us: int | None) -> dict[str, Any]:
    """One tenant's entries counted into ``tally``, every one read-checked now (the stored
    audit aggregates are not kept per tenant), at most :data:`LIVE_MAX` of the time window;
    for auditors, the findings the latest aggregated audit run made on the tenant's entries.
    What was counted, in the tenant's own terms: no seq, size or count of the ledger."""
    rows, truncated = _add_tenant(ctx, conn, tally, tenant, lo_us, hi_us)
    run = runs.latest_aggregated_run(conn)
    if run is not None and layer == "auditor":
        # row findings only: a ledger-level finding (checkpoint, heads, tree) is placed at
        # some seq, which may be this tenant's, but is about the whole ledger (others' rows)
        for cls, t in runs.finding_times(conn, run.id, tenant, LEDGER_LEVEL_CODES):
            if (lo_us is None or t >= lo_us - lo_us % HOUR_US) and (hi_us is None or t < hi_us):
                fk = (t - t % HOUR_US, cls)
                tally.found[fk] = tally.found.get(fk, 0) + 1
    return {
        "tenant": tenant,
        "run_id": run.id if run is not None and layer == "auditor" else None,
        "run_started_at": format_us(run.started_at)
        if run is not None and layer == "auditor" else None,
        "audited": None,
        "live": {"rows": rows, "checked": LIVE_CHECK, "truncated": truncated},
        "complete": not truncated,
    }
