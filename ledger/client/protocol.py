"""What the sync and async clients share, without I/O: request bodies, idempotency keys,
how an HTTP answer is classified, and the outcome types.

An answer is one of three things:

* **taken**: 200/201 with a receipt (``appended`` or ``replayed``);
* **refused**: 4xx (other than 408/429): the ledger has judged the submission and
  quarantined it (422, 409, 413), or the token is wrong (401/403).  Never spooled:
  retrying cannot change the answer;
* **not now**: no connection, a timeout, 408, 429 or any 5xx (503 ``overloaded``,
  ``store_unavailable``, ``shutting_down``): the submission goes to the spool.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, NoReturn

from ledger.client.errors import AccessDenied, ClientUsage, Rejected

RETRY_STATUSES = frozenset({408, 429})
BATCH_MAX_ITEMS = 1000  # the ledger's limit per batch request
BATCH_MAX_BYTES = 7 * 1024 * 1024  # under the ledger's 8 MiB batch body limit


@dataclass(frozen=True)
class AppendOutcome:
    """The result of one append.

    ``status``: ``appended`` (a new entry; receipt verified), ``replayed`` (the key was
    already in the ledger with this content; receipt verified), ``spooled`` (kept in
    the spool, to be sent by a drain), or ``rejected`` (batch items only: the ledger
    refused it; ``error`` says why).
    """

    status: str
    idempotency_key: str
    seq: int | None = None
    entry_hash: str | None = None
    recorded_at: str | None = None
    receipt: str | None = None
    claims: dict[str, Any] | None = None
    spool_id: int | None = None
    error: dict[str, Any] | None = None

    @property
    def spooled(self) -> bool:
        return self.status == "spooled"

    @property
    def stored(self) -> bool:
        """True when the ledger holds the entry (appended now or before)."""
        return self.status in ("appended", "replayed")


@dataclass
class DrainReport:
    """What one drain did; ``error`` is why it stopped early (ledger still unavailable)."""

    sent: int = 0
    appended: int = 0
    replayed: int = 0
    rejected: int = 0
    remaining: int = 0
    error: str | None = None
    outcomes: list[AppendOutcome] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k != "outcomes"}


def new_key(prefix: str) -> str:
    return f"{prefix}{uuid.uuid4().hex}"


def _parse_body(body: bytes) -> tuple[Any, str | None]:
    """``body`` parsed as one JSON text (the value, or None and what is wrong)."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        return None, f"a submission must be UTF-8 (bad byte at {exc.start})"
    if text.startswith("\ufeff"):
        return None, "a submission must be JSON without a byte order mark (U+FEFF)"
    try:
        return json.loads(text), None
    except RecursionError:
        return None, "a submission is nested too deeply"
    except ValueError as exc:  # "Extra data" too: two values are not one submission
        return None, f"a submission must be one JSON object: {exc}"


def body_problem(body: bytes) -> str | None:
    """What keeps ``body`` from being one element of a batch body (None: nothing): it
    must be UTF-8 without a byte order mark and exactly one JSON object.  Checked
    before a body is batched or spooled, so a bad one fails alone instead of making
    the whole batch (or every drain) fail, or splitting into two items."""
    value, problem = _parse_body(body)
    if problem is None and not isinstance(value, dict):
        problem = "a submission must be a JSON object"
    return problem


