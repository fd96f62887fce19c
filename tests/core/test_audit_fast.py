"""The audit's fused pass for clean v2 result rows (``ChainAuditor._clean_v2_result``) is
pinned to the plain checks: over a real ledger (realistic results and the upstream
fixtures, attested rows judged against a real trust store) tampered in hypothesis-chosen
ways -- bytes flipped, columns changed, envelopes and result documents rewritten with their
hashes and commitments recomputed so that only the deeper checks can tell, payloads dropped
or salted wrongly, rows swapped or deleted, redactions and policy rules added -- the walk with
the fast pass and the walk without it give the same outcome for every row and end in the same
state."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ledger import Ledger
from ledger.clock import FixedClock
from ledger.core.audit import ChainAuditor
from ledger.core.entry import PAYLOAD_MAP_V2, PAYLOAD_TAG, body_hash, entry_hash, genesis_hash
from ledger.core.policy import load_policy, parse_policy
from ledger.crypto.trust import row_judge
from ledger.demo.samples import realistic
from ledger.ops.trust_store import load_trust_store
from ledger.store.db import connect
from ledger.store.entries import iter_entry_pages
from tests import tamper as T


@pytest.fixture(scope="module")
def walk(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    url = f"sqlite:///{tmp_path_factory.mktemp('fast') / 'l.db'}"
    L = Ledger.init(url, clock=FixedClock(T.FIXTURE_TIME_US, step_us=1000))
    L.trust_issuer(T.ISSUER, T.JWKS)
    res = L.append_many(realistic(30) + T.fixtures())
    assert all(r.ok for r in res)
    with connect(L.engine) as conn:
        rows = [x for page in iter_entry_pages(conn, 0, len(res), 1000) for x in page]
    judge = row_judge(load_trust_store(L.engine))
    lid = L.meta.ledger_id
    L.close()
    return _Walk(rows=rows, judge=judge, ledger_id=lid)


class _Walk(dict):  # type: ignore[type-arg]
    def __repr__(self) -> str:  # hypothesis prints the arguments of a failing example
        return f"<ledger of {len(self['rows'])} rows>"


def _flip(b: bytes | str, at: int) -> bytes:
    if isinstance(b, str):
        b = b.encode("utf-8", "surrogateescape")
    at %= max(len(b), 1)
    return b[:at] + bytes([b[at] ^ 0x01]) + b[at + 1:] if b else b"\x00"


def _rehash(row: Any, env: dict[str, Any]) -> Any:
    """``row`` with envelope ``env`` and its body and entry hashes recomputed."""
    envelope = json.dumps(env, sort_keys=True, separators=(",", ":")).encode()
    body = body_hash(envelope)
    return row._replace(envelope=envelope, body_hash=body,
                        entry_hash=entry_hash(row.prev_hash, row.seq, row.recorded_at, body))


def _recommit(row: Any, blobs: dict[int, Any], slot: int, name: str, data: bytes) -> Any:
    """Store ``data`` in ``slot`` and make the envelope commit to it (hashes recomputed)."""
    salt = blobs[slot][0]
    blobs[slot] = (salt, data)
    if not isinstance(salt, bytes):  # an earlier tamper took the salt: nothing to commit to
        return row
    env = json.loads(row.envelope)
    env["payloads"][name] = "sha256:" + hashlib.sha256(PAYLOAD_TAG + salt + data).hexdigest()
    return _rehash(row, env)


KINDS = ["flip_envelope", "flip_body", "flip_prev", "flip_entry", "seq", "time_back",
         "column_engine", "column_status", "subject", "env_status", "env_proof_ref",
         "env_ledger", "env_v", "env_kind", "env_drop_digest", "env_engine",
         "drop_payload", "flip_payload", "salt_short", "salt_none", "doc_status",
         "doc_message", "doc_authoritative", "doc_not_json", "preimage_changed",
         "swap", "delete", "redaction", "text_envelope", "attestation_swap", "time_far",
         "env_bigint", "doc_bigint"]
# Integers beyond 64 bits, which orjson (the fused pass's parser) reads as floats and
# json.loads (the plain path's) keeps exact; 2**64 + 1 and 2**64 + 2 read as the same float.
BIG = [2**64, 2**64 + 1, 2**64 + 2, -(2**63) - 1, 10**30]
ENV_BIG_FIELDS = ["engine", "constraint_id", "proof_ref", "status", "att_kid", "v", "ledger",
                  "payloads", "idempotency_key"]
DOC_BIG_FIELDS = ["status", "proof_ref", "is_authoritative", "agent_message",
                  "advisory_only"]


def _tamper(rows: list[Any], kind: str, i: int, at: int,
            redactions: dict[Any, int]) -> list[Any]:
    row, blobs = rows[i]
    blobs = dict(blobs)
    try:
        env = json.loads(row.envelope) if isinstance(row.envelope, bytes) else None
    except ValueError:
        env = None
    if not isinstance(env, dict):  # an earlier tamper made it unreadable: only raw ones now
        env = None
        if kind.startswith(("env_", "doc_")) or kind in ("preimage_changed", "redaction",
                                                         "text_envelope"):
            kind = "flip_payload"
    slots = PAYLOAD_MAP_V2["result"]
    if kind == "flip_envelope":
        row = row._replace(envelope=_flip(row.envelope, at))
    elif kind in ("flip_body", "flip_prev", "flip_entry"):
        col = {"flip_body": "body_hash", "flip_prev": "prev_hash",
               "flip_entry": "entry_hash"}[kind]
        row = row._replace(**{col: _flip(getattr(row, col), at)})
    elif kind == "seq":
        row = row._replace(seq=row.seq + 1 + at % 3)
    elif kind == "time_back":
        row = row._replace(recorded_at=row.recorded_at - 10_000_000)
    elif kind == "column_engine":
        row = row._replace(engine="other")
    elif kind == "column_status":
        row = row._replace(status="BLOCKED" if row.status != "BLOCKED" else "VERIFIED")
    elif kind == "subject":
        row = row._replace(subject="someone")
    elif kind.startswith("env_") and env is not None:
        field = kind[4:]
        if field == "status":
            env["status"] = "UNVERIFIABLE" if env.get("status") == "VERIFIED" else "VERIFIED"
        elif field == "proof_ref":
            env["proof_ref"] = "sha256:" + "0" * 64 if env.get("proof_ref") else None
        elif field == "ledger":
            env["ledger"] = "someone-else"
        elif field == "v":
            env["v"] = 1
        elif field == "kind":
            env["kind"] = "audit_run"
        elif field == "drop_digest" and isinstance(env.get("payloads"), dict):
            names = sorted(env["payloads"])
            if names:
                del env["payloads"][names[at % len(names)]]
        elif field == "engine":
            env["engine"] = "fact"
            row = row._replace(engine="fact")
        elif field == "bigint":
            name = ENV_BIG_FIELDS[at % len(ENV_BIG_FIELDS)]
            big = BIG[at // len(ENV_BIG_FIELDS) % len(BIG)]
            if name == "payloads" and isinstance(env.get("payloads"), dict) and env["payloads"]:
                env["payloads"][sorted(env["payloads"])[at % len(env["payloads"])]] = big
            else:
                env[name] = big
                if name in row._fields:  # the column says the same (as text, as SQLite would)
                    row = row._replace(**{name: str(big)})
        row = _rehash(row, env)
    elif kind in ("drop_payload", "flip_payload", "salt_short", "salt_none"):
        if blobs:
            slot = sorted(blobs)[at % len(blobs)]
            salt, data = blobs[slot]
            if kind == "drop_payload":
                del blobs[slot]
            elif kind == "flip_payload":
                blobs[slot] = (salt, _flip(data, at))
            elif kind == "salt_short":
                blobs[slot] = (salt[:-1] if salt else b"x", data)
            else:
                blobs[slot] = (None, data)
    elif kind.startswith("doc_") and slots["result"] in blobs and env and env.get("kind") == "result" \
            and env.get("v") == 2 and isinstance(env.get("payloads"), dict):
        try:
            doc = json.loads(blobs[slots["result"]][1])
        except ValueError:
            doc = None
        if isinstance(doc, dict):
            if kind == "doc_status":
                doc["status"] = "BLOCKED"
            elif kind == "doc_message":
                doc["agent_message"] = "  "
            elif kind == "doc_authoritative":
                doc["is_authoritative"] = not doc.get("is_authoritative")
            elif kind == "doc_bigint":
                name = DOC_BIG_FIELDS[at % len(DOC_BIG_FIELDS)]
                big = BIG[at // len(DOC_BIG_FIELDS) % len(BIG)]
                if name == "advisory_only":
                    doc.setdefault("developer_fields", {}).setdefault(
                        "advisory_checks", [{"constraint_id": "c"}])[0]["advisory_only"] = big
                else:
                    doc[name] = big
            data = json.dumps(doc).encode() if kind != "doc_not_json" else b"{not json"
            row = _recommit(row, blobs, slots["result"], "result", data)
    elif kind == "preimage_changed" and slots["preimage"] in blobs and env and env.get("v") == 2 \
            and env.get("kind") == "result" and isinstance(env.get("payloads"), dict):
        row = _recommit(row, blobs, slots["preimage"], "preimage",
                        blobs[slots["preimage"]][1] + b" ")
    elif kind == "attestation_swap" and slots["attestation"] in blobs and env \
            and isinstance(env.get("payloads"), dict) and "attestation" in env["payloads"]:
        others = [b[slots["attestation"]][1] for _, b in rows
                  if slots["attestation"] in b and b[slots["attestation"]][1]
                  != blobs[slots["attestation"]][1]]
        if others:
            row = _recommit(row, blobs, slots["attestation"], "attestation",
                            others[at % len(others)])
    elif kind == "time_far" and isinstance(row.envelope, bytes) \
            and isinstance(row.body_hash, bytes) and isinstance(row.prev_hash, bytes):
        t = row.recorded_at + 10 * 365 * 86400 * 1_000_000
        row = row._replace(recorded_at=t, entry_hash=entry_hash(row.prev_hash, row.seq, t,
                                                                 row.body_hash))
    elif kind == "swap" and i + 1 < len(rows):
        rows = list(rows)
        rows[i], rows[i + 1] = rows[i + 1], rows[i]
        return rows
    elif kind == "delete":
        return rows[:i] + rows[i + 1:]
    elif kind == "redaction" and isinstance(env.get("payloads"), dict):
        names = sorted(env["payloads"])
        if names:
            redactions[(row.seq, names[at % len(names)])] = 10_000
    elif kind == "text_envelope" and isinstance(row.envelope, bytes):
        row = row._replace(envelope=row.envelope.decode("utf-8", "surrogateescape"))
    rows = list(rows)
    rows[i] = (row, blobs)
    return rows


def _walk(rows: list[Any], walk: dict[str, Any], fast: bool, redactions: dict[Any, int],
          policy: Any, judge: bool) -> tuple[list[Any], tuple[Any, ...]]:
    auditor = ChainAuditor(walk["ledger_id"], 0, genesis_hash(walk["ledger_id"]), 0, policy,
                           walk["judge"] if judge else None, redactions=dict(redactions))
    auditor.fast = fast
    out = []
    for row, blobs in rows:
        o = auditor.check_row(row, blobs)
        out.append((o.seq, [f.to_dict() for f in o.findings],
                    [a.to_dict() for a in o.abstentions],
                    [g.to_dict() for g in o.gap_findings], o.verified_checks))
    return out, (auditor.expected_seq, auditor.prev_hash, auditor.prev_failed_hash,
                 auditor.last_time)


STRICT = parse_policy({"format": "ledger-policy/1", "rules": [
    {"id": "no-math-verified", "engine": "math", "status": "VERIFIED", "message": "m"}]})


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.sampled_from(KINDS), st.integers(0, 10_000),
                          st.integers(0, 10_000)), min_size=0, max_size=4),
       st.sampled_from(["default", "strict"]), st.booleans())
def test_fast_pass_gives_the_plain_outcome(walk: dict[str, Any], tampers: list[Any],
                                           policy_name: str, judge: bool) -> None:
    rows = list(walk["rows"])
    redactions: dict[Any, int] = {}
    for kind, i, at in tampers:
        if rows:
            rows = _tamper(rows, kind, i % len(rows), at, redactions)
    policy = STRICT if policy_name == "strict" else load_policy()
    fast = _walk(rows, walk, True, redactions, policy, judge)
    plain = _walk(rows, walk, False, redactions, policy, judge)
    assert fast == plain


def test_untampered_rows_take_the_fast_pass(walk: dict[str, Any]) -> None:
    """Not vacuous: on the clean ledger most rows (every v2 result, attested ones too) pass
    the fused check, and the result is the plain one."""
    auditor = ChainAuditor(walk["ledger_id"], 0, genesis_hash(walk["ledger_id"]), 0,
                           load_policy(), walk["judge"])
    fast_rows = 0
    for r, b in walk["rows"]:
        if auditor._clean_v2_result(r, b):
            fast_rows += 1
        else:  # the plain checks move the walk on past a row the fused pass left
            auditor.check_row(r, b)
    assert fast_rows >= 30, fast_rows
    plain = _walk(walk["rows"], walk, False, {}, load_policy(), True)
    assert all(not f and not a for _, f, a, _, _ in plain[0][:30])


@pytest.mark.parametrize("kind", ["env_bigint", "doc_bigint"])
def test_integers_beyond_64_bits_give_the_plain_outcome_in_every_field(
        walk: dict[str, Any], kind: str) -> None:
    """Every field and every big integer of the two tampers above, on a verified row: the
    fused pass reads such an integer as a float (orjson), the plain path exactly; both must
    give the same outcome (the row fails in both, or passes in both)."""
    fields = ENV_BIG_FIELDS if kind == "env_bigint" else DOC_BIG_FIELDS
    i = next(n for n, (r, b) in enumerate(walk["rows"])
             if r.kind == "result" and r.proof_ref is not None and 1 in b)
    for at in range(len(fields) * len(BIG)):
        rows = _tamper(list(walk["rows"]), kind, i, at, {})
        policy = load_policy()
        fast = _walk(rows, walk, True, {}, policy, True)
        assert fast == _walk(rows, walk, False, {}, policy, True), (
            fields[at % len(fields)], BIG[at // len(fields) % len(BIG)])
        assert fast[0][i][1], "the tampered row must fail"


def test_every_column_the_fused_pass_compares_is_a_string_column() -> None:
    """The fused pass reads the documents with orjson alone (ledger.core.audit): sound only
    while every column it compares an envelope field with holds text (SQLite's TEXT affinity
    then turns any number written into it into text), so that no float read from an integer
    beyond 64 bits can equal a stored value that the exact integer would not."""
    from sqlalchemy import String

    from ledger.core.entry import COLUMN_MAP_V2
    from ledger.store.schema import entries

    for column in COLUMN_MAP_V2["result"].values():
        assert isinstance(entries.c[column].type, String), column
