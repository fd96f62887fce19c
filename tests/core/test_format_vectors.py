"""Entry-format vectors (tests/vectors/entries.json) against two implementations.

Part (a) is an independent verifier written from docs/format.md with only
``hashlib``, ``json``, ``struct`` (and ``base64``/``datetime`` to read the JWT
header, compute RFC 7638 thumbprints and format the time): it must not import
the ledger's hashing code, so that the documented format, not the code, is what
the vectors pin.  It covers every kind the vectors hold: ``result``,
``key_event`` and ``audit_run`` (docs/format.md sections 4 and 10).  Part (b)
checks the ledger's own functions (and, for the non-result kinds, the real
append and audit paths on a SQLite ledger) produce the same bytes, so drift in
either is caught.  Part (c) checks the committed file matches scripts/gen-vectors
and that docs/format.md shows the generator's worked vectors verbatim.
"""

from __future__ import annotations

import base64
import copy
import hashlib
import json
import re
import struct
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
VECTORS = REPO / "tests" / "vectors" / "entries.json"
GENERATOR = REPO / "scripts" / "gen-vectors"
FORMAT_DOC = REPO / "docs" / "format.md"

# ---------------------------------------------------------------------------
# (a) Independent implementation of docs/format.md (hashlib, json, struct only)
# ---------------------------------------------------------------------------

ENVELOPE_TAG = b"ledger.envelope.v1\x00"
ENTRY_TAG = b"ledger.entry.v1\x00"
GENESIS_TAG = b"ledger.genesis.v1\x00"
MAX_SAFE = 2**53 - 1

RESULT_ENVELOPE_KEYS = {
    "v", "ledger", "kind", "engine", "status", "constraint_id", "proof_ref", "subject",
    "producer", "idempotency_key", "admission", "att_verdict", "att_kid", "att_iss", "payloads",
}
RESULT_PAYLOAD_NAMES = {"result", "preimage", "attestation", "query", "meta"}
TO_DICT_KEYS = ("status", "agent_message", "developer_fields", "proof_ref", "is_authoritative")

# docs/format.md section 10: the other kinds' envelopes and documents.
KEY_EVENT_ENVELOPE_KEYS = {"v", "ledger", "kind", "action", "issuer", "kid", "thumbprint",
                           "producer", "payloads"}
AUDIT_RUN_ENVELOPE_KEYS = {"v", "ledger", "kind", "outcome", "producer", "payloads"}
IMPORT_ENVELOPE_KEYS = {"v", "ledger", "kind", "source", "outcome", "producer", "payloads"}
REVERIFY_RUN_ENVELOPE_KEYS = {"v", "ledger", "kind", "outcome", "producer", "payloads"}
ENVELOPE_KEYS = {"result": RESULT_ENVELOPE_KEYS, "key_event": KEY_EVENT_ENVELOPE_KEYS,
                 "audit_run": AUDIT_RUN_ENVELOPE_KEYS, "import": IMPORT_ENVELOPE_KEYS,
                 "reverify_run": REVERIFY_RUN_ENVELOPE_KEYS}
PAYLOAD_NAMES = {"result": RESULT_PAYLOAD_NAMES, "key_event": {"event"},
                 "audit_run": {"report"}, "import": {"report"}, "reverify_run": {"report"}}
# docs/format.md section 10.4: the ledger-reverify-run/1 document
REVERIFY_RUN_DOC_KEYS = {"format", "run_id", "resumed", "range", "filters", "limits", "summary",
                         "by_engine", "reexecutors", "workers", "worker_restarts", "outcome",
                         "head_hash", "outcomes_digest", "started_at", "finished_at"}
REVERIFY_COPIED = ("run_id", "resumed", "range", "filters", "summary", "by_engine",
                   "reexecutors", "workers", "worker_restarts", "outcome", "started_at",
                   "finished_at")
REVERIFY_OUTCOMES = ("agrees", "disagrees", "not_reexecutable", "engine_error")
IMPORT_DOC_TYPES = {"type": str, "source": str, "label": (str, type(None)), "namespace": str,
                    "outcome": str, "hmac": str, "rows": int, "imported": int,
                    "replayed": int, "legacy": int, "quarantined": int,
                    "organizations": dict}  # docs/format.md section 10.3
EVENT_DOC_KEYS = {
    "trust": {"action", "issuer", "kid", "thumbprint", "jwk", "reason"},
    "retire": {"action", "issuer", "kid", "thumbprint", "reason"},
    "revoke": {"action", "issuer", "kid", "thumbprint", "reason", "compromised_since_us"},
}
AUDIT_RUN_DOC_KEYS = {  # by format: /2 adds the abstention counts (section 10.2)
    "ledger-audit-run/1": {"format", "range", "summary", "findings", "outcome", "head_hash",
                           "report_digest", "finished_at"}}
AUDIT_RUN_DOC_KEYS["ledger-audit-run/2"] = AUDIT_RUN_DOC_KEYS["ledger-audit-run/1"] | {
    "abstentions", "redacted"}
OUTCOMES = {"passed", "failed", "unverified"}


def sha256(data: bytes) -> bytes:
    return hashlib.sha256(data).digest()


def digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in pairs:
        assert k not in out, f"duplicate key {k!r}"
        out[k] = v
    return out


def _check_subset(value: Any) -> None:
    """The envelope subset: ASCII keys, no floats, safe integers, valid Unicode."""
    if value is None or isinstance(value, bool):
        return
    if isinstance(value, int):
        assert -MAX_SAFE <= value <= MAX_SAFE
    elif isinstance(value, str):
        value.encode("utf-8")  # raises on lone surrogates
    elif isinstance(value, list):
        for v in value:
            _check_subset(v)
    elif isinstance(value, dict):
        for k, v in value.items():
            assert k.isascii(), f"non-ASCII key {k!r}"
            _check_subset(v)
    else:
        raise AssertionError(f"{type(value).__name__} is not allowed in an envelope")


