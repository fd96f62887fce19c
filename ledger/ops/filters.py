"""Query filters: what a query, an export or a report selects, validated.

:func:`make_filters` turns keyword arguments (a text or a list of texts per text filter,
``since``/``until`` as RFC 3339, aware datetimes or µs, ``start``/``end`` seqs) into a
frozen :class:`Filters`; :func:`with_window` restricts one to a seq range.  The queries
themselves are ``ledger.ops.query`` (which re-exports these names).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, replace
from typing import Any, TypedDict, Unpack

from ledger.clock import format_us, parse_rfc3339
from ledger.errors import UsageError

# Filter name -> entries column (equality, several values = IN).
STRING_FILTERS = ("kind", "engine", "status", "constraint_id", "proof_ref", "subject",
                  "producer", "att_verdict", "att_kid", "tenant")
MAX_FILTER_TEXT = 1024
MAX_LIMIT = 10_000


@dataclass(frozen=True)
class Filters:
    """What to select.  Empty tuples mean "any"; ``[start, end)`` is a seq range and
    ``[since_us, until_us)`` a ``recorded_at`` range (µs since the epoch, UTC)."""

    kind: tuple[str, ...] = ()
    engine: tuple[str, ...] = ()
    status: tuple[str, ...] = ()
    constraint_id: tuple[str, ...] = ()
    proof_ref: tuple[str, ...] = ()
    subject: tuple[str, ...] = ()
    producer: tuple[str, ...] = ()
    att_verdict: tuple[str, ...] = ()
    att_kid: tuple[str, ...] = ()
    tenant: tuple[str, ...] = ()
    since_us: int | None = None
    until_us: int | None = None
    start: int = 0
    end: int | None = None
    has_findings: bool = False  # only entries the audit runs in scope found something on

    def to_doc(self) -> dict[str, Any]:
        """The filters that are set, as JSON (times as RFC 3339); used in export manifests."""
        doc: dict[str, Any] = {n: list(getattr(self, n)) for n in STRING_FILTERS
                               if getattr(self, n)}
        if self.since_us is not None:
            doc["since"] = format_us(self.since_us)
        if self.until_us is not None:
            doc["until"] = format_us(self.until_us)
        if self.has_findings:
            doc["has_findings"] = True
        return doc

    def matches(self, values: dict[str, Any]) -> bool:
        """Whether an entry whose *proven* values are ``values`` (column -> envelope value,
        ``ledger.core.readcheck``, and its ``kind``) satisfies the text filters (the index
        found it by its columns, which may have been rewritten)."""
        return all(not want or values.get(name) in want
                   for name, want in ((n, getattr(self, n)) for n in STRING_FILTERS))


TextFilter = str | list[str] | tuple[str, ...] | set[str] | frozenset[str] | None
TimeBound = str | dt.datetime | int | None


class FilterArgs(TypedDict, total=False):
    """The keywords of :func:`make_filters`, so that a type checker checks every call; the
    values are still validated at run time (they often come from a request)."""

    kind: TextFilter
    engine: TextFilter
    status: TextFilter
    constraint_id: TextFilter
    proof_ref: TextFilter
    subject: TextFilter
    producer: TextFilter
    att_verdict: TextFilter
    att_kid: TextFilter
    tenant: TextFilter
    since: TimeBound
    until: TimeBound
    start: int | None
    end: int | None
    has_findings: bool | None


def _text_values(name: str, value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        values: tuple[Any, ...] = (value,)
    elif isinstance(value, (list, tuple, set, frozenset)):
        values = tuple(value)
    else:
        raise UsageError(f"filter {name} takes text or a list of texts", field=name)
    for v in values:
        if not isinstance(v, str):
            raise UsageError(f"filter {name} takes text, not {type(v).__name__}", field=name)
        if len(v) > MAX_FILTER_TEXT:
            raise UsageError(f"filter {name} is longer than {MAX_FILTER_TEXT} characters",
                             field=name)
        if "\x00" in v:  # PostgreSQL text cannot hold NUL, so nothing stored can match
            raise UsageError(f"filter {name} contains a NUL character", field=name)
        try:
            v.encode("utf-8")
        except UnicodeEncodeError:
            raise UsageError(f"filter {name} is not valid Unicode text", field=name) from None
    return tuple(dict.fromkeys(values))


def _time(name: str, value: Any) -> int | None:
    if value is None or isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, dt.datetime):
        if value.tzinfo is None:
            raise UsageError(f"{name} needs a time zone", field=name)
        return parse_rfc3339(value.isoformat())
    if isinstance(value, str):
        try:
            return parse_rfc3339(value)
        except ValueError:
            raise UsageError(f"{name} is not an RFC 3339 time: {value[:64]!r}",
                             field=name) from None
    raise UsageError(f"{name} must be RFC 3339 text or µs", field=name)


def make_filters(**kw: Unpack[FilterArgs]) -> Filters:
    """Validated :class:`Filters` from keyword arguments (:class:`FilterArgs`: a value or a
    list of values per text filter; ``since``/``until`` as RFC 3339 text, aware datetimes or
    µs; ``start``, ``end`` seqs).  Raises UsageError for an unknown name (a caller that
    passes a mapping it was given) or a bad value."""
    unknown = set(kw) - set(STRING_FILTERS) - {"since", "until", "start", "end",
                                                "has_findings"}
    if unknown:
        raise UsageError(f"unknown filter(s): {', '.join(sorted(unknown))}",
                         field=min(unknown))
    args: dict[str, Any] = {n: _text_values(n, kw.get(n)) for n in STRING_FILTERS}
    args["since_us"], args["until_us"] = _time("since", kw.get("since")), _time(
        "until", kw.get("until"))
    start, end = kw.get("start") or 0, kw.get("end")
    for name, v in (("start", start), ("end", end)):
        if v is not None and (not isinstance(v, int) or isinstance(v, bool) or v < 0):
            raise UsageError(f"{name} must be a non-negative seq", field=name)
    has_findings = kw.get("has_findings") or False
    if not isinstance(has_findings, bool):
        raise UsageError("has_findings must be true or false", field="has_findings")
    return Filters(**args, start=start, end=end, has_findings=has_findings)


def with_window(f: Filters, start: int, end: int | None) -> Filters:
    """``f`` restricted to the seq range ``[start, end)``."""
    new_end = end if f.end is None else (f.end if end is None else min(f.end, end))
    return replace(f, start=max(f.start, start), end=new_end)

