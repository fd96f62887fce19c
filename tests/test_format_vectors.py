"""Entry-format vectors (tests/vectors/entries.json) against two implementations.

Part (a) is an independent verifier written from docs/format.md with only
``hashlib``, ``json``, ``struct`` (and ``base64``/``datetime`` to read the JWT
header and format the time): it must not import the ledger's hashing code, so
that the documented format, not the code, is what the vectors pin.  Part (b)
checks the ledger's own functions produce the same bytes, so drift in either
is caught.  Part (c) checks the committed file matches scripts/gen-vectors and
that docs/format.md shows the generator's worked vectors verbatim.
"""

from __future__ import annotations

import base64
import copy
import hashlib
import json
import struct
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parent.parent
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
        raise AssertionError(f"{type(value).__name__} is not allowed in an envelope")  # noqa: TRY004


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


def verify_ledger(vectors: dict[str, Any]) -> None:
    """Verify a whole exported ledger the way docs/format.md, "Verifying", says."""
    ledger_id = vectors["ledger_id"]
    prev = genesis(ledger_id)
    assert prev.hex() == vectors["genesis_hash"]
    last_t = 0
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
        assert doc["kind"] == "result"
        assert set(doc) == RESULT_ENVELOPE_KEYS
        assert set(doc["payloads"]) == RESULT_PAYLOAD_NAMES == set(stored)
        assert canonical(doc) == envelope, "envelope is not in canonical form"
        for name, data in stored.items():
            assert doc["payloads"][name] == (None if data is None else digest(data))
        assert doc["payloads"]["result"] is not None
        if doc["proof_ref"] is None:
            assert doc["payloads"]["preimage"] is None
        else:
            assert doc["payloads"]["preimage"] == doc["proof_ref"]  # sha256(preimage) == proof_ref
        assert (doc["status"] == "VERIFIED") == (doc["proof_ref"] is not None)
        # the chain
        assert e["prev_hash"] == prev.hex()
        body = body_of(envelope)
        assert e["body_hash"] == body.hex()
        preimage = ENTRY_TAG + prev + struct.pack(">Q", i) + struct.pack(">Q", t) + body
        assert e["link_preimage_hex"] == preimage.hex()
        h = link_of(prev, i, t, body)
        assert h == sha256(preimage) and e["entry_hash"] == h.hex()
        prev, last_t = h, t
    assert vectors["head"] == {"size": len(vectors["entries"]), "head_hash": prev.hex()}


@pytest.fixture(scope="module")
def vectors() -> dict[str, Any]:
    return json.loads(VECTORS.read_text(encoding="utf-8"))


def test_vector_file_shape(vectors):
    assert vectors["format_version"] == 1
    assert vectors["domain_tags_hex"] == {"envelope": ENVELOPE_TAG.hex(),
                                          "entry": ENTRY_TAG.hex(), "genesis": GENESIS_TAG.hex()}
    entries = vectors["entries"]
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


@pytest.mark.parametrize("tamper", [_set_payload_byte, _swap_entries, _reencode_envelope,
                                    _change_time])
def test_independent_verifier_detects_tampering(vectors, tamper):
    with pytest.raises(AssertionError):
        verify_ledger(_tamper(vectors, tamper))


# ---------------------------------------------------------------------------
# (b) The ledger's own functions produce the same bytes
# ---------------------------------------------------------------------------

def test_ledger_functions_match_vectors(vectors):
    from ledger.clock import format_us
    from ledger.core import entry as E
    from ledger.core.submission import parse_submission
    from ledger.ops.append import default_judge, prepare_result

    assert E.FORMAT_VERSION == vectors["format_version"]
    assert (E.ENVELOPE_TAG, E.ENTRY_TAG, E.GENESIS_TAG) == (ENVELOPE_TAG, ENTRY_TAG, GENESIS_TAG)
    ledger_id = vectors["ledger_id"]
    prev = E.genesis_hash(ledger_id)
    assert prev.hex() == vectors["genesis_hash"]
    for e in vectors["entries"]:
        sub = parse_submission(copy.deepcopy(e["submission"]))
        p = prepare_result(sub, e["producer"], default_judge)
        assert p.kind == e["kind"]
        for name, data in p.payloads.items():
            want = e["payloads"][name]
            assert (None if data is None else data.hex()) == (want and want["hex"]), name
        digests = sub.payload_digests()
        assert digests == {k: (v and v["digest"]) for k, v in e["payloads"].items()}
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


# ---------------------------------------------------------------------------
# (c) The committed vectors and the documented worked vectors are up to date
# ---------------------------------------------------------------------------

def test_vectors_are_up_to_date():
    proc = subprocess.run([sys.executable, str(GENERATOR), "--check"], check=False,
                          capture_output=True, text=True, cwd=REPO)
    assert proc.returncode == 0, proc.stderr


def test_format_doc_shows_the_generated_worked_vectors():
    proc = subprocess.run([sys.executable, str(GENERATOR), "--markdown"], capture_output=True,
                          text=True, cwd=REPO, check=True)
    doc = FORMAT_DOC.read_text(encoding="utf-8")
    assert proc.stdout.strip() in doc, \
        "docs/format.md worked vectors differ from `scripts/gen-vectors --markdown`"


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
    exec(compile(code, "docs/format.md", "exec"), ns)  # noqa: S102 - our own document
    rows, blobs = [], {}
    for e in vectors["entries"]:
        rows.append((e["seq"], e["recorded_at_us"], bytes.fromhex(e["envelope_hex"]),
                     bytes.fromhex(e["body_hash"]), bytes.fromhex(e["prev_hash"]),
                     bytes.fromhex(e["entry_hash"])))
        for p in e["payloads"].values():
            if p is not None:
                blobs[p["digest"]] = bytes.fromhex(p["hex"])
    head = bytes.fromhex(vectors["head"]["head_hash"])
    ns["verify"](vectors["ledger_id"], rows, blobs, len(rows), head)
    blobs[vectors["entries"][0]["payloads"]["result"]["digest"]] += b" "
    with pytest.raises(AssertionError):
        ns["verify"](vectors["ledger_id"], rows, blobs, len(rows), head)
