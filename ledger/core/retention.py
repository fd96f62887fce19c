"""Retention policies as data: ``ledger-retention/1`` (a JSON file; docs/redaction.md).

::

    {"format": "ledger-retention/1",
     "rules": [{"id": "prompts-6-months", "kind": "result", "engine": "sympy" | "*",
                "payloads": ["query", "preimage"] | ["all"],
                "erase_after_days": 200 | null, "minimum_days": 183 | null}]}

A rule matches a payload of an entry when ``kind`` (default ``result``, the only kind
with erasable payloads), ``engine`` (a name, a list, or ``*``/absent for any) and the
payload name (``all``: any) match.  ``erase_after_days``: ``retention apply`` erases the
payload once it is that old.  ``minimum_days``: a redaction earlier than that is refused
unless the minimum is overridden (with a reason, recorded in the redaction).  Where
several rules match, the *longest* minimum and the *shortest* erase-after win; a rule
whose erase-after is shorter than its own minimum is refused.  Pure.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from ledger.core.redaction import PAYLOAD_NAMES
from ledger.core.strict import StrictError, closed, loads
from ledger.errors import UsageError

RETENTION_FORMAT = "ledger-retention/1"
DAY_US = 86_400 * 1_000_000
_RULE_KEYS = ("id", "kind", "engine", "payloads", "erase_after_days", "minimum_days")
MAX_DAYS = 100 * 366


def _bad(message: str, field: str | None = None) -> UsageError:
    return UsageError(message, code="bad_retention", field=field)


@dataclass(frozen=True)
class RetentionRule:
    id: str
    engines: frozenset[str] | None  # None: any engine
    payloads: frozenset[str]  # names (PAYLOAD_NAMES)
    erase_after_days: int | None
    minimum_days: int | None

    def matches(self, engine: str | None, payload: str) -> bool:
        return payload in self.payloads and (self.engines is None or engine in self.engines)


@dataclass(frozen=True)
class RetentionPolicy:
    rules: tuple[RetentionRule, ...]
    source: str = "inline"

    def minimum_days(self, engine: str | None, payload: str) -> int | None:
        """The longest minimum retention of ``payload`` of an ``engine`` entry, or None."""
        got = [r.minimum_days for r in self.rules
               if r.minimum_days is not None and r.matches(engine, payload)]
        return max(got) if got else None

    def erase_after_days(self, engine: str | None, payload: str) -> int | None:
        """The shortest erase-after of ``payload`` of an ``engine`` entry, or None."""
        got = [r.erase_after_days for r in self.rules
               if r.erase_after_days is not None and r.matches(engine, payload)]
        return min(got) if got else None

    def expired(self, engine: str | None, names: Iterable[str], recorded_at_us: int,
                now_us: int) -> list[str]:
        """The payloads of ``names`` due for erasure at ``now_us`` (sorted); never one
        still under a minimum retention."""
        out = []
        for name in names:
            days = self.erase_after_days(engine, name)
            if days is None or now_us - recorded_at_us < days * DAY_US:
                continue
            if self.under_minimum(engine, name, recorded_at_us, now_us):
                continue
            out.append(name)
        return sorted(out)

    def under_minimum(self, engine: str | None, payload: str, recorded_at_us: int,
                      now_us: int) -> int | None:
        """The minimum (days) ``payload`` is still kept for at ``now_us``, or None."""
        days = self.minimum_days(engine, payload)
        if days is not None and now_us - recorded_at_us < days * DAY_US:
            return days
        return None


def _days(rule: dict[str, Any], key: str, where: str) -> int | None:
    v = rule.get(key)
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= MAX_DAYS:
        raise _bad(f"{where}.{key} must be a whole number of days (0..{MAX_DAYS}) or null",
                   f"{where}.{key}")
    return v


def _rule(i: int, rule: Any) -> RetentionRule:
    where = f"rules[{i}]"
    if not isinstance(rule, dict):
        raise _bad(f"{where} must be an object", where)
    try:
        closed(rule, _RULE_KEYS, where + ".")
    except StrictError as exc:
        raise _bad(exc.message, exc.field) from None
    rid = rule.get("id", f"rule-{i}")
    if not isinstance(rid, str) or not rid:
        raise _bad(f"{where}.id must be text", f"{where}.id")
    if rule.get("kind", "result") != "result":
        raise _bad(f"{where}.kind: only result entries have erasable payloads",
                   f"{where}.kind")
    engine = rule.get("engine", "*")
    engines = None if engine == "*" else frozenset([engine] if isinstance(engine, str)
                                                   else engine if isinstance(engine, list)
                                                   else [None])
    if engines is not None and not all(isinstance(e, str) for e in engines):
        raise _bad(f"{where}.engine must be a name, a list of names or *", f"{where}.engine")
    names = rule.get("payloads", ["all"])
    if not isinstance(names, list) or not names or \
            any(n not in (*PAYLOAD_NAMES, "all", "evidence") for n in names):
        raise _bad(f"{where}.payloads must list names from all, evidence, "
                   f"{', '.join(PAYLOAD_NAMES)}", f"{where}.payloads")
    payloads = frozenset(PAYLOAD_NAMES) if "all" in names else frozenset(
        "preimage" if n == "evidence" else n for n in names)
    erase, minimum = _days(rule, "erase_after_days", where), _days(rule, "minimum_days", where)
    if erase is None and minimum is None:
        raise _bad(f"{where} sets neither erase_after_days nor minimum_days", where)
    if erase is not None and minimum is not None and erase < minimum:
        raise _bad(f"{where}: erase_after_days ({erase}) is shorter than minimum_days "
                   f"({minimum})", f"{where}.erase_after_days")
    return RetentionRule(rid, engines, payloads, erase, minimum)


def parse_retention(data: bytes | str, source: str = "inline") -> RetentionPolicy:
    """A ``ledger-retention/1`` document read strictly.  Raises UsageError
    (code ``bad_retention``) naming the field."""
    try:
        doc = loads(data)
        if not isinstance(doc, dict):
            raise _bad("a retention policy is a JSON object")
        closed(doc, ("format", "rules"))
    except StrictError as exc:
        raise _bad(f"not a retention policy: {exc.message}", exc.field) from None
    if doc.get("format") != RETENTION_FORMAT:
        raise _bad(f"format must be {RETENTION_FORMAT}", "format")
    rules = doc.get("rules")
    if not isinstance(rules, list):
        raise _bad("rules must be a list", "rules")
    parsed = tuple(_rule(i, r) for i, r in enumerate(rules))
    ids = [r.id for r in parsed]
    if len(set(ids)) != len(ids):
        raise _bad("rule ids must be unique", "rules")
    return RetentionPolicy(parsed, source)


def policy_text(policy: dict[str, Any]) -> bytes:
    """A policy document as file bytes (for tests and the demo)."""
    return json.dumps(policy, indent=1).encode("utf-8")