def canonical(value: Any) -> bytes:
    """RFC 8785 bytes within the envelope subset (docs/format.md, "Envelope")."""
    _check_subset(value)
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                      allow_nan=False).encode("utf-8")


def stored_json(value: Any) -> bytes:
    """Result and meta payload encoding (docs/format.md, "The result payload")."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                      allow_nan=False).encode("utf-8")


def genesis(ledger_id: str) -> bytes:
    return sha256(GENESIS_TAG + ledger_id.encode("utf-8"))


def body_of(envelope: bytes) -> bytes:
    return sha256(ENVELOPE_TAG + envelope)


def link_of(prev: bytes, seq: int, t_us: int, body: bytes) -> bytes:
    assert len(prev) == 32 and len(body) == 32 and 0 <= seq < 2**63 and 0 <= t_us < 2**63
    return sha256(ENTRY_TAG + prev + struct.pack(">QQ", seq, t_us) + body)


def rfc3339_us(t_us: int) -> str:
    secs, frac = divmod(t_us, 1_000_000)
    return datetime.fromtimestamp(secs, UTC).strftime("%Y-%m-%dT%H:%M:%S") + f".{frac:06d}Z"


def _jwt_part(token: str, index: int) -> dict[str, Any]:
    part = token.split(".")[index]
    return json.loads(base64.urlsafe_b64decode(part + "=" * (-len(part) % 4)))


def expected_from_submission(sub: dict[str, Any], producer: str | None,
                             ledger_id: str) -> tuple[dict[str, bytes | None], dict[str, Any]]:
    """Payload bytes and envelope document derived from a (valid) submission by the
    documented rules; inputs are assumed to have passed validation."""
    result = sub["result"]
    proof_ref = result.get("proof_ref")
    normalized = {k: result[k] for k in TO_DICT_KEYS if k in result}
    normalized["developer_fields"] = result.get("developer_fields", {})
    normalized["proof_ref"] = proof_ref
    normalized["is_authoritative"] = proof_ref is not None

    if sub.get("proof_preimage") is not None:
        preimage: str | None = sub["proof_preimage"]
    elif "evidence" in sub:
        ev = sub["evidence"]
        preimage = ev if isinstance(ev, str) else json.dumps(ev, sort_keys=True)
    else:
        preimage = None
    attestation = sub.get("attestation") or result.get("attestation")
    meta = sub.get("meta")
    payloads = {
        "result": stored_json(normalized),
        "preimage": None if preimage is None else preimage.encode("utf-8"),
        "attestation": None if attestation is None else attestation.encode("ascii"),
        "query": None if sub.get("query") is None else sub["query"].encode("utf-8"),
        "meta": None if meta is None else stored_json(meta),
    }
    cid = normalized["developer_fields"].get("constraint_id")
    if attestation is None:
        att = {"att_verdict": "none", "att_kid": None, "att_iss": None}
    else:
        kid, iss = _jwt_part(attestation, 0).get("kid"), _jwt_part(attestation, 1).get("iss")
        att = {"att_verdict": "unchecked", "att_kid": kid if isinstance(kid, str) else None,
               "att_iss": iss if isinstance(iss, str) else None}
    envelope = {
        "v": 1, "ledger": ledger_id, "kind": "result",
        "engine": sub["engine"], "status": result["status"],
        "constraint_id": cid if isinstance(cid, str) and len(cid) <= 256 else None,
        "proof_ref": proof_ref, "subject": sub.get("subject"), "producer": producer,
        "idempotency_key": sub.get("idempotency_key"),
        "admission": sub.get("admission") or result.get("admission"),
        **att,
        "payloads": {k: (None if v is None else digest(v)) for k, v in payloads.items()},
    }
    return payloads, envelope


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def thumbprint_of(jwk: dict[str, Any]) -> str:
    """RFC 7638 SHA-256 thumbprint of an EC JWK (required members crv, kty, x, y)."""
    members = {k: jwk[k] for k in ("crv", "kty", "x", "y")}
    return _b64url(hashlib.sha256(json.dumps(members, separators=(",", ":"),
                                             sort_keys=True).encode("utf-8")).digest())


def report_digest_of(report: dict[str, Any]) -> str:
    """docs/format.md section 10.2: the digest of the full audit report."""
    return digest(json.dumps(report, sort_keys=True, separators=(",", ":")).encode("utf-8"))


def outcomes_digest_of(outcomes: list[dict[str, Any]]) -> str:
    """docs/format.md section 10.4: the digest of a re-verification run's outcomes."""
    return digest(json.dumps(outcomes, sort_keys=True, separators=(",", ":")).encode("utf-8"))


def reverify_run_doc(report: dict[str, Any], head_hash: str | None) -> dict[str, Any]:
    """docs/format.md section 10.4: the ledger-reverify-run/1 document of a full report."""
    doc = {k: report[k] for k in REVERIFY_COPIED}
    lim = report["limits"]
    doc.update(format="ledger-reverify-run/1", head_hash=head_hash,
               limits={"time_limit_ms": round(lim["time_limit_s"] * 1000),
                       "memory_mb": lim["memory_mb"], "hash_seed": lim["hash_seed"]},
               outcomes_digest=outcomes_digest_of(report["outcomes"]))
    return doc


