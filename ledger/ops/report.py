"""The figures of the HTML reports (``ledger audit --html FILE``, ``ledger report --html``).

:func:`report_data` gathers the figures (reads only); :func:`period_report` is ``ledger
report``: an audit of the entries recorded in ``[since, until)`` and its figures;
:func:`reverify_data` reads the re-execution section's figures from a ``ledger reverify``
report.  The page itself is rendered by ``ledger.report`` (pure, no ledger access).
"""

from __future__ import annotations

import datetime as dt
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ledger.clock import format_us
from ledger.core.explain import group_findings
from ledger.core.finding import Finding as Finding  # (also for ledger.report)
from ledger.core.finding import FindingClass
from ledger.core.note import parse_checkpoint_body, parse_note
from ledger.core.readcheck import CheckedEntry
from ledger.errors import NoteError, UsageError
from ledger.ops.audit import AuditOptions, run_audit
from ledger.ops.audit import AuditReport as AuditReport  # (the report's type, for ledger.report)
from ledger.ops.checkpoint import cosigned_note, latest_checkpoint
from ledger.ops.context import LedgerContext
from ledger.ops.query import make_filters, seq_window
from ledger.ops.verified import checked_headers
from ledger.store.anchors import COSIGNATURE, TIMESTAMP, anchors_of
from ledger.store.db import connect

FORMAT = "ledger-html-report/1"
# Finding classes that say a stored value is not what was hashed: such an entry is counted
# as flagged, never under the values it shows (docs/reads.md).
TAMPER_CLASSES = frozenset({"payload_modified", "reordered", "forked", "deleted"})
FLAGGED_SERIES = "not verified (flagged)"
MAX_FLAGGED_LISTED = 200


# -- gathering -----------------------------------------------------------------------
# Bucket widths of the time axis (µs), the smallest that keeps a chart under MAX_BUCKETS bars,
# and how much of an RFC 3339 time labels a bucket of that width.
_MIN = 60 * 10**6
BUCKETS = ((_MIN, 16), (10 * _MIN, 16), (60 * _MIN, 13), (6 * 60 * _MIN, 13),
           (24 * 60 * _MIN, 10), (7 * 24 * 60 * _MIN, 10), (30 * 24 * 60 * _MIN, 10))
MAX_BUCKETS = 60
MAX_SERIES = 8  # a chart's series beyond the largest ones are added up as OTHER_SERIES
OTHER_SERIES = "other"


