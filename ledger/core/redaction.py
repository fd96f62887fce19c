"""The documents of redaction and hold entries: build, parse strictly, validate, fold.

``ledger-redaction/2`` (the ``request`` payload of a ``redaction`` entry; ``/1`` is the same
without ``signature``, written before redactions were signed, still read)::

    {"format": "ledger-redaction/2", "signature": "<compact JWS by the ledger key>",
     "targets": [{"seq": N, "payloads": ["attestation", "query"]}, ...],  sorted by seq,
                  names sorted, from result/preimage/attestation/query/meta/subject
     "reason": "<non-empty text>", "reference": <text|null>, "requested_by": <text|null>,
     "keep_attestation": <bool>, "override_minimum": <text|null>}

``ledger-hold/1`` (the ``order`` payload of a ``hold`` entry)::

    {"format": "ledger-hold/1", "action": "add", "targets": [seq, ...],  sorted
     "reason": "<text>", "reference": <text|null>}
    {"format": "ledger-hold/1", "action": "release", "hold_seq": N,
     "reason": "<text>", "reference": <text|null>}

Neither ever holds erased data: no subject text, no payload bytes (docs/redaction.md).
Pure: stdlib, ``core`` and ``errors`` only.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from ledger.core.canonical import canonical_json
from ledger.core.digest import digest_text
from ledger.core.strict import StrictError, closed, loads
from ledger.errors import UsageError

REDACTION_FORMAT = "ledger-redaction/1"  # unsigned (written before signed redactions)
REDACTION_FORMAT_V2 = "ledger-redaction/2"  # v1's fields + "signature" (docs/format.md §10)
MAX_SIGNATURE = 2048  # characters of the compact JWS
HOLD_FORMAT = "ledger-hold/1"
# The erasable payloads of a result entry, in slot order (docs/format.md, v2).
PAYLOAD_NAMES = ("result", "preimage", "attestation", "query", "meta", "subject")
# What the CLI and HTTP accept for --payload: the names, "evidence" (= preimage) and "all".
PAYLOAD_KINDS = ("all", "evidence", *PAYLOAD_NAMES)
MAX_TARGETS = 1000  # per redaction entry; a larger request is several entries
MAX_TEXT = 4096  # reason, reference, requested_by
ROLES = ("custodian", "operator")  # who may ask for a redaction or a hold
_REDACTION_KEYS = ("format", "targets", "reason", "reference", "requested_by",
                   "keep_attestation", "override_minimum")
_REDACTION_KEYS_V2 = (*_REDACTION_KEYS, "signature")
_HOLD_KEYS = {"add": ("format", "action", "targets", "reason", "reference"),
              "release": ("format", "action", "hold_seq", "reason", "reference")}


def _bad(message: str, field: str | None = None, code: str = "bad_redaction") -> UsageError:
    return UsageError(message, code=code, field=field)


def payload_names(kinds: Iterable[str]) -> tuple[str, ...] | None:
    """The payload names of CLI/HTTP kinds (``evidence`` -> ``preimage``); None for
    ``all`` (or nothing given).  Raises UsageError for an unknown kind."""
    names: set[str] = set()
    for k in kinds:
        if k not in PAYLOAD_KINDS:
            raise _bad(f"payload kind must be one of {', '.join(PAYLOAD_KINDS)}, not {k!r}",
                       "payload")
        if k == "all":
            return None
        names.add("preimage" if k == "evidence" else k)
    return tuple(sorted(names)) if names else None


def check_text(value: Any, field: str, *, required: bool, code: str = "bad_redaction",
               ) -> str | None:
    """``value`` as stored text: None (when not ``required``) or 1..4096 characters of
    valid text without U+0000.  Raises UsageError naming ``field``."""
    if value is None and not required:
        return None
    ok = isinstance(value, str) and value.strip() != "" and len(value) <= MAX_TEXT \
        and "\x00" not in value
    if ok:
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            ok = False
    if not ok:
        what = "is required: " if required else "must be "
        raise _bad(f"{field} {what}1..{MAX_TEXT} characters of text without U+0000",
                   field, code)
    return str(value)


def _seq(value: Any, field: str, code: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 2**53 - 1:
        raise _bad(f"{field} must be a seq (an integer >= 0)", field, code)
    return value


# -- ledger-redaction/1 -----------------------------------------------------------------
@dataclass(frozen=True)
class RedactionRequest:
    """A parsed ``ledger-redaction/1`` document."""

    targets: tuple[tuple[int, tuple[str, ...]], ...]
    reason: str
    reference: str | None = None
    requested_by: str | None = None
    keep_attestation: bool = False
    override_minimum: str | None = None
    # the compact JWS of a ledger-redaction/2 document; None: a ledger-redaction/1 one
    signature: str | None = None

    def to_doc(self) -> dict[str, Any]:
        """The document (canonical JSON of it is the ``request`` payload):
        ``ledger-redaction/2`` with its signature when signed, else ``ledger-redaction/1``."""
        if self.signature is None:
            return {**self._fields(), "format": REDACTION_FORMAT}
        return {**self.signing_doc(), "signature": self.signature}

    def _fields(self) -> dict[str, Any]:
        return {"targets": [{"seq": s, "payloads": list(n)} for s, n in self.targets],
                "reason": self.reason, "reference": self.reference,
                "requested_by": self.requested_by, "keep_attestation": self.keep_attestation,
                "override_minimum": self.override_minimum}

    def signing_doc(self) -> dict[str, Any]:
        """The ``ledger-redaction/2`` document without ``signature``: what is signed."""
        return {"format": REDACTION_FORMAT_V2, **self._fields()}

    def request_digest(self) -> str:
        """``sha256:`` of the canonical JSON of :meth:`signing_doc` (the signed claim)."""
        return digest_text(canonical_json(self.signing_doc()))

    def signed(self, signature: str) -> RedactionRequest:
        """This request with its signature (a ``ledger-redaction/2`` document)."""
        out = replace(self, signature=signature)
        validate_request(out)
        return out

    def pairs(self) -> list[tuple[int, str]]:
        """Every (seq, payload name) this request erases."""
        return [(s, n) for s, names in self.targets for n in names]


def build_request(targets: Mapping[int, Iterable[str]], reason: str, *,
                  reference: str | None = None, requested_by: str | None = None,
                  keep_attestation: bool = False, override_minimum: str | None = None,
                  ) -> RedactionRequest:
    """A validated request (targets sorted, names sorted and unique).  Raises UsageError."""
    rows = tuple((s, tuple(sorted(set(names)))) for s, names in sorted(targets.items()))
    req = RedactionRequest(rows, reason, reference, requested_by, keep_attestation,
                           override_minimum)
    validate_request(req)
    return req


def validate_request(req: RedactionRequest) -> None:
    """The rules of ``ledger-redaction/1`` that need no database.  Raises UsageError."""
    check_text(req.reason, "reason", required=True)
    check_text(req.reference, "reference", required=False)
    check_text(req.requested_by, "requested_by", required=False)
    check_text(req.override_minimum, "override_minimum", required=False)
    if req.signature is not None and (
            not isinstance(req.signature, str) or not 0 < len(req.signature) <= MAX_SIGNATURE
            or not req.signature.isascii()):
        raise _bad(f"signature must be a compact JWS of 1..{MAX_SIGNATURE} ASCII characters",
                   "signature")
    if not isinstance(req.keep_attestation, bool):
        raise _bad("keep_attestation must be true or false", "keep_attestation")
    if not req.targets:
        raise _bad("a redaction names at least one target", "targets")
    if len(req.targets) > MAX_TARGETS:
        raise _bad(f"at most {MAX_TARGETS} targets per redaction entry", "targets")
    last = -1
    for i, (seq, names) in enumerate(req.targets):
        _seq(seq, f"targets[{i}].seq", "bad_redaction")
        if seq <= last:
            raise _bad("targets must be sorted by seq, each seq once", f"targets[{i}].seq")
        last = seq
        if not names or list(names) != sorted(set(names)) or \
                any(n not in PAYLOAD_NAMES for n in names):
            raise _bad(f"targets[{i}].payloads must be sorted unique names from "
                       f"{', '.join(PAYLOAD_NAMES)}", f"targets[{i}].payloads")


def parse_request(data: bytes) -> RedactionRequest:
    """A ``request`` payload read strictly (closed format, no duplicate keys) and
    validated.  Raises UsageError (code ``bad_redaction``) naming the field."""
    fmt = None
    try:
        peek = loads(data)
        fmt = peek.get("format") if isinstance(peek, dict) else None
    except StrictError:
        pass
    keys = _REDACTION_KEYS_V2 if fmt == REDACTION_FORMAT_V2 else _REDACTION_KEYS
    doc = _strict(data, keys, "bad_redaction")
    if doc.get("format") not in (REDACTION_FORMAT, REDACTION_FORMAT_V2):
        raise _bad(f"format must be {REDACTION_FORMAT_V2} (or {REDACTION_FORMAT}, unsigned)",
                   "format")
    if fmt == REDACTION_FORMAT_V2 and not isinstance(doc.get("signature"), str):
        raise _bad("signature must be a compact JWS", "signature")
    targets = doc.get("targets")
    if not isinstance(targets, list):
        raise _bad("targets must be a list", "targets")
    rows = []
    for i, t in enumerate(targets):
        if not isinstance(t, dict) or set(t) != {"seq", "payloads"} or \
                not isinstance(t["payloads"], list):
            raise _bad("a target is {\"seq\": N, \"payloads\": [...]}", f"targets[{i}]")
        rows.append((t["seq"], tuple(t["payloads"])))
    req = RedactionRequest(tuple(rows), doc["reason"], doc["reference"], doc["requested_by"],
                           doc["keep_attestation"], doc["override_minimum"],
                           doc.get("signature"))
    validate_request(req)
    return req


def signature_claims(ledger_id: str, req: RedactionRequest) -> dict[str, str]:
    """The claims a ``ledger-redaction/2`` signature makes: this ledger, this document."""
    return {"ledger": ledger_id, "request_digest": req.request_digest()}


def _strict(data: bytes, keys: Iterable[str], code: str) -> dict[str, Any]:
    try:
        doc = loads(data)
        if not isinstance(doc, dict):
            raise _bad("the document must be a JSON object", None, code)
        closed(doc, keys)
    except StrictError as exc:
        raise _bad(exc.message, exc.field, code) from None
    missing = [k for k in keys if k not in doc]
    if missing:
        raise _bad(f"missing field {missing[0]}", missing[0], code)
    return doc


# -- ledger-hold/1 ------------------------------------------------------------------------
@dataclass(frozen=True)
class HoldOrder:
    """A parsed ``ledger-hold/1`` document: ``targets`` (add) or ``hold_seq`` (release)."""

    action: str
    reason: str
    reference: str | None = None
    targets: tuple[int, ...] = ()
    hold_seq: int | None = None

    def to_doc(self) -> dict[str, Any]:
        head: dict[str, Any] = {"format": HOLD_FORMAT, "action": self.action}
        if self.action == "add":
            head["targets"] = list(self.targets)
        else:
            head["hold_seq"] = self.hold_seq
        return {**head, "reason": self.reason, "reference": self.reference}


def build_hold(action: str, reason: str, *, reference: str | None = None,
               targets: Iterable[int] = (), hold_seq: int | None = None) -> HoldOrder:
    """A validated hold order.  Raises UsageError (code ``bad_hold``)."""
    order = HoldOrder(action, reason, reference, tuple(sorted(set(targets))), hold_seq)
    validate_hold(order)
    return order


def validate_hold(order: HoldOrder) -> None:
    """The rules of ``ledger-hold/1`` that need no database.  Raises UsageError."""
    if order.action not in _HOLD_KEYS:
        raise _bad("action must be add or release", "action", "bad_hold")
    check_text(order.reason, "reason", required=True, code="bad_hold")
    check_text(order.reference, "reference", required=False, code="bad_hold")
    if order.action == "release":
        _seq(order.hold_seq, "hold_seq", "bad_hold")
        return
    if not order.targets or len(order.targets) > MAX_TARGETS * 100:
        raise _bad("a hold names 1..100000 entries", "targets", "bad_hold")
    for i, s in enumerate(order.targets):
        _seq(s, f"targets[{i}]", "bad_hold")
    if list(order.targets) != sorted(set(order.targets)):
        raise _bad("targets must be sorted, each seq once", "targets", "bad_hold")


def parse_hold(data: bytes) -> HoldOrder:
    """An ``order`` payload read strictly and validated.  Raises UsageError (``bad_hold``)."""
    action = None
    try:
        peek = loads(data)
        action = peek.get("action") if isinstance(peek, dict) else None
    except StrictError:
        pass
    keys = _HOLD_KEYS["release"] if action == "release" else _HOLD_KEYS["add"]
    doc = _strict(data, keys, "bad_hold")
    if doc.get("format") != HOLD_FORMAT:
        raise _bad(f"format must be {HOLD_FORMAT}", "format", "bad_hold")
    targets = doc.get("targets", [])
    if not isinstance(targets, list):
        raise _bad("targets must be a list", "targets", "bad_hold")
    order = HoldOrder(doc["action"], doc["reason"], doc["reference"], tuple(targets),
                      doc.get("hold_seq"))
    validate_hold(order)
    return order


class Holds:
    """The legal holds in force, folded from hold entries in seq order (as the trust
    store is folded from key events): ``active[hold seq]`` = the entries it holds.

    A hold entry whose order cannot be read (not stored, not the document its envelope
    commits to, or not a valid ``ledger-hold/1``) is kept in ``unreadable`` (hold seq ->
    why): it may hold any result entry earlier than itself, so it holds all of them
    (fail closed) until a release entry names it.  An unreadable release releases
    nothing."""

    def __init__(self) -> None:
        self.active: dict[int, tuple[int, ...]] = {}  # hold seq -> its targets
        self.released: dict[int, int] = {}  # hold seq -> the release's seq
        self.unreadable: dict[int, str] = {}  # hold seq -> why its order cannot be read

    def apply(self, seq: int, order: HoldOrder) -> str | None:
        """Fold one hold entry; returns a problem (text) when it does not apply."""
        if order.action == "add":
            self.active[seq] = order.targets
            return None
        if order.hold_seq in self.released:
            return f"hold {order.hold_seq} was already released by {self.released[order.hold_seq]}"
        if order.hold_seq in self.unreadable and order.hold_seq < seq:
            del self.unreadable[order.hold_seq]
            self.released[order.hold_seq] = seq
            return None
        if order.hold_seq not in self.active:
            return f"entry {order.hold_seq} is not a hold in force before {seq}"
        del self.active[order.hold_seq]
        self.released[order.hold_seq] = seq
        return None

    def apply_unreadable(self, seq: int, action: Any, why: str) -> None:
        """Fold a hold entry whose order cannot be read (``action``: its envelope's)."""
        if action != "release":
            self.unreadable[seq] = why

    def in_force(self, hold_seq: int) -> bool:
        """Whether ``hold_seq`` is a hold in force (readable or not)."""
        return hold_seq in self.active or hold_seq in self.unreadable

    def holding(self, seq: int) -> list[int]:
        """The holds in force on entry ``seq`` (their seqs, ascending), an unreadable hold
        on every entry earlier than itself."""
        return sorted([h for h, targets in self.active.items() if _contains(targets, seq)]
                      + [h for h in self.unreadable if seq < h])


def _contains(sorted_seqs: tuple[int, ...], seq: int) -> bool:
    from bisect import bisect_left

    i = bisect_left(sorted_seqs, seq)
    return i < len(sorted_seqs) and sorted_seqs[i] == seq


def fold_holds(orders: Iterable[tuple[int, HoldOrder]]) -> Holds:
    """The holds in force after ``orders`` ((seq, order) in seq order); orders that do not
    apply (a release of no hold) are skipped (the audit reports them)."""
    holds = Holds()
    for seq, order in orders:
        holds.apply(seq, order)
    return holds


def read_order(envelope: Mapping[str, Any], document: bytes | None) -> HoldOrder | str:
    """The order of a hold entry, or why it cannot be read: the document is not stored,
    is not the one its envelope commits to (``payloads.order``), or is not a valid
    ``ledger-hold/1`` whose action is the envelope's."""
    if document is None:
        return "its order document is not stored"
    want = (envelope.get("payloads") or {}).get("order") \
        if isinstance(envelope.get("payloads"), dict) else None
    if want != digest_text(document):
        return "its order document differs from the digest its envelope commits to"
    try:
        order = parse_hold(document)
    except UsageError as exc:
        return f"its order document is invalid: {exc.message}"
    if order.action != envelope.get("action"):
        return "its order's action differs from the envelope's"
    return order


def fold_hold_entries(rows: Iterable[tuple[int, Mapping[str, Any], bytes | None]]) -> Holds:
    """The holds in force after the hold entries ``rows`` ((seq, parsed envelope, order
    bytes or None), seq order), unreadable orders failing closed (:class:`Holds`)."""
    holds = Holds()
    for seq, envelope, document in rows:
        order = read_order(envelope, document)
        if isinstance(order, str):
            holds.apply_unreadable(seq, envelope.get("action"), order)
        else:
            holds.apply(seq, order)
    return holds