def expected_from_event_inputs(e: dict[str, Any], ledger_id: str,
                               earlier: list[dict[str, Any]]) -> tuple[bytes, dict[str, Any]]:
    """The payload bytes and envelope document of a key_event/audit_run entry, derived from
    its inputs (and the entries before it) by the rules of docs/format.md section 10."""
    inputs, producer = e["inputs"], e["producer"]
    if e["kind"] == "import":
        run = inputs["report"]
        doc: dict[str, Any] = {
            "type": "ledger-import/1", "source": "qwed:" + run["namespace"],
            "label": run["label"], "namespace": run["namespace"],
            "outcome": "quarantined" if run["quarantined"] or run["legacy"] else "clean",
            "hmac": run["hmac"], "rows": run["rows"], "imported": run["imported"],
            "replayed": run["replayed"], "legacy": run["legacy"],
            "quarantined": len(run["quarantined"]), "organizations": run["organizations"]}
        fields = {"source": doc["source"], "outcome": doc["outcome"], "producer": producer}
        name = "report"
    elif e["kind"] == "reverify_run":
        report = inputs["report"]
        end = report["range"]["end"]
        doc = reverify_run_doc(report, "sha256:" + earlier[end - 1]["entry_hash"] if end
                               else None)
        fields = {"outcome": report["outcome"], "producer": producer}
        name = "report"
    elif e["kind"] == "audit_run":
        report = inputs["report"]
        end = report["range"]["end"]
        doc = {
            "format": "ledger-audit-run/2", "range": report["range"],
            "summary": report["summary"], "findings": len(report["findings"]),
            "abstentions": len(report["abstentions"]),
            "redacted": sum(a["reason"] == "redacted" for a in report["abstentions"]),
            "outcome": report["outcome"],
            "head_hash": "sha256:" + earlier[end - 1]["entry_hash"] if end else None,
            "report_digest": report_digest_of(report), "finished_at": report["finished_at"]}
        fields = {"outcome": report["outcome"], "producer": producer}
        name = "report"
    elif "jwks" in inputs:  # trust: one event per key; the vectors trust one key
        (raw,) = inputs["jwks"]["keys"]
        jwk = {k: raw[k] for k in ("kty", "crv", "x", "y")}
        thumb = thumbprint_of(jwk)
        kid = raw.get("kid") or f"{inputs['issuer']}#{thumb}"
        doc = {"action": "trust", "issuer": inputs["issuer"], "kid": kid, "thumbprint": thumb,
               "jwk": jwk, "reason": inputs["reason"]}
        fields = {k: doc[k] for k in ("action", "issuer", "kid", "thumbprint")}
        fields["producer"] = producer
        name = "event"
    else:  # retire/revoke: the issuer is that of the trusted key with this kid
        action = json.loads(e["envelope"])["action"]
        trusted = [json.loads(x["payloads"]["event"]["text"]) for x in earlier
                   if x["kind"] == "key_event"]
        issuer = next(d["issuer"] for d in trusted
                      if d["action"] == "trust" and d["kid"] == inputs["kid"])
        doc = {"action": action, "issuer": issuer, "kid": inputs["kid"],
               "thumbprint": inputs["thumbprint"], "reason": inputs["reason"]}
        if action == "revoke":
            doc["compromised_since_us"] = inputs["compromised_since_us"]
        fields = {k: doc[k] for k in ("action", "issuer", "kid", "thumbprint")}
        fields["producer"] = producer
        name = "event"
    data = canonical(doc)
    envelope = {"v": 1, "ledger": ledger_id, "kind": e["kind"], **fields,
                "payloads": {name: digest(data)}}
    return data, envelope


def _check_key_event(doc: dict[str, Any], data: bytes) -> None:
    event = json.loads(data, object_pairs_hook=_no_duplicates)
    assert canonical(event) == data, "an event document is canonical JSON"
    assert event["action"] in EVENT_DOC_KEYS and set(event) == EVENT_DOC_KEYS[event["action"]]
    for key in ("action", "issuer", "kid", "thumbprint"):
        assert event[key] == doc[key], f"envelope {key} differs from the event document"
    if event["action"] == "trust":
        assert set(event["jwk"]) == {"kty", "crv", "x", "y"}
        assert event["thumbprint"] == thumbprint_of(event["jwk"])
    if event["action"] == "revoke":
        since = event["compromised_since_us"]
        assert since is None or (isinstance(since, int) and 0 <= since <= MAX_SAFE)


def _check_audit_run(doc: dict[str, Any], data: bytes, hashes: list[bytes]) -> None:
    run = json.loads(data, object_pairs_hook=_no_duplicates)
    assert canonical(run) == data, "an audit-run document is canonical JSON"
    assert run["format"] in AUDIT_RUN_DOC_KEYS and set(run) == AUDIT_RUN_DOC_KEYS[run["format"]]
    if run["format"] == "ledger-audit-run/2":
        assert all(type(run[k]) is int for k in ("findings", "abstentions", "redacted"))
        assert 0 <= run["redacted"] <= run["abstentions"]
    assert run["outcome"] == doc["outcome"] and doc["outcome"] in OUTCOMES
    start, end = run["range"]["start"], run["range"]["end"]
    assert 0 <= start <= end <= len(hashes)
    s = run["summary"]
    assert set(s) == {"rows", "verified", "failed", "unverified"}
    assert run["head_hash"] == ("sha256:" + hashes[end - 1].hex() if end else None)
    assert run["report_digest"].startswith("sha256:") and len(run["report_digest"]) == 71
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z", run["finished_at"])


