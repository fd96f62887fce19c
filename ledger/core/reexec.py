"""Re-execution of stored claims: the protocol a producer's re-executor implements, and
the comparison of a fresh result with the stored one (docs/reverify.md).

The audit proves that a result is what its producer wrote; re-verification asks whether
the producer was *right*: it re-runs the producing engine on the entry's stored inputs and
compares.  A re-executor (registered in the entry-point group :data:`GROUP`) is an object
with

* ``name`` (e.g. ``"qwed"``) and ``engines``: the ledger engine names it handles;
* ``version(engine) -> str``: the name and version of the engine that re-executes
  (recorded with every outcome, so drift between engine versions shows as such);
* ``plan(entry: Stored) -> Plan | NotReexecutable``: how to rebuild the engine's inputs
  from the stored payloads, or why it cannot (``reason`` one of :data:`REASONS`); runs in
  the job's process and must be cheap and never run the engine;
* ``execute(plan: Plan) -> Fresh``: run the engine; runs in a sandboxed worker process
  with a time and a memory limit, so it may raise anything (an ``engine_error``);
* ``compare(entry: Stored, fresh: Fresh) -> list[Difference]``: the field-level
  differences, normally :func:`compare_results` with the engine's verdict fields.
* optionally ``prepare() -> None``: called once in each worker process, after its limits
  are set and before it takes a plan (import the engines here, so the first entry's
  time limit is not spent importing them; a failure is ignored: ``execute`` reports it).

Pure: the standard library only.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

GROUP = "ledger.reexecutors"  # the entry-point group of re-executor factories

AGREES = "agrees"
DISAGREES = "disagrees"
NOT_REEXECUTABLE = "not_reexecutable"
ENGINE_ERROR = "engine_error"
OUTCOMES = (AGREES, DISAGREES, NOT_REEXECUTABLE, ENGINE_ERROR)

# Why an entry is not re-executable (stable; docs/reverify.md).
NO_REEXECUTOR = "no_reexecutor"          # no installed re-executor handles the engine
NOT_DETERMINISTIC = "not_deterministic"  # the engine's output is not a function of its inputs
INPUTS_NOT_STORED = "inputs_not_stored"  # the ledger does not hold what the engine ran on
REDACTED = "redacted"                    # the inputs were stored and have been erased
INPUTS_UNREADABLE = "inputs_unreadable"  # stored, but not what the engine takes
INTEGRITY = "integrity"                  # a payload it needs does not check against its hash
NOT_A_RESULT = "not_a_result"            # not reached: only result entries are selected
REASONS = (NO_REEXECUTOR, NOT_DETERMINISTIC, INPUTS_NOT_STORED, REDACTED, INPUTS_UNREADABLE,
           INTEGRITY)

# Why an execution failed (the ``reason`` of an engine_error).
TIME_LIMIT = "time_limit"      # the worker ran past the per-entry time limit and was killed
MEMORY_LIMIT = "memory_limit"  # the engine hit the per-entry memory limit
WORKER_DIED = "worker_died"    # the worker process ended without an answer
RAISED = "raised"              # the engine raised an exception


@dataclass(frozen=True)
class Stored:
    """What a re-executor sees of one stored result entry: only payloads that checked
    against the entry's commitments (``None`` when absent), and which were erased."""

    seq: int
    engine: str
    status: str | None
    proof_ref: str | None
    result: dict[str, Any] | None   # the stored result document
    preimage: str | None            # the exact string hashed into proof_ref
    query: str | None
    meta: Any = None
    redacted: frozenset[str] = frozenset()  # payload names erased by a redaction
    unchecked: frozenset[str] = frozenset()  # payload names stored but not checking


@dataclass(frozen=True)
class Plan:
    """The rebuilt inputs of one re-execution (JSON values only: it is sent to a worker
    process).  ``source`` says, per input, which stored payload it came from."""

    engine: str
    call: str                       # the re-executor's name for the engine entry point
    inputs: dict[str, Any]
    source: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class NotReexecutable:
    reason: str
    detail: str = ""