def prepare(submission: Any, key_prefix: str) -> tuple[bytes, str]:
    """The exact request body for ``submission`` (a dict, or JSON bytes/text) and its
    idempotency key.  A submission without a key gets a fresh one *now*, before any
    attempt, so that the first try, every retry and the spooled copy share it.  A
    JSON text that already has a key is sent byte for byte.  Raises ClientUsage for a
    text that is not one JSON object (:func:`body_problem`)."""
    if isinstance(submission, (bytes, bytearray, str)):
        raw = bytes(submission, "utf-8") if isinstance(submission, str) else bytes(submission)
        obj, problem = _parse_body(raw)
        if problem is not None:
            raise ClientUsage(problem, field="body")
        if isinstance(obj, dict) and isinstance(obj.get("idempotency_key"), str):
            return raw, obj["idempotency_key"]
    elif isinstance(submission, dict):
        obj = submission
    else:
        raise ClientUsage("a submission is a dict or JSON text")
    if not isinstance(obj, dict):
        raise ClientUsage("a submission must be a JSON object", field="body")
    key = obj.get("idempotency_key")
    if not isinstance(key, str) or not key:
        key = new_key(key_prefix)
        obj = {**obj, "idempotency_key": key}
    try:
        body = json.dumps(obj, ensure_ascii=False, allow_nan=True, separators=(",", ":"))
        return body.encode("utf-8"), key
    except (TypeError, ValueError, RecursionError) as exc:  # UnicodeEncodeError: a lone surrogate
        raise ClientUsage(f"a submission must be JSON-serializable text: {exc}",
                          field="body") from None


def local_refusal(body: bytes, key: str) -> AppendOutcome | None:
    """A spooled item that cannot be sent (:func:`body_problem`) as a ``rejected``
    outcome, decided here without asking the ledger; None for a sendable one.  Such an
    item (written before bodies were checked) is refused alone instead of making every
    drain fail."""
    problem = body_problem(body)
    if problem is None:
        return None
    return rejected(key, {"code": "invalid_json", "field": "body", "message": problem})


def batch_body(bodies: list[bytes]) -> bytes:
    """A JSON array of the exact item bodies (the ledger splits it without re-encoding)."""
    return b"[" + b",".join(bodies) + b"]"


def chunks(bodies: list[bytes], max_items: int) -> Iterator[tuple[int, int]]:
    """``[start, end)`` ranges of at most ``max_items`` items and BATCH_MAX_BYTES bytes."""
    limit = max(1, min(max_items, BATCH_MAX_ITEMS))
    start = 0
    while start < len(bodies):
        end, size = start, 2
        while end < len(bodies) and end - start < limit and \
                (end == start or size + len(bodies[end]) + 1 <= BATCH_MAX_BYTES):
            size += len(bodies[end]) + 1
            end += 1
        yield start, end
        start = end


def is_retryable(status: int) -> bool:
    """True for answers that mean "not now": the submission is spooled."""
    return status >= 500 or status in RETRY_STATUSES


def error_of(status: int, payload: Any) -> dict[str, Any]:
    err = payload.get("error") if isinstance(payload, dict) else None
    if isinstance(err, dict):
        return err
    return {"code": f"http_{status}", "message": f"the ledger answered HTTP {status}"}


def raise_refusal(status: int, payload: Any) -> NoReturn:
    """Raise what a final 4xx answer means."""
    err = error_of(status, payload)
    if status in (401, 403):
        raise AccessDenied(f"the ledger refused the token: {err.get('message')}",
                           code=str(err.get("code", "access_denied")))
    raise Rejected.from_answer(status, err)


def taken(item: dict[str, Any], key: str, claims: dict[str, Any]) -> AppendOutcome:
    """The outcome of an item the ledger took, once its receipt verified."""
    return AppendOutcome("replayed" if item.get("replayed") else "appended", key,
                         item.get("seq"), item.get("entry_hash"), item.get("recorded_at"),
                         item.get("receipt"), claims)


def spooled(key: str, spool_id: int) -> AppendOutcome:
    return AppendOutcome("spooled", key, spool_id=spool_id)


def rejected(key: str, error: dict[str, Any]) -> AppendOutcome:
    return AppendOutcome("rejected", key, error=error)


def merge(local: list[AppendOutcome | None], sent: list[AppendOutcome]) -> list[AppendOutcome]:
    """The outcomes in item order: each local refusal, else the next sent outcome."""
    it = iter(sent)
    return [o if o is not None else next(it) for o in local]


def done_record(outcome: AppendOutcome) -> dict[str, Any]:
    """What the spool records when a drained item is finished."""
    rec: dict[str, Any] = {"outcome": outcome.status}
    if outcome.stored:
        rec.update(seq=outcome.seq, entry_hash=outcome.entry_hash)
    else:
        rec["error"] = outcome.error
    return rec