def _check_reverify_run(doc: dict[str, Any], data: bytes, hashes: list[bytes]) -> None:
    run = json.loads(data, object_pairs_hook=_no_duplicates)
    assert canonical(run) == data, "a reverify-run document is canonical JSON"
    assert set(run) == REVERIFY_RUN_DOC_KEYS and run["format"] == "ledger-reverify-run/1"
    assert run["outcome"] == doc["outcome"] and doc["outcome"] in REVERIFY_OUTCOMES[:3]
    start, end = run["range"]["start"], run["range"]["end"]
    assert 0 <= start <= end <= len(hashes)
    assert run["head_hash"] == ("sha256:" + hashes[end - 1].hex() if end else None)
    assert set(run["summary"]) == {"entries", *REVERIFY_OUTCOMES}
    assert run["summary"]["entries"] == sum(run["summary"][k] for k in REVERIFY_OUTCOMES)
    for counts in run["by_engine"].values():
        assert set(counts) == set(REVERIFY_OUTCOMES)
    assert set(run["limits"]) == {"time_limit_ms", "memory_mb", "hash_seed"}
    assert set(run["filters"]) == {"seqs", "engines", "since_us", "until_us"}
    assert type(run["resumed"]) is bool and type(run["run_id"]) is int
    assert re.fullmatch(r"sha256:[0-9a-f]{64}", run["outcomes_digest"])
    for key in ("started_at", "finished_at"):
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z", run[key])


def _check_import(doc: dict[str, Any], data: bytes) -> None:
    run = json.loads(data, object_pairs_hook=_no_duplicates)
    assert canonical(run) == data, "an import document is canonical JSON"
    assert set(run) == set(IMPORT_DOC_TYPES) and run["type"] == "ledger-import/1"
    for key, kind in IMPORT_DOC_TYPES.items():
        assert isinstance(run[key], kind) and not isinstance(run[key], bool), key
    assert run["source"] == doc["source"] == "qwed:" + run["namespace"]
    assert run["outcome"] == doc["outcome"] and doc["outcome"] in ("clean", "quarantined")
    assert run["hmac"] in ("checked", "unchecked") and doc["producer"] == "qwed-import"
    for head in run["organizations"].values():
        assert set(head) <= {"rows", "head_id", "head_hash"} and isinstance(head["rows"], int)


def verify_ledger(vectors: dict[str, Any]) -> None:
    """Verify a whole exported ledger the way docs/format.md, "Verifying", says."""
    ledger_id = vectors["ledger_id"]
    prev = genesis(ledger_id)
    assert prev.hex() == vectors["genesis_hash"]
    last_t = 0
    hashes: list[bytes] = []
    for i, e in enumerate(vectors["entries"]):
        assert e["seq"] == i, "seq must be 0-based and gapless"
        t = e["recorded_at_us"]
        assert t >= last_t, "recorded_at must not decrease"
        assert e["recorded_at"] == rfc3339_us(t)
        # payloads: hash the stored bytes
        stored: dict[str, bytes | None] = {}
        for name, p in e["payloads"].items():
            if p is None:
                stored[name] = None
                continue
            data = bytes.fromhex(p["hex"])
            assert data.decode("utf-8") == p["text"] and len(data) == p["length"]
            assert digest(data) == p["digest"]
            stored[name] = data
        # the envelope: parse strictly, check key set, canonical form and payload digests
        envelope = bytes.fromhex(e["envelope_hex"])
        assert envelope.decode("utf-8") == e["envelope"]
        doc = json.loads(envelope, object_pairs_hook=_no_duplicates)
        assert doc["v"] == 1 and doc["ledger"] == ledger_id and doc["kind"] == e["kind"]
        kind = doc["kind"]
        assert kind in ENVELOPE_KEYS, f"unknown kind {kind!r}"
        assert set(doc) == ENVELOPE_KEYS[kind]
        assert set(doc["payloads"]) == PAYLOAD_NAMES[kind] == set(stored)
        assert canonical(doc) == envelope, "envelope is not in canonical form"
        for name, data in stored.items():
            assert doc["payloads"][name] == (None if data is None else digest(data))
        if kind == "result":
            assert doc["payloads"]["result"] is not None
            if doc["proof_ref"] is None:
                assert doc["payloads"]["preimage"] is None
            else:  # sha256(preimage) == proof_ref
                assert doc["payloads"]["preimage"] == doc["proof_ref"]
            assert (doc["status"] == "VERIFIED") == (doc["proof_ref"] is not None)
        elif kind == "key_event":
            _check_key_event(doc, stored["event"])  # type: ignore[arg-type]
        elif kind == "import":
            _check_import(doc, stored["report"])  # type: ignore[arg-type]
        elif kind == "reverify_run":
            _check_reverify_run(doc, stored["report"], hashes)  # type: ignore[arg-type]
        else:
            _check_audit_run(doc, stored["report"], hashes)  # type: ignore[arg-type]
        # the chain
        assert e["prev_hash"] == prev.hex()
        body = body_of(envelope)
        assert e["body_hash"] == body.hex()
        preimage = ENTRY_TAG + prev + struct.pack(">Q", i) + struct.pack(">Q", t) + body
        assert e["link_preimage_hex"] == preimage.hex()
        h = link_of(prev, i, t, body)
        assert h == sha256(preimage) and e["entry_hash"] == h.hex()
        prev, last_t = h, t
        hashes.append(h)
    assert vectors["head"] == {"size": len(vectors["entries"]), "head_hash": prev.hex()}


@pytest.fixture(scope="module")
def vectors() -> dict[str, Any]:
    return json.loads(VECTORS.read_text(encoding="utf-8"))


def test_vector_file_shape(vectors):
    assert vectors["format_version"] == 1
    assert vectors["domain_tags_hex"] == {"envelope": ENVELOPE_TAG.hex(),
                                          "entry": ENTRY_TAG.hex(), "genesis": GENESIS_TAG.hex()}
    kinds = [e["kind"] for e in vectors["entries"]]
    assert kinds[:6] == ["result"] * 6 and {"key_event", "audit_run", "import", "reverify_run"} <= set(kinds)
    actions = {json.loads(e["envelope"])["action"] for e in vectors["entries"]
               if e["kind"] == "key_event"}
    assert {"trust", "revoke"} <= actions
    entries = [e for e in vectors["entries"] if e["kind"] == "result"]
    assert len(entries) >= 6
    statuses = {json.loads(e["envelope"])["status"] for e in entries}
    assert statuses == {"VERIFIED", "UNVERIFIABLE", "BLOCKED"}
    # every payload kind occurs at least once, and so does every optional envelope field
    for name in RESULT_PAYLOAD_NAMES:
        assert any(e["payloads"][name] for e in entries), name
    for key in ("subject", "producer", "idempotency_key", "admission", "att_kid", "att_iss"):
        assert any(json.loads(e["envelope"])[key] is not None for e in entries), key
    # two entries of one batch share a recorded_at
    times = [e["recorded_at_us"] for e in entries]
    assert len(set(times)) < len(times)