@dataclass(frozen=True)
class TimeAxis:
    """Consecutive buckets of ``width`` µs from ``start``: every bucket between the first and
    the last entry has a bar, so a quiet period shows as a gap and a spike as a spike."""

    start: int
    width: int
    cut: int
    count: int

    @classmethod
    def over(cls, times: Sequence[int]) -> TimeAxis:
        lo, hi = (min(times), max(times)) if times else (0, 0)
        for width, cut in BUCKETS:
            first = lo - lo % width
            n = (hi - first) // width + 1
            if n <= MAX_BUCKETS:
                return cls(first, width, cut, n)
        width, cut = BUCKETS[-1]
        first = lo - lo % width
        return cls(first, width, cut, (hi - first) // width + 1)

    def index(self, t_us: int) -> int:
        return max(0, min(self.count - 1, (t_us - self.start) // self.width))

    def label(self, i: int) -> str:
        text = format_us(self.start + i * self.width)[:self.cut].replace("T", " ")
        return text + "h" if self.cut == 13 else text

    def labels(self) -> list[str]:
        return [self.label(i) for i in range(self.count)]


def _checkpoint(ctx: LedgerContext, end: int) -> dict[str, Any] | None:
    row = latest_checkpoint(ctx)
    if row is None:
        return None
    anchors = anchors_of(ctx.engine, row.size)
    note = cosigned_note(ctx, row.size, row.note)
    try:
        parsed = parse_note(row.note)
        parse_checkpoint_body(parsed.text)
        signers = sorted({s.name for s in parsed.signatures})
        root_b64 = parsed.text.split("\n")[2]
    except NoteError:
        signers, root_b64 = [], None
    return {"size": row.size, "created_at": format_us(row.created_at), "root_b64": root_b64,
            "signers": signers, "note": note, "covers_scope": row.size >= end,
            "cosigners": [a.name for a in anchors if a.kind == COSIGNATURE],
            "timestamps": [a.name for a in anchors if a.kind == TIMESTAMP]}


@dataclass
class _Tally:
    """The counts of one report, filled from its rows in seq order by :meth:`add`."""

    axis: TimeAxis
    tampered: set[int]
    kinds: Counter[str] = field(default_factory=Counter)
    status_engine: Counter[tuple[str, str]] = field(default_factory=Counter)
    verdicts: Counter[str] = field(default_factory=Counter)
    over_time: dict[str, Counter[str]] = field(default_factory=dict)
    verdict_time: dict[str, Counter[str]] = field(default_factory=dict)
    seq_bucket: dict[int, str] = field(default_factory=dict)
    flagged: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.over_time = {label: Counter() for label in self.axis.labels()}
        self.verdict_time = {label: Counter() for label in self.axis.labels()}

    def add(self, c: CheckedEntry) -> None:
        label = self.axis.label(self.axis.index(c.recorded_at))
        self.seq_bucket[c.seq] = label
        if not c.integrity.verified or c.seq in self.tampered:
            # values that did not check are never counted as what they claim
            self.flagged.append(c.seq)
            self.over_time[label][FLAGGED_SERIES] += 1
            return
        self.kinds[c.kind] += 1
        if c.kind != "result":
            return
        status, engine = c.values["status"], c.values["engine"]
        self.status_engine[(status or "?", engine or "?")] += 1
        self.over_time[label][f"{status} \u00b7 {engine}"] += 1
        v = c.values["att_verdict"] or "none"
        self.verdicts[v] += 1
        self.verdict_time[label][v] += 1

    def findings_time(self, findings: Sequence[Finding]) -> dict[str, dict[str, int]]:
        """The findings by class per time bucket (of their entry; ``ledger-level`` for the
        rest), empty when there is none."""
        if not findings:
            return {}
        out: dict[str, Counter[str]] = {label: Counter() for label in self.axis.labels()}
        for f in findings:
            label = self.seq_bucket.get(f.seq, "ledger-level") if f.seq is not None \
                else "ledger-level"
            out.setdefault(label, Counter())[FindingClass(f.cls).value] += 1
        return {k: dict(v) for k, v in out.items()}


def report_data(ctx: LedgerContext, audit: AuditReport, *, title: str,
                since: str | None = None, until: str | None = None,
                command: str = "ledger audit") -> dict[str, Any]:
    """Every figure of the report for the audit ``audit`` (a ``ledger-audit-report/1``)
    over its range: counts by kind, status x engine and attestation verdict, per time
    bucket, and the checkpoint the report stands on."""
    start, end = audit.range.start, audit.range.end
    tampered = {f.seq for f in audit.findings if f.seq is not None and f.cls in TAMPER_CLASSES}
    with connect(ctx.engine) as conn:
        rows = list(checked_headers(conn, ctx.ledger_id, start, end))
    times = [c.recorded_at for c in rows]
    axis = TimeAxis.over(times)
    tally = _Tally(axis, tampered)
    for c in rows:
        tally.add(c)
    return {
        "format": FORMAT, "title": title, "command": command,
        "generated_at": format_us(ctx.clock.now_us()),
        "ledger_id": ctx.meta.ledger_id, "origin": ctx.meta.origin,
        "scope": {"start": start, "end": end, "since": since, "until": until,
                  "entries": len(rows),
                  "first_recorded_at": format_us(min(times)) if times else None,
                  "last_recorded_at": format_us(max(times)) if times else None},
        "checkpoint": _checkpoint(ctx, end),
        "flagged": {"entries": len(tally.flagged), "seqs": tally.flagged[:MAX_FLAGGED_LISTED]},
        "kinds": dict(sorted(tally.kinds.items())),
        "status_engine": [[s, g, n] for (s, g), n in sorted(tally.status_engine.items())],
        "verdicts": dict(sorted(tally.verdicts.items())),
        "bucket_width_s": axis.width // 10**6,
        "over_time": _top_series(tally.over_time) if rows else {},
        "verdict_time": _top_series(tally.verdict_time) if rows else {},
        "findings_time": tally.findings_time(audit.findings),
        # ledger.core.explain groups findings as their JSON objects (as it groups stored ones)
        "findings_grouped": group_findings(f.to_json() for f in audit.findings),
        "audit": audit, "summary_line": audit.summary_line(),
    }


def _top_series(buckets: dict[str, Counter[str]], keep: int = MAX_SERIES,
                ) -> dict[str, dict[str, int]]:
    """``buckets`` with only the ``keep`` largest series (and the flagged one, always); the
    rest added up as ``other``, so a chart's legend and its table stay readable."""
    totals: Counter[str] = Counter()
    for b in buckets.values():
        totals.update(b)
    kept = {s for s, _ in totals.most_common() if s != FLAGGED_SERIES}
    kept = set(sorted(kept, key=lambda s: (-totals[s], s))[:keep]) | {FLAGGED_SERIES}
    out: dict[str, dict[str, int]] = {}
    for label, b in buckets.items():
        row: dict[str, int] = {}
        for series, n in b.items():
            key = series if series in kept else OTHER_SERIES
            row[key] = row.get(key, 0) + n
        out[label] = row
    return out


def period_report(ctx: LedgerContext, since: str | None, until: str | None, *,
                  check_attestations: bool = True) -> dict[str, Any]:
    """``ledger report``: audit the entries recorded in ``[since, until)`` (RFC 3339; open
    ends: the whole ledger) and gather the report's figures.  Raises UsageError."""
    f = make_filters(since=since, until=until)
    with connect(ctx.engine) as conn:
        lo, hi = seq_window(conn, f)
    opts = AuditOptions(start=lo, end=hi, check_attestations=check_attestations,
                        command="ledger report")
    if hi is not None and hi <= lo:
        opts.start, opts.end = lo, lo
    audit = run_audit(ctx, opts)
    return report_data(ctx, audit, title="Ledger report", since=since, until=until,
                       command="ledger report")


def parse_day(text: str) -> str:
    """``YYYY-MM-DD`` as the RFC 3339 start of that UTC day; other text as given."""
    try:
        day = dt.date.fromisoformat(text)
    except ValueError:
        return text
    return f"{day.isoformat()}T00:00:00Z" if len(text) == 10 else text


# -- re-execution (ledger reverify): its own class of result, next to the findings ----
REVERIFY_FORMAT = "ledger-reverify-report/1"
REEXEC_OUTCOMES = ("agrees", "disagrees", "not_reexecutable", "engine_error")



def reverify_data(rv: Any, *, ledger_id: str, start: int, end: int,
                  source: str = "--reverify-report") -> dict[str, Any]:
    """The figures of the re-execution section from a ``ledger-reverify-report/1``
    (``ledger reverify --json-report``), restricted to the report's scope ``[start, end)``.
    Raises UsageError naming ``source`` and the rule when ``rv`` is not such a report of
    this ledger."""
    def bad(rule: str) -> UsageError:
        return UsageError(f"{source}: {rule}", field="reverify_report")

    if not isinstance(rv, dict) or rv.get("format") != REVERIFY_FORMAT:
        raise bad(f"not a {REVERIFY_FORMAT} document (ledger reverify --json-report)")
    if rv.get("ledger_id") != ledger_id:
        raise bad(f"ledger_id {rv.get('ledger_id')!r} is not this ledger's ({ledger_id})")
    outs = rv.get("outcomes")
    if not isinstance(outs, list) or not all(
            isinstance(o, dict) and isinstance(o.get("seq"), int)
            and o.get("outcome") in REEXEC_OUTCOMES for o in outs):
        raise bad("outcomes must be a list of objects with an integer seq and an outcome "
                  f"in {', '.join(REEXEC_OUTCOMES)}")
    rng = rv["range"] if isinstance(rv.get("range"), dict) else {}
    inside = [o for o in outs if start <= o["seq"] < end]
    by_engine: dict[str, Counter[str]] = {}
    reasons: Counter[tuple[str, str]] = Counter()
    differences: list[list[Any]] = []
    for o in inside:
        by_engine.setdefault(str(o.get("engine")), Counter())[o["outcome"]] += 1
        who = o.get("reexecutor") if isinstance(o.get("reexecutor"), dict) else {}
        label = f"{who.get('name') or '—'} {who.get('version') or ''}".strip()
        if o["outcome"] == "disagrees":
            for d in o.get("differences") or [{}]:
                d = d if isinstance(d, dict) else {}
                differences.append([o["seq"], o.get("engine"), d.get("field"),
                                    _json_text(d.get("stored")), _json_text(d.get("fresh")),
                                    label])
        elif o["outcome"] in ("not_reexecutable", "engine_error"):
            reasons[(o["outcome"], str(o.get("reason")))] += 1
    counts = Counter(o["outcome"] for o in inside)
    outcome = ("disagrees" if counts["disagrees"] else "not_reexecutable"
               if counts["not_reexecutable"] or counts["engine_error"] else "agrees")
    return {
        "range": {"start": rng.get("start"), "end": rng.get("end")},
        "covers_scope": isinstance(rng.get("start"), int) and isinstance(rng.get("end"), int)
        and rng["start"] <= start and rng["end"] >= end,
        "started_at": rv.get("started_at"), "finished_at": rv.get("finished_at"),
        "filters": rv.get("filters"),
        "reexecutors": [f"{r.get('name')} {r.get('version')}" for r in
                        rv.get("reexecutors") or [] if isinstance(r, dict)],
        "outcome": outcome if inside else None,
        "summary": {"entries": len(inside), **{k: counts[k] for k in REEXEC_OUTCOMES}},
        "outside_scope": len(outs) - len(inside),
        "by_engine": [[g, *[c[k] for k in REEXEC_OUTCOMES]] for g, c in
                      sorted(by_engine.items())],
        "reasons": [[k, r, n] for (k, r), n in sorted(reasons.items())],
        "differences": differences,
    }


def _json_text(value: Any) -> str:
    import json

    return value if isinstance(value, str) else json.dumps(value, sort_keys=True)
