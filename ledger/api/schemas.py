"""OpenAPI fragments: request bodies are read as exact bytes (so the ledger stores and
quarantines what was sent), and documented here rather than parsed by pydantic."""

from __future__ import annotations

from typing import Any

from ledger.api.errors import PROBLEM_MEDIA_TYPE
from ledger.core.submission import MAX_SHORT_TEXT

ERROR_OBJECT: dict[str, Any] = {
    "type": "object", "required": ["code", "message"],
    "properties": {"code": {"type": "string"}, "message": {"type": "string"},
                   "field": {"type": "string"}, "detail": {"type": "object"}}}

PROBLEM_SCHEMA: dict[str, Any] = {
    "type": "object", "required": ["type", "title", "status", "detail", "code", "error"],
    "description": "RFC 9457 problem details; `code`, `field` and `error` (the error object "
                   "of earlier versions) are extension members (docs/http.md#errors)",
    "properties": {
        "type": {"type": "string", "format": "uri", "pattern": "^urn:ledger:problem:"},
        "title": {"type": "string"}, "status": {"type": "integer"},
        "detail": {"type": "string"}, "code": {"type": "string"},
        "field": {"type": "string"}, "error": ERROR_OBJECT,
    },
}

RESULT_SCHEMA: dict[str, Any] = {
    "type": "object", "required": ["status", "agent_message"],
    "description": "DiagnosticResult.to_dict(), or the flattened upstream API shape",
    "properties": {
        "status": {"type": "string", "enum": ["VERIFIED", "UNVERIFIABLE", "BLOCKED"]},
        "agent_message": {"type": "string", "minLength": 1},
        "developer_fields": {"type": "object"},
        "proof_ref": {"type": ["string", "null"], "pattern": "^sha256:[0-9a-f]{64}$"},
        "is_authoritative": {"type": "boolean"},
        "attestation": {"type": "string"},
    },
}

SUBMISSION_SCHEMA: dict[str, Any] = {
    "type": "object", "required": ["result", "engine"], "additionalProperties": False,
    "description": "One submission (docs/submissions.md); at most 1 MiB, nesting depth 64",
    "properties": {
        "result": RESULT_SCHEMA,
        "engine": {"type": "string", "pattern": "^[a-z0-9_.-]{1,64}$"},
        "proof_preimage": {"type": "string"},
        "evidence": {},
        "evidence_kind": {"type": "string", "enum": ["json", "string"]},
        "attestation": {"type": "string"},
        "query": {"type": "string"},
        "admission": {"type": "string", "enum": ["ADMIT", "BLOCKED"]},
        "subject": {"type": "string", "maxLength": MAX_SHORT_TEXT},
        "idempotency_key": {"type": "string", "minLength": 1, "maxLength": MAX_SHORT_TEXT},
        "meta": {"type": "object"},
    },
}

APPENDED_SCHEMA: dict[str, Any] = {
    "type": "object", "required": ["ok", "seq", "entry_hash", "recorded_at", "receipt"],
    "properties": {
        "ok": {"type": "boolean"}, "seq": {"type": "integer"},
        "entry_hash": {"type": "string"}, "recorded_at": {"type": "string"},
        "replayed": {"type": "boolean"},
        "receipt": {"type": "string", "description": "EdDSA JWT (docs/http.md#receipts)"},
    },
}


def _json(schema: dict[str, Any]) -> dict[str, Any]:
    return {"content": {"application/json": {"schema": schema}}}


_ERROR_TEXT = {
    400: "Malformed request", 401: "Missing or invalid token", 403: "Role not allowed",
    404: "Not found", 405: "Method not allowed on this path",
    408: "Request head or body not complete in time", 409: "Conflict",
    413: "Body too large", 422: "Rejected submission / invalid request",
    431: "Request header fields too large", 500: "Internal error (a bug; logged)",
    503: "Database unreachable or overloaded",
}


def _errors(*codes: int) -> dict[int | str, dict[str, Any]]:
    problem = {"content": {PROBLEM_MEDIA_TYPE: {"schema": PROBLEM_SCHEMA}}}
    return {c: {"description": _ERROR_TEXT[c], **problem} for c in codes}


# what any operation can answer (body limit, slow client, header limit, wrong method, a bug)
COMMON_ERRORS = _errors(400, 405, 408, 413, 431, 500)

SUBMISSION_BODY = {"requestBody": {"required": True, **_json(SUBMISSION_SCHEMA)}}
BATCH_BODY = {"requestBody": {"required": True, **_json(
    {"type": "array", "items": SUBMISSION_SCHEMA, "maxItems": 1000})}}

APPEND_RESPONSES: dict[int | str, dict[str, Any]] = {
    201: {"description": "Appended (durable)", **_json(APPENDED_SCHEMA)},
    200: {"description": "Replayed (same idempotency key, same content)",
          **_json(APPENDED_SCHEMA)},
    **_errors(400, 401, 403, 409, 413, 422, 503),
}
BATCH_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {"description": "One result per item, in order", **_json({
        "type": "object", "properties": {"results": {"type": "array", "items": {
            "type": "object"}}}})},
    **_errors(400, 401, 403, 413, 422, 503),
}
READ_ERRORS = _errors(400, 401, 403, 404, 422, 503)
CUSTODY_ERRORS = _errors(400, 401, 403, 404, 409, 422, 503)  # 409: a hold, a minimum retention


# POST /v1/redactions, /v1/holds, /v1/holds/{seq}/release (docs/http.md#custody)
CUSTODY_FIELDS: dict[str, Any] = {
    "subject": {"type": "string", "minLength": 1, "maxLength": MAX_SHORT_TEXT},
    "seqs": {"type": "array", "items": {"type": "integer", "minimum": 0}},
    "payloads": {"type": "array", "items": {"type": "string", "enum": [
        "all", "evidence", "result", "preimage", "attestation", "query", "meta", "subject"]}},
    "reason": {"type": "string", "minLength": 1, "maxLength": 4096},
    "reference": {"type": ["string", "null"], "maxLength": 4096},
    "keep_attestation": {"type": "boolean"}, "override_minimum": {"type": ["string", "null"]},
    "dry_run": {"type": "boolean"}, "report": {"type": "boolean"},
}


def custody_body(fields: tuple[str, ...]) -> dict[str, Any]:
    """The request body of a custody route: an object of ``fields`` (``reason`` required)."""
    return {"requestBody": {"required": True, **_json({
        "type": "object", "required": ["reason"], "additionalProperties": False,
        "properties": {f: CUSTODY_FIELDS[f] for f in fields}})}}