def test_independent_verifier_accepts_the_vectors(vectors):
    verify_ledger(vectors)


@pytest.mark.parametrize("index", range(6))
def test_independent_derivation_from_submission(vectors, index):
    """Payload bytes and envelope re-derived from the submission by the documented rules."""
    e = vectors["entries"][index]
    payloads, envelope_doc = expected_from_submission(e["submission"], e["producer"],
                                                      vectors["ledger_id"])
    for name, data in payloads.items():
        want = e["payloads"][name]
        assert (None if data is None else data.hex()) == (None if want is None else want["hex"]), name
    assert canonical(envelope_doc) == bytes.fromhex(e["envelope_hex"])


@pytest.mark.parametrize("index", range(6, 11))
def test_independent_derivation_of_events(vectors, index):
    """key_event, audit_run, import and reverify_run payload bytes and envelopes re-derived
    from their inputs."""
    entries = vectors["entries"]
    e = entries[index]
    assert e["kind"] in ("key_event", "audit_run", "import", "reverify_run")
    data, envelope_doc = expected_from_event_inputs(e, vectors["ledger_id"], entries[:index])
    (payload,) = e["payloads"].values()
    assert data.hex() == payload["hex"]
    assert canonical(envelope_doc) == bytes.fromhex(e["envelope_hex"])


def _tamper(vectors: dict[str, Any], fn) -> dict[str, Any]:
    v = copy.deepcopy(vectors)
    fn(v)
    return v


def _set_payload_byte(v: dict[str, Any]) -> None:
    p = v["entries"][1]["payloads"]["preimage"]
    data = bytearray.fromhex(p["hex"])
    data[0] ^= 0x01
    p["hex"], p["text"] = data.hex(), data.decode("utf-8")


def _swap_entries(v: dict[str, Any]) -> None:
    a, b = v["entries"][3], v["entries"][4]
    v["entries"][3], v["entries"][4] = {**b, "seq": 3}, {**a, "seq": 4}


def _reencode_envelope(v: dict[str, Any]) -> None:
    e = v["entries"][0]
    doc = json.loads(e["envelope"])
    e["envelope"] = json.dumps(doc, sort_keys=True)  # non-canonical spelling of the same doc
    e["envelope_hex"] = e["envelope"].encode().hex()


def _change_time(v: dict[str, Any]) -> None:
    v["entries"][2]["recorded_at_us"] += 1


def _rechain(v: dict[str, Any], start: int) -> None:
    """Recompute body/entry hashes from ``start`` on (a self-consistent rewrite)."""
    prev = bytes.fromhex(v["entries"][start - 1]["entry_hash"])
    for e in v["entries"][start:]:
        envelope = e["envelope"].encode("utf-8")
        e["envelope_hex"] = envelope.hex()
        body = body_of(envelope)
        link = ENTRY_TAG + prev + struct.pack(">QQ", e["seq"], e["recorded_at_us"]) + body
        e["prev_hash"], e["body_hash"], e["link_preimage_hex"] = prev.hex(), body.hex(), link.hex()
        prev = sha256(link)
        e["entry_hash"] = prev.hex()
    v["head"]["head_hash"] = prev.hex()


def _event_envelope_disagrees(v: dict[str, Any]) -> None:
    """The revoke's envelope says 'retire' (chain recomputed): only the document check sees it."""
    e = next(x for x in v["entries"] if x["kind"] == "key_event"
             and json.loads(x["envelope"])["action"] == "revoke")
    doc = json.loads(e["envelope"])
    doc["action"] = "retire"
    e["envelope"] = canonical(doc).decode("utf-8")
    _rechain(v, e["seq"])


def _audit_run_head_moved(v: dict[str, Any]) -> None:
    """Entry 7 rewritten and the chain recomputed: the audit_run no longer names its hash."""
    e = v["entries"][7]
    doc = json.loads(e["envelope"])
    doc["producer"] = "mallory"
    e["envelope"] = canonical(doc).decode("utf-8")
    _rechain(v, 7)


def _reverify_run_outcome_flipped(v: dict[str, Any]) -> None:
    """The reverify_run's document and digest say 'agrees' (envelope digest and chain
    recomputed, the envelope's outcome left): only the document check sees it."""
    e = next(x for x in v["entries"] if x["kind"] == "reverify_run")
    p = e["payloads"]["report"]
    doc = json.loads(p["text"])
    doc["outcome"] = "agrees"
    data = canonical(doc)
    p.update(text=data.decode(), hex=data.hex(), length=len(data), digest=digest(data))
    env = json.loads(e["envelope"])
    env["payloads"]["report"] = digest(data)
    e["envelope"] = canonical(env).decode("utf-8")
    _rechain(v, e["seq"])


def _reverify_run_head_moved(v: dict[str, Any]) -> None:
    """Entry 9 rewritten and the chain recomputed: the reverify_run no longer names its hash."""
    e = v["entries"][9]
    doc = json.loads(e["envelope"])
    doc["producer"] = "mallory"
    e["envelope"] = canonical(doc).decode("utf-8")
    _rechain(v, 9)


