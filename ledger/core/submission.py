"""Parse and validate one producer submission (docs/submissions.md).

Pure: bytes in, a :class:`Submission` (every payload already serialized to the
exact bytes that will be stored) or a :class:`~ledger.errors.SubmissionError`
naming the field and the rule out.  Nothing here touches storage.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from typing import Any

from ledger.core import contract
from ledger.core.diagnostics import proof_preimage
from ledger.core.entry import digest_text
from ledger.errors import SubmissionError, SubmissionTooLarge

MAX_SUBMISSION_BYTES = 1024 * 1024  # 1 MiB of JSON text per submission
MAX_DEPTH = 64  # nesting of objects/arrays, counted from the submission object
MAX_SHORT_TEXT = 256  # subject, idempotency_key, constraint_id (longer ids are not indexed)

ENGINE_RE = re.compile(r"[a-z0-9_.-]{1,64}")

TOP_LEVEL_FIELDS = frozenset({
    "result", "engine", "proof_preimage", "evidence", "evidence_kind", "attestation",
    "query", "admission", "subject", "idempotency_key", "meta",
})
RESULT_FIELDS = frozenset({
    "status", "agent_message", "developer_fields", "proof_ref", "is_authoritative",
    "attestation",
})
ADMISSIONS = ("ADMIT", "BLOCKED")

# Canonical result payload encoding (stored bytes; verified by hashing bytes).
_result_encoder = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                                   allow_nan=False)


@dataclass(frozen=True)
class Submission:
    """A validated submission, ready to be linked into the chain."""

    engine: str
    status: str
    agent_message: str
    developer_fields: dict[str, Any]
    proof_ref: str | None
    constraint_id: str | None
    subject: str | None
    idempotency_key: str | None
    admission: str | None
    attestation: str | None
    query: str | None
    payloads: dict[str, bytes | None] = field(default_factory=dict)

    def payload_digests(self) -> dict[str, str | None]:
        return {k: (digest_text(v) if v is not None else None) for k, v in self.payloads.items()}


def _fail(code: str, field_name: str | None, message: str) -> SubmissionError:
    return SubmissionError(message, code=code, field=field_name)


def _reject_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)
    if len(out) != len(pairs):
        seen: set[str] = set()
        for k, _ in pairs:
            if k in seen:
                raise _fail("duplicate_key", k, f"key {k!r} appears twice in one object")
            seen.add(k)
    return out


# json.loads(text, object_pairs_hook=_reject_duplicates), with the decoder built once
# (json.loads builds one per call when given a hook)
_DECODER = json.JSONDecoder(object_pairs_hook=_reject_duplicates)


def loads(raw: bytes | str) -> Any:
    """Parse one JSON document with the submission limits applied."""
    if isinstance(raw, str):
        try:
            raw = raw.encode("utf-8")
        except UnicodeEncodeError:
            raise _fail("invalid_unicode", None, "submission text contains a lone surrogate"
                        ) from None
    size = len(raw)
    if size > MAX_SUBMISSION_BYTES:
        raise SubmissionTooLarge(
            f"submission is {size} bytes; the limit is {MAX_SUBMISSION_BYTES} bytes",
            code="too_large", field=None)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _fail("invalid_json", None, f"submission is not UTF-8: {exc.reason} "
                    f"at byte {exc.start}") from None
    try:
        obj = _DECODER.decode(text)
    except RecursionError:
        raise _fail("too_deep", None, f"nesting deeper than {MAX_DEPTH} levels") from None
    except json.JSONDecodeError as exc:
        raise _fail("invalid_json", None,
                    f"not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from None
    except ValueError as exc:  # e.g. an integer literal beyond Python's digit limit
        raise _fail("invalid_json", None, f"not valid JSON: {exc}") from None
    if raw.count(b"[") + raw.count(b"{") > MAX_DEPTH:
        _check_depth(obj)  # only documents with enough brackets can be too deep
    return obj


def _check_depth(obj: Any) -> None:
    stack = [(obj, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, (dict, list)):
            if depth > MAX_DEPTH:
                raise _fail("too_deep", None, f"nesting deeper than {MAX_DEPTH} levels")
            children = node.values() if isinstance(node, dict) else node
            stack.extend((c, depth + 1) for c in children if isinstance(c, (dict, list)))


def _check_json_safe(value: Any, path: str) -> None:
    """Values JSON cannot carry: NaN/Infinity and strings with lone surrogates."""
    stack = [(value, path)]
    while stack:
        node, where = stack.pop()
        if isinstance(node, float) and not math.isfinite(node):
            raise _fail("non_json_value", where, f"{node!r} cannot be represented in JSON")
        if isinstance(node, str):
            _check_unicode(node, where)
        elif isinstance(node, dict):
            for k, v in node.items():
                _check_unicode(k, where)
                stack.append((v, f"{where}.{k}"))
        elif isinstance(node, list):
            stack.extend((v, f"{where}[{i}]") for i, v in enumerate(node))


def _check_unicode(text: str, where: str) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise _fail("invalid_unicode", where, "string contains a lone surrogate") from None


def check_column_text(value: str, where: str | None) -> None:
    """A string that becomes a text column must be storable on every engine: PostgreSQL
    cannot hold U+0000 (SQLite can), so both refuse it and a ledger stays movable between
    them.  (Payloads are bytes and may hold it.)  Raises SubmissionError ``invalid_text``."""
    if "\x00" in value:
        raise _fail("invalid_text", where, "must not contain U+0000 (NUL): it is stored in a "
                    "text column, which cannot hold it on every database")


def _opt_str(obj: dict[str, Any], name: str, *, max_len: int | None = None,
             nonempty: bool = False, column: bool = False) -> str | None:
    value = obj.get(name)
    if value is None:
        return None
    if not isinstance(value, str):
        raise _fail("invalid_type", name, f"must be a string, not {type(value).__name__}")
    _check_unicode(value, name)
    if column:
        check_column_text(value, name)
    if nonempty and not value:
        raise _fail("invalid_value", name, "must not be empty")
    if max_len is not None and len(value) > max_len:
        raise _fail("field_too_long", name, f"must be at most {max_len} characters")
    return value


def _normalize_result(result: Any) -> tuple[dict[str, Any], str | None]:
    """The ``to_dict`` shape from either wire shape, plus a flattened ``admission``."""
    if not isinstance(result, dict):
        raise _fail("invalid_type", "result", "must be an object (DiagnosticResult.to_dict())")
    dev = result.get("developer_fields", {})
    if not isinstance(dev, dict):
        raise _fail("invalid_type", "result.developer_fields", "must be an object")
    admission = None
    for key in sorted(result.keys() - RESULT_FIELDS):
        if key == "admission" and key not in dev:
            admission = result[key]
            if admission not in ADMISSIONS:
                raise _fail("invalid_admission", "result.admission", "must be ADMIT or BLOCKED")
            continue
        if key not in dev:
            raise _fail("unknown_field", f"result.{key}",
                        "not a DiagnosticResult field nor a copy of a developer_fields key "
                        "(flattened API shape)")
        if _exact(dev[key]) != _exact(result[key]):
            raise _fail("flattened_mismatch", f"result.{key}",
                        "top-level copy differs from developer_fields (the nested value is "
                        "authoritative; a flattened result must copy it exactly)")
    normalized = {k: result[k] for k in RESULT_FIELDS if k in result}
    normalized["developer_fields"] = dev
    return normalized, admission


def _encode_json_safe(value: Any, where: str) -> bytes:
    """Canonical stored bytes; on NaN/Infinity or a lone surrogate, walk to name the path."""
    try:
        return _result_encoder.encode(value).encode("utf-8")
    except (ValueError, UnicodeEncodeError, TypeError) as exc:
        _check_json_safe(value, where)
        raise _fail("non_json_value", where, f"not representable as JSON: {exc}") from None


def _exact(value: Any) -> str:
    """A spelling that tells 1 from 1.0, true from 1 and -0.0 from 0.0 at any depth."""
    try:
        return json.dumps(value, sort_keys=True)
    except (TypeError, ValueError):
        return repr(value)


def _validate_result(res: dict[str, Any]) -> None:
    """The result contract (:mod:`ledger.core.contract`); the first rule violated is the
    rejection.  ``is_authoritative`` may be left out: it is then stored as derived."""
    view = {"is_authoritative": res.get("proof_ref") is not None, **res}
    _reject_first(contract.violations(view, contract.SUBMISSION_RULES))
    att = res.get("attestation")
    if att is not None and (not isinstance(att, str) or not att):
        raise _fail("invalid_type", "result.attestation", "must be a non-empty string")
    _reject_first(contract.violations(view, contract.ATTESTATION_RULES))


def _reject_first(found: list[contract.Violation], prefix: str = "result.") -> None:
    if found:
        v = found[0]
        raise _fail(v.rejection, prefix + v.field, v.message)


def _evidence_preimage(sub: dict[str, Any], status: str, proof_ref: str | None,
                       require_evidence: bool = True) -> str | None:
    has_pre = sub.get("proof_preimage") is not None
    has_ev = "evidence" in sub
    if status != "VERIFIED":
        if has_pre or has_ev:
            name = "proof_preimage" if has_pre else "evidence"
            raise _fail("evidence_on_non_verified", name,
                        f"a {status} result has no proof_ref for evidence to bind to")
        return None
    if has_pre and has_ev:
        raise _fail("ambiguous_evidence", "evidence", "give proof_preimage or evidence, not both")
    if has_pre:
        pre = sub["proof_preimage"]
        if not isinstance(pre, str):
            raise _fail("invalid_type", "proof_preimage",
                        "must be a string (the exact bytes hashed into proof_ref)")
        _check_unicode(pre, "proof_preimage")
    elif has_ev:
        ev = sub["evidence"]
        kind = sub.get("evidence_kind", "string" if isinstance(ev, str) else "json")
        if kind not in ("json", "string"):
            raise _fail("invalid_value", "evidence_kind", "must be 'json' or 'string'")
        if (kind == "string") != isinstance(ev, str):
            raise _fail("evidence_kind_mismatch", "evidence_kind",
                        "'string' evidence must be a JSON string; 'json' evidence must not be")
        try:
            pre = proof_preimage(ev)
            pre.encode("utf-8")
        except (ValueError, UnicodeEncodeError) as exc:
            raise _fail("evidence_not_serializable", "evidence", str(exc)) from None
    elif not require_evidence:  # an imported result whose source kept no preimage
        return None
    else:
        raise _fail("missing_evidence", "proof_preimage",
                    "a VERIFIED result needs proof_preimage or evidence")
    if digest_text(pre.encode("utf-8")) != proof_ref:
        raise _fail("preimage_mismatch", "proof_preimage" if has_pre else "evidence",
                    "SHA-256 of the evidence preimage does not equal result.proof_ref")
    return pre


def parse_submission(obj: Any, *, parsed_by_loads: bool = False,
                     require_evidence: bool = True) -> Submission:
    """Validate one parsed submission object.  Raises SubmissionError.

    ``require_evidence=False`` is for imports only (ledger/ops/qwed_import.py): a
    VERIFIED result may then come without its preimage (the audit abstains on it).

    Objects that did not come through :func:`loads` (the Python API) get the same
    depth limit here and the same size limit on the bytes they become.
    """
    if not isinstance(obj, dict):
        raise _fail("not_an_object", None, "a submission must be a JSON object")
    if not parsed_by_loads:
        _check_depth(obj)
    unknown = sorted(obj.keys() - TOP_LEVEL_FIELDS)
    if unknown:
        raise _fail("unknown_field", unknown[0], "not a submission field; allowed: "
                    + ", ".join(sorted(TOP_LEVEL_FIELDS)))
    if "result" not in obj:
        raise _fail("missing_field", "result", "is required")
    engine = obj.get("engine")
    if engine is None:
        raise _fail("missing_field", "engine", "is required")
    if not isinstance(engine, str) or not ENGINE_RE.fullmatch(engine):
        raise _fail("invalid_engine", "engine", "must match [a-z0-9_.-]{1,64}")

    result, flat_admission = _normalize_result(obj["result"])
    _validate_result(result)
    status, proof_ref = result["status"], result.get("proof_ref")

    preimage = _evidence_preimage(obj, status, proof_ref, require_evidence)

    attestation = _opt_str(obj, "attestation", nonempty=True)
    res_att = result.pop("attestation", None)
    if attestation is not None and res_att is not None and attestation != res_att:
        raise _fail("attestation_conflict", "attestation",
                    "differs from result.attestation; give one token")
    attestation = attestation or res_att
    if attestation is not None and not attestation.isascii():
        raise _fail("invalid_value", "attestation", "a JWT is ASCII text")
    _reject_first(contract.violations({"status": status, "attestation": attestation},
                                      contract.ATTESTATION_RULES), prefix="")

    admission = obj.get("admission")
    if admission is not None and admission not in ADMISSIONS:
        raise _fail("invalid_admission", "admission", "must be ADMIT or BLOCKED")
    if admission is not None and flat_admission is not None and admission != flat_admission:
        raise _fail("admission_conflict", "admission", "differs from result.admission")
    admission = admission or flat_admission

    query = _opt_str(obj, "query")
    subject = _opt_str(obj, "subject", max_len=MAX_SHORT_TEXT, column=True)
    idem = _opt_str(obj, "idempotency_key", max_len=MAX_SHORT_TEXT, nonempty=True, column=True)
    meta = obj.get("meta")
    if meta is not None and not isinstance(meta, dict):
        raise _fail("invalid_type", "meta", "must be an object")

    result["is_authoritative"] = proof_ref is not None
    result.setdefault("proof_ref", None)
    dev = result["developer_fields"]
    cid = dev.get("constraint_id")
    constraint_id = cid if isinstance(cid, str) and len(cid) <= MAX_SHORT_TEXT else None
    if constraint_id is not None:  # longer ids are kept in the document only, not a column
        check_column_text(constraint_id, "result.developer_fields.constraint_id")

    payloads: dict[str, bytes | None] = {
        "result": _encode_json_safe(result, "result"),
        "preimage": preimage.encode("utf-8") if preimage is not None else None,
        "attestation": attestation.encode("ascii") if attestation else None,
        "query": query.encode("utf-8") if query is not None else None,
        "meta": _encode_json_safe(meta, "meta") if meta is not None else None,
    }
    size = sum(len(v) for v in payloads.values() if v is not None)
    if size > MAX_SUBMISSION_BYTES:
        raise SubmissionTooLarge(f"submission stores {size} bytes; the limit is "
                                 f"{MAX_SUBMISSION_BYTES} bytes", code="too_large", field=None)
    return Submission(
        engine=engine, status=status, agent_message=result["agent_message"],
        developer_fields=dev, proof_ref=proof_ref, constraint_id=constraint_id,
        subject=subject, idempotency_key=idem, admission=admission, attestation=attestation,
        query=query, payloads=payloads,
    )


def parse_submission_bytes(raw: bytes | str) -> Submission:
    return parse_submission(loads(raw), parsed_by_loads=True)