@dataclass(frozen=True)
class Fresh:
    """A re-execution's result: the result dict (``status``, ``developer_fields``,
    ``proof_ref``...) and the exact preimage its proof_ref hashes (None without one)."""

    result: dict[str, Any]
    preimage: str | None = None


@dataclass(frozen=True)
class Difference:
    """One field on which the fresh result differs: ``field`` is a dotted path
    (``status``, ``proof_ref``, ``developer_fields.is_valid``, ``evidence.query``)."""

    field: str
    stored: Any
    fresh: Any

    def to_dict(self) -> dict[str, Any]:
        return {"field": self.field, "stored": self.stored, "fresh": self.fresh}


class Reexecutor(Protocol):
    name: str
    engines: tuple[str, ...]

    def version(self, engine: str) -> str: ...

    def plan(self, entry: Stored) -> Plan | NotReexecutable: ...

    def execute(self, plan: Plan) -> Fresh: ...

    def compare(self, entry: Stored, fresh: Fresh) -> list[Difference]: ...


def proof_ref_of(preimage: str) -> str:
    return "sha256:" + hashlib.sha256(preimage.encode("utf-8")).hexdigest()


_MISSING = "<absent>"


def _get(doc: Any, path: str) -> Any:
    cur = doc
    for part in path.split("."):
        if not isinstance(cur, Mapping) or part not in cur:
            return _MISSING
        cur = cur[part]
    return cur


def _json(text: str | None) -> Any:
    if text is None:
        return _MISSING
    try:
        return json.loads(text)
    except ValueError:
        return text


def evidence_diff(stored: str | None, fresh: str | None, limit: int = 20) -> list[Difference]:
    """The differences of two preimages as ``evidence.<key>`` fields when both are JSON
    objects (top-level keys), else one ``evidence`` difference with both texts."""
    if stored == fresh:
        return []
    a, b = _json(stored), _json(fresh)
    if isinstance(a, dict) and isinstance(b, dict):
        out = [Difference(f"evidence.{k}", a.get(k, _MISSING), b.get(k, _MISSING))
               for k in sorted(set(a) | set(b)) if a.get(k, _MISSING) != b.get(k, _MISSING)]
        return out[:limit] or [Difference("evidence", stored, fresh)]
    return [Difference("evidence", a, b)]


def compare_results(entry: Stored, fresh: Fresh, verdict: Sequence[str]) -> list[Difference]:
    """The stored result against the fresh one: ``status``, ``proof_ref`` (the evidence
    hash: when it differs, the evidence fields that differ too), and each dotted path of
    ``verdict`` in the result document (``developer_fields.is_valid``, ...)."""
    out: list[Difference] = []
    res = entry.result or {}
    got = fresh.result
    if entry.status != got.get("status"):
        out.append(Difference("status", entry.status, got.get("status")))
    if entry.proof_ref != got.get("proof_ref"):
        out.append(Difference("proof_ref", entry.proof_ref, got.get("proof_ref")))
        out += evidence_diff(entry.preimage, fresh.preimage)
    for path in verdict:
        a, b = _get(res, path), _get(got, path)
        if a != b:
            out.append(Difference(path, a, b))
    return out


# -- the run's outcome -------------------------------------------------------------
EXIT_CODES = {"agrees": 0, "disagrees": 1, "not_reexecutable": 3, "empty": 0}


def run_outcome(counts: Mapping[str, int]) -> str:
    """``disagrees`` when any entry disagrees; else ``not_reexecutable`` when any entry
    could not be re-executed (not re-executable or an engine error); else ``agrees``."""
    if counts.get(DISAGREES):
        return "disagrees"
    if counts.get(NOT_REEXECUTABLE) or counts.get(ENGINE_ERROR):
        return "not_reexecutable"
    return "agrees"


def summary_line(counts: Mapping[str, int]) -> str:
    n = sum(counts.get(o, 0) for o in OUTCOMES)
    return (f"reverify complete: {n} entries, {counts.get(AGREES, 0)} agree, "
            f"{counts.get(DISAGREES, 0)} disagree, {counts.get(NOT_REEXECUTABLE, 0)} not "
            f"re-executable, {counts.get(ENGINE_ERROR, 0)} engine errors")