def _event_payload_byte(v: dict[str, Any]) -> None:
    p = next(x for x in v["entries"] if x["kind"] == "key_event")["payloads"]["event"]
    data = bytearray.fromhex(p["hex"])
    data[-2] ^= 0x01
    p["hex"], p["text"] = data.hex(), data.decode("utf-8")


@pytest.mark.parametrize("tamper", [_set_payload_byte, _swap_entries, _reencode_envelope,
                                    _change_time, _event_envelope_disagrees,
                                    _audit_run_head_moved, _event_payload_byte,
                                    _reverify_run_outcome_flipped, _reverify_run_head_moved])
def test_independent_verifier_detects_tampering(vectors, tamper):
    with pytest.raises(AssertionError):
        verify_ledger(_tamper(vectors, tamper))


# ---------------------------------------------------------------------------
# (b) The ledger's own functions produce the same bytes
# ---------------------------------------------------------------------------

def _ledger_event(e: dict[str, Any], store: Any) -> Any:
    """The Prepared key_event/audit_run entry built by the ledger's own functions."""
    from ledger.ops.append import prepare_event
    from ledger.ops.trust import end_event, trust_events

    inputs = e["inputs"]
    if e["kind"] == "import":
        from ledger.ops.qwed_import import ImportReport, import_event

        return import_event(ImportReport(source="not recorded", **inputs["report"]))
    if e["kind"] == "reverify_run":
        # the content recipe: test_recorded_reverify_run_follows_the_format
        doc = json.loads(e["payloads"]["report"]["text"])
        return prepare_event("reverify_run", {"outcome": doc["outcome"],
                                              "producer": e["producer"]}, "report", doc)
    if e["kind"] == "audit_run":
        # the document's *content* recipe is checked against record_run on a real ledger
        # (test_recorded_audit_run_follows_the_format); here: its canonical encoding
        doc = json.loads(e["payloads"]["report"]["text"])
        return prepare_event("audit_run", {"outcome": doc["outcome"], "producer": e["producer"]},
                             "report", doc)
    if "jwks" in inputs:
        (p,) = trust_events(store, inputs["issuer"], copy.deepcopy(inputs["jwks"]),
                            inputs["reason"], e["producer"])
        return p
    action = json.loads(e["envelope"])["action"]
    return end_event(store, action, inputs["kid"], inputs["reason"], e["producer"],
                     inputs.get("compromised_since_us"), inputs["thumbprint"])


def test_ledger_functions_match_vectors(vectors):
    from ledger.clock import format_us
    from ledger.core import entry as E
    from ledger.core.submission import parse_submission
    from ledger.crypto.trust import TrustStore
    from ledger.ops.append import default_judge, prepare_result

    assert E.FORMAT_VERSION == vectors["format_version"]
    assert (E.ENVELOPE_TAG, E.ENTRY_TAG, E.GENESIS_TAG) == (ENVELOPE_TAG, ENTRY_TAG, GENESIS_TAG)
    ledger_id = vectors["ledger_id"]
    prev = E.genesis_hash(ledger_id)
    assert prev.hex() == vectors["genesis_hash"]
    store = TrustStore()
    for e in vectors["entries"]:
        if e["kind"] == "result":
            sub = parse_submission(copy.deepcopy(e["submission"]))
            p = prepare_result(sub, e["producer"], default_judge)
            digests = sub.payload_digests()
        else:
            p = _ledger_event(e, store)
            digests = {k: E.digest_text(v) for k, v in p.payloads.items()}  # type: ignore[arg-type]
        assert p.kind == e["kind"]
        for name, data in p.payloads.items():
            want = e["payloads"][name]
            assert (None if data is None else data.hex()) == (want and want["hex"]), name
        assert digests == {k: (v and v["digest"]) for k, v in e["payloads"].items()}
        if p.kind == "key_event":
            store.apply(e["seq"], json.loads(p.payloads["event"]))  # type: ignore[arg-type]
        envelope = E.build_envelope(ledger_id, p.kind, p.fields, digests)
        assert envelope.hex() == e["envelope_hex"]
        linked = E.link(prev, e["seq"], e["recorded_at_us"], envelope)
        assert linked.body_hash == E.body_hash(envelope)
        assert linked.body_hash.hex() == e["body_hash"]
        assert linked.prev_hash.hex() == e["prev_hash"]
        assert linked.entry_hash.hex() == e["entry_hash"]
        assert E.hash_hex(linked.entry_hash) == "sha256:" + e["entry_hash"]
        assert E.parse_hash_hex("sha256:" + e["entry_hash"]) == linked.entry_hash
        assert format_us(e["recorded_at_us"]) == e["recorded_at"]
        prev = linked.entry_hash
    assert prev.hex() == vectors["head"]["head_hash"]


def _events(vectors: dict[str, Any]) -> list[dict[str, Any]]:
    return [e for e in vectors["entries"] if e["kind"] != "result"]


def test_key_events_appended_by_the_ledger_match_vectors(vectors, sqlite_url):
    """`ledger keys trust` / `revoke` through the facade write the vectors' event bytes."""
    from ledger import Ledger
    from ledger.clock import FixedClock

    trust, revoke = [e for e in _events(vectors) if e["kind"] == "key_event"]
    with Ledger.init(sqlite_url, clock=FixedClock(trust["recorded_at_us"])) as ledger:
        (res,) = ledger.trust_issuer(trust["inputs"]["issuer"], trust["inputs"]["jwks"],
                                     reason=trust["inputs"]["reason"],
                                     producer=trust["producer"])
        (res2,) = ledger.end_key("revoke", revoke["inputs"]["kid"],
                                 reason=revoke["inputs"]["reason"], producer=revoke["producer"],
                                 compromised_since_us=revoke["inputs"]["compromised_since_us"],
                                 thumbprint=revoke["inputs"]["thumbprint"])
        for want, seq in ((trust, res.seq), (revoke, res2.seq)):
            got = ledger.get(seq)
            assert got["payloads"]["event"]["text"] == want["payloads"]["event"]["text"]
            env = json.loads(got["envelope"])
            assert env.pop("ledger") == ledger.meta.ledger_id
            assert env == {k: v for k, v in json.loads(want["envelope"]).items()
                           if k != "ledger"}


