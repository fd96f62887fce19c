"""Engine policies: data, not code (a JSON file; the default ships with the package).
:func:`load_policy` is the one loader, used by the audit and export verification; it
reads only the policy file it is given or the packaged default (no other I/O here).

Format (``ledger-policy/1``)::

    {"format": "ledger-policy/1",
     "rules": [{"id": "fact-never-verified", "engine": "fact", "status": "VERIFIED",
                "message": "..."}]}

A rule matches a result row when every key it gives (``engine``: a name or a
list; ``status``: a status or a list; ``constraint_prefix``: a prefix of the
constraint id) matches.  A matching row is a *policy violation* finding.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from importlib import resources
from os import PathLike
from typing import Any

from ledger.errors import PolicyError, UsageError

POLICY_FORMAT = "ledger-policy/1"
_RULE_KEYS = {"id", "engine", "status", "constraint_prefix", "message"}


@dataclass(frozen=True)
class Rule:
    id: str
    engines: frozenset[str] | None
    statuses: frozenset[str] | None
    constraint_prefix: str | None
    message: str

    def matches(self, engine: str | None, status: str | None, constraint_id: str | None) -> bool:
        if self.engines is not None and engine not in self.engines:
            return False
        if self.statuses is not None and status not in self.statuses:
            return False
        return self.constraint_prefix is None or (
            constraint_id is not None and constraint_id.startswith(self.constraint_prefix))


@dataclass(frozen=True)
class Policy:
    rules: tuple[Rule, ...]
    source: str

    def violations(self, engine: str | None, status: str | None,
                   constraint_id: str | None) -> list[Rule]:
        return [r for r in self.rules if r.matches(engine, status, constraint_id)]


def _names(value: Any, where: str) -> frozenset[str] | None:
    if value is None:
        return None
    if isinstance(value, str):
        return frozenset([value])
    if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
        return frozenset(value)
    raise PolicyError(f"{where}: must be a string or a non-empty list of strings")


def parse_policy(doc: Any, source: str = "<policy>") -> Policy:
    """Validate a policy document.  Raises PolicyError naming the field."""
    if not isinstance(doc, dict) or doc.get("format") != POLICY_FORMAT:
        raise PolicyError(f"{source}: format must be {POLICY_FORMAT!r}")
    rules = doc.get("rules")
    if not isinstance(rules, list):
        raise PolicyError(f"{source}: rules must be a list")
    out = []
    for i, r in enumerate(rules):
        where = f"{source}: rules[{i}]"
        if not isinstance(r, dict):
            raise PolicyError(f"{where}: must be an object")
        unknown = set(r) - _RULE_KEYS
        if unknown:
            raise PolicyError(f"{where}: unknown keys {sorted(unknown)}")
        if not isinstance(r.get("id"), str) or not r["id"]:
            raise PolicyError(f"{where}.id: must be a non-empty string")
        prefix = r.get("constraint_prefix")
        if prefix is not None and not isinstance(prefix, str):
            raise PolicyError(f"{where}.constraint_prefix: must be a string")
        out.append(Rule(r["id"], _names(r.get("engine"), f"{where}.engine"),
                        _names(r.get("status"), f"{where}.status"), prefix,
                        str(r.get("message") or r["id"])))
    return Policy(tuple(out), source)


def load_policy(path: str | PathLike[str] | None = None) -> Policy:
    """The policy file at ``path``, or the packaged default (``ledger/data``).

    Raises UsageError ``bad_policy`` (field ``policy``) when the file cannot be read,
    is not JSON or is not a valid policy.
    """
    try:
        if path is None:
            text = resources.files("ledger.data").joinpath("default_policy.json").read_text(
                "utf-8")
            return parse_policy(json.loads(text), "default policy")
        with open(path, encoding="utf-8") as fh:
            return parse_policy(json.load(fh), str(path))
    except (OSError, ValueError) as exc:  # PolicyError is a ValueError
        raise UsageError(f"cannot use policy: {exc}", code="bad_policy", field="policy"
                         ) from None
