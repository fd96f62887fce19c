"""Every HTTP error is an RFC 9457 problem document (``application/problem+json``) whose
status comes from the one category table, and the OpenAPI document declares every error
status with the problem schema on every operation."""

from __future__ import annotations

import random
import uuid
from typing import Any

import httpx
import pytest

from ledger.api.errors import PROBLEM_MEDIA_TYPE, rejection_response
from ledger.api.schemas import PROBLEM_SCHEMA
from ledger.demo.samples import math_verified
from ledger.errors import (
    CATEGORY_STATUS,
    IdempotencyConflict,
    LedgerError,
    SubmissionError,
    SubmissionTooLarge,
)
from tests.api.server import Server, api  # noqa: F401 - fixture

PROBLEM_MEMBERS = {"type", "title", "status", "detail", "code", "error"}
# answered by any operation: body limit, slow client (408), header limit (431), wrong
# method, a bug
EVERY_OPERATION = {"400", "405", "408", "413", "431", "500"}


def assert_problem(r: httpx.Response, status: int, code: str,
                   field: str | None = None) -> dict[str, Any]:
    """``r`` is the problem document of ``code`` at ``status``, old ``error`` member kept."""
    assert r.status_code == status, r.text
    assert r.headers["content-type"] == PROBLEM_MEDIA_TYPE, r.headers
    body = r.json()
    assert PROBLEM_MEMBERS <= body.keys(), body
    assert body["type"] == f"urn:ledger:problem:{code}" and body["code"] == code
    assert body["status"] == status and isinstance(body["title"], str) and body["title"]
    assert body["detail"] == body["error"]["message"] and body["error"]["code"] == code
    assert body.get("field") == body["error"].get("field")
    if field is not None:
        assert body["field"] == field, body
    return body


def test_errors_of_every_layer_are_problem_documents(api: Server) -> None:  # noqa: F811
    with httpx.Client(base_url=api.base_url, timeout=30) as anon:
        r = anon.get("/v1/entries")
        assert_problem(r, 401, "missing_token")
        assert r.headers["www-authenticate"] == "Bearer"
    with api.client("agent") as c:
        r = c.post("/v1/entries", json={})
        assert_problem(r, 403, "forbidden")
        assert "insufficient_scope" in r.headers["www-authenticate"]
    with api.client("auditor") as c:
        assert_problem(c.get("/v1/nothing-here"), 404, "no_such_route")
        assert_problem(c.delete("/v1/entries"), 405, "method_not_allowed")
        assert_problem(c.get("/v1/entries/99999999"), 404, "not_found", "seq")
        assert_problem(c.get("/v1/entries", params={"limit": 0}), 400, "bad_request")
        assert_problem(c.get("/v1/entries", params={"stauts": "x"}), 400, "unknown_parameter")
        # the body limit answers from its middleware, before the application
        assert_problem(c.request("GET", "/v1/health", content=b"x" * 70_000), 413,
                       "too_large")


def test_rejections_take_the_status_of_their_category(api: Server) -> None:  # noqa: F811
    sub = math_verified(7, random.Random(7))
    sub["subject"] = uuid.uuid4().hex
    key = f"k-{uuid.uuid4().hex}"
    with api.client("producer") as c:
        body = assert_problem(c.post("/v1/entries", json={**sub, "bogus": 1}), 422,
                              "unknown_field", "bogus")
        assert body["status"] == CATEGORY_STATUS["invalid"][1]
        assert c.post("/v1/entries", json=sub, headers={"Idempotency-Key": key}
                      ).status_code == 201
        other = {**sub, "subject": uuid.uuid4().hex}
        body = assert_problem(c.post("/v1/entries", json=other,
                                     headers={"Idempotency-Key": key}),
                              409, "idempotency_conflict", "idempotency_key")
        assert body["error"]["detail"]["seq"] >= 0


@pytest.mark.parametrize("exc", [
    SubmissionError("bad", code="unknown_field", field="x"),
    SubmissionTooLarge("big"),
    IdempotencyConflict("again", field="idempotency_key", detail={"seq": 3}),
])
def test_rejection_response_uses_the_one_table(exc: LedgerError) -> None:
    error = exc.to_dict()  # what AppendResult.error holds
    r = rejection_response(error)
    assert r.status_code == CATEGORY_STATUS[exc.category][1] == exc.http_status
    assert r.media_type == PROBLEM_MEDIA_TYPE


def test_openapi_declares_every_error_status_with_the_problem_schema(
        api: Server) -> None:  # noqa: F811
    with api.client("auditor") as c:
        doc = c.get("/openapi.json").json()
    operations = [(m, p, op) for p, ops in doc["paths"].items() for m, op in ops.items()]
    assert len(operations) >= 8
    for method, path, op in operations:
        declared = op["responses"]
        assert EVERY_OPERATION <= declared.keys(), (method, path, sorted(declared))
        for status, resp in declared.items():
            if int(status) >= 400:
                assert list(resp["content"]) == [PROBLEM_MEDIA_TYPE], (method, path, status)
                assert resp["content"][PROBLEM_MEDIA_TYPE]["schema"]["required"] == \
                    PROBLEM_SCHEMA["required"]
        if "security" in op or path.startswith("/v1/entries"):
            assert {"401", "403"} <= declared.keys(), (method, path)
    append = doc["paths"]["/v1/entries"]["post"]["responses"]
    assert {"409", "422", "503"} <= append.keys()


def test_an_overloaded_service_asks_to_retry_after_a_second():
    from ledger.api.errors import Overloaded, ledger_error_response

    r = ledger_error_response(Overloaded("the append queue is full"))
    assert r.status_code == 503 and r.headers["Retry-After"] == "1"
    assert r.media_type == PROBLEM_MEDIA_TYPE


def test_a_405_allows_every_method_its_path_serves(api: Server) -> None:  # noqa: F811
    """RFC 9110 §15.5.6: ``Allow`` lists the methods of every route of the path (before:
    only those of the first route, ``POST`` for /v1/entries and /v1/holds)."""
    with api.client("auditor") as c:
        for path, allowed in (("/v1/entries", "GET, POST"),
                              ("/v1/holds", "GET, POST"),
                              ("/v1/entries/batch", "POST"),
                              ("/v1/entries/0", "GET")):
            r = c.request("PATCH", path)
            assert_problem(r, 405, "method_not_allowed")
            assert r.headers["allow"] == allowed, path
            assert c.request("OPTIONS", path).headers["allow"] == allowed, path


@pytest.mark.parametrize("path", ["/v1/entries", "/v1/export"])
@pytest.mark.parametrize("name", ["since", "until"])
def test_an_empty_time_filter_is_refused_not_ignored(api: Server, path: str,  # noqa: F811
                                                     name: str) -> None:
    """``?since=`` is not an RFC 3339 time: refused like any other (before: read as no
    filter, 200 with every entry)."""
    with api.client("auditor") as c:
        body = assert_problem(c.get(path, params={name: ""}), 400, "usage", name)
        assert "RFC 3339" in body["detail"]
        assert c.get(path, params={name: "2000-01-01T00:00:00Z"}).status_code == 200