def test_recorded_audit_run_follows_the_format(sqlite_url):
    """`ledger audit --record` writes exactly the documented ledger-audit-run/2 document."""
    from ledger import Ledger
    from ledger.clock import FixedClock
    from ledger.ops.audit import AuditOptions, run_audit

    with Ledger.init(sqlite_url, clock=FixedClock(1_767_225_600_000_000, 1000)) as ledger:
        ledger.append({"result": {"status": "BLOCKED", "agent_message": "blocked"},
                       "engine": "sql"})
        report = run_audit(ledger, AuditOptions(record=True, producer="audit-cron")).to_json()
        seq = report.pop("recorded_seq")
        got = ledger.get(seq)
        hashes = [bytes.fromhex(ledger.get(i)["entry_hash"][7:]) for i in range(seq)]
    data = got["payloads"]["report"]["text"].encode("utf-8")
    env = json.loads(got["envelope"])
    assert set(env) == AUDIT_RUN_ENVELOPE_KEYS and env["producer"] == "audit-cron"
    _check_audit_run(env, data, hashes)
    run = json.loads(data)
    assert run["report_digest"] == report_digest_of(report)
    assert run == {"format": "ledger-audit-run/2", "range": report["range"],
                   "summary": report["summary"], "findings": len(report["findings"]),
                   "abstentions": len(report["abstentions"]), "redacted": 0,
                   "outcome": report["outcome"], "head_hash": run["head_hash"],
                   "report_digest": run["report_digest"], "finished_at": report["finished_at"]}


def test_recorded_reverify_run_follows_the_format(db_url):
    """`ledger reverify --record` writes exactly the documented ledger-reverify-run/1
    document, on SQLite and PostgreSQL; the JSON report checks against it."""
    from ledger import Ledger
    from ledger.clock import FixedClock
    from ledger.core.reverify_run import report_differences
    from ledger.ops.reverify import ReverifyOptions

    blocked = {"result": {"status": "BLOCKED", "agent_message": "blocked"}, "engine": "acme"}
    with Ledger.init(db_url, clock=FixedClock(1_767_225_600_000_000, 1000)) as ledger:
        ledger.append(blocked)
        ledger.append(blocked)
        report = ledger.reverify(ReverifyOptions(record=True, producer="reverify-cron",
                                                 time_limit_s=2.5, engines=("acme",)))
        seq = report.pop("recorded_seq")
        got = ledger.get(seq)
        hashes = [bytes.fromhex(ledger.get(i)["entry_hash"][7:]) for i in range(seq)]
    assert seq == 2 and got["kind"] == "reverify_run" and got["integrity"]["verified"]
    data = got["payloads"]["report"]["text"].encode("utf-8")
    env = json.loads(got["envelope"])
    assert set(env) == REVERIFY_RUN_ENVELOPE_KEYS and env["producer"] == "reverify-cron"
    assert env["outcome"] == report["outcome"] == "not_reexecutable"
    _check_reverify_run(env, data, hashes)
    run = json.loads(data)
    assert run == reverify_run_doc(report, "sha256:" + hashes[1].hex())
    assert run["limits"]["time_limit_ms"] == 2500 and run["filters"]["engines"] == ["acme"]
    assert run["outcomes_digest"] == outcomes_digest_of(report["outcomes"])
    assert report_differences(run, report) == []
    # the report read back from a file checks too; an edited outcome does not
    reread = json.loads(json.dumps(report, indent=2))
    assert report_differences(run, reread) == []
    reread["outcomes"][0]["outcome"] = "agrees"
    assert report_differences(run, reread) == ["outcomes"]


def _load_vectors(url: str, vectors: dict[str, Any], origin: str) -> None:
    """Write the vector ledger into a fresh database, as the append path would have."""
    from sqlalchemy import insert, update

    from ledger.core.entry import COLUMN_MAP, PAYLOAD_MAP, genesis_hash
    from ledger.store import db
    from ledger.store import entries as repo
    from ledger.store.schema import entries, head, payloads, tenant_heads

    engine = db.make_engine(url, create=True)
    try:
        db.upgrade(engine)
        with db.write_connection(engine) as conn, conn.begin():
            lid = vectors["ledger_id"]
            first = vectors["entries"][0]["recorded_at_us"]
            repo.create_meta(conn, repo.LedgerMeta(lid, origin, 1, first - 1), genesis_hash(lid))
            blobs: dict[int, bytes] = {}
            for e in vectors["entries"]:
                env = json.loads(e["envelope"])
                row = {col: env[name] for name, col in COLUMN_MAP[e["kind"]].items()}
                row.update(seq=e["seq"], kind=e["kind"], recorded_at=e["recorded_at_us"],
                           envelope=bytes.fromhex(e["envelope_hex"]),
                           body_hash=bytes.fromhex(e["body_hash"]),
                           prev_hash=bytes.fromhex(e["prev_hash"]),
                           entry_hash=bytes.fromhex(e["entry_hash"]))
                conn.execute(insert(entries).values(**row))
                for name, p in e["payloads"].items():  # revision 0005: by (seq, slot)
                    if p is not None:
                        pid = e["seq"] * 8 + PAYLOAD_MAP[e["kind"]][name]
                        blobs[pid] = bytes.fromhex(p["hex"])
            conn.execute(insert(payloads), [{"pid": d, "salt": None, "data": b}
                                            for d, b in blobs.items()])
            last = vectors["entries"][-1]
            conn.execute(update(head).where(head.c.id == 1).values(
                size=vectors["head"]["size"], head_hash=bytes.fromhex(vectors["head"]["head_hash"]),
                last_recorded_at=last["recorded_at_us"]))
            conn.execute(update(tenant_heads).where(tenant_heads.c.tenant == "default").values(
                size=vectors["head"]["size"], head_hash=bytes.fromhex(vectors["head"]["head_hash"])))
    finally:
        engine.dispose()


def test_audit_of_the_vector_ledger_reproduces_its_audit_run(vectors, sqlite_url):
    """The ledger's own audit of the vector ledger says what the audit_run vector records."""
    from ledger import Ledger
    from ledger.clock import FixedClock
    from ledger.ops.audit import AuditOptions, run_audit

    (run,) = [e for e in vectors["entries"] if e["kind"] == "audit_run"]
    recorded = run["inputs"]["report"]
    _load_vectors(sqlite_url, vectors, recorded["origin"])
    with Ledger.open(sqlite_url, clock=FixedClock(run["recorded_at_us"])) as ledger:
        report = run_audit(ledger, AuditOptions(end=recorded["range"]["end"])).to_json()
        for key in ("format", "ledger_id", "origin", "range", "summary", "findings",
                    "abstentions", "policy", "attestations_checked", "workers", "outcome"):
            assert report[key] == recorded[key], key
        whole = run_audit(ledger, AuditOptions())  # every kind, and the head
    assert whole.findings == () and whole.summary.rows == vectors["head"]["size"]
    assert whole.outcome == "unverified"  # entry 2's issuer is still unknown


# ---------------------------------------------------------------------------
# (c) The committed vectors and the documented worked vectors are up to date
# ---------------------------------------------------------------------------

def test_vectors_are_up_to_date():
    proc = subprocess.run([sys.executable, str(GENERATOR), "--check"], check=False,
                          capture_output=True, text=True, cwd=REPO)
    assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize("which", [[], ["events"]])
def test_format_doc_shows_the_generated_worked_vectors(which):
    args = ["--markdown", *which]
    proc = subprocess.run([sys.executable, str(GENERATOR), *args], capture_output=True,
                          text=True, cwd=REPO, check=True)
    doc = FORMAT_DOC.read_text(encoding="utf-8")
    marker = "scripts/gen-vectors " + " ".join(args)
    begin = f"<!-- BEGIN GENERATED: {marker} -->"
    assert doc.count(begin) == 1, f"docs/format.md has no single {begin!r} marker"
    block = doc.split(begin, 1)[1].split("<!-- END GENERATED -->", 1)[0]
    assert block.strip() == proc.stdout.strip(), \
        f"docs/format.md worked vectors differ from `{marker}`"


def test_format_doc_domain_tags_and_sql(vectors):
    doc = FORMAT_DOC.read_text(encoding="utf-8")
    for tag in vectors["domain_tags_hex"].values():
        assert tag in doc
    assert "int8send(seq)" in doc and "int8send(recorded_at)" in doc
    assert "## Merkle tree, checkpoints and proofs" in doc


@pytest.mark.postgres
def test_postgresql_one_statement_link(vectors, pg_database):
    """The documented SQL form of the link and genesis reproduces the vectors."""
    from sqlalchemy import create_engine, text

    tags = vectors["domain_tags_hex"]
    eng = create_engine(pg_database)
    try:
        with eng.connect() as conn:
            got = conn.execute(text(
                "SELECT sha256(decode(:g, 'hex') || convert_to(:lid, 'UTF8'))"),
                {"g": tags["genesis"], "lid": vectors["ledger_id"]}).scalar_one()
            assert bytes(got).hex() == vectors["genesis_hash"]
            for e in vectors["entries"]:
                got = conn.execute(text(
                    "SELECT sha256('\\x" + tags["entry"] + "'::bytea || :prev || "
                    "int8send(CAST(:seq AS int8)) || int8send(CAST(:t AS int8)) || :body)"),
                    {"prev": bytes.fromhex(e["prev_hash"]), "seq": e["seq"],
                     "t": e["recorded_at_us"], "body": bytes.fromhex(e["body_hash"])},
                ).scalar_one()
                assert bytes(got).hex() == e["entry_hash"]
    finally:
        eng.dispose()


def test_format_doc_reference_verifier_runs(vectors):
    """The Python verifier printed in docs/format.md accepts the vectors and catches a change."""
    doc = FORMAT_DOC.read_text(encoding="utf-8")
    code = doc.split("A complete verifier in Python", 1)[1].split("```python\n", 1)[1]
    code = code.split("```", 1)[0]
    ns: dict[str, Any] = {}
    exec(compile(code, "docs/format.md", "exec"), ns)
    rows, blobs = [], {}
    results = [e for e in vectors["entries"] if e["kind"] == "result"]  # it covers results
    assert vectors["entries"][:len(results)] == results
    for e in results:
        rows.append((e["seq"], e["recorded_at_us"], bytes.fromhex(e["envelope_hex"]),
                     bytes.fromhex(e["body_hash"]), bytes.fromhex(e["prev_hash"]),
                     bytes.fromhex(e["entry_hash"])))
        for p in e["payloads"].values():
            if p is not None:
                blobs[p["digest"]] = bytes.fromhex(p["hex"])
    head = bytes.fromhex(results[-1]["entry_hash"])
    ns["verify"](vectors["ledger_id"], rows, blobs, len(rows), head)
    blobs[vectors["entries"][0]["payloads"]["result"]["digest"]] += b" "
    with pytest.raises(AssertionError):
        ns["verify"](vectors["ledger_id"], rows, blobs, len(rows), head)
