"""Helpers for the audit tests: raw-SQL tampering and hand-made attestation tokens.

Tampering is what a database superuser can do.  The append-only triggers of
migration 0001 are disabled for the duration of a ``with unlocked(url) as conn:``
block and restored exactly as the migration makes them afterwards:

* SQLite: ``DROP TRIGGER entries_no_update`` / ``entries_no_delete`` /
  ``payloads_no_update``, then ``CREATE TRIGGER`` with the migration's text;
* PostgreSQL: ``ALTER TABLE entries DISABLE TRIGGER entries_append_only`` (and
  ``payloads_append_only``), then ``ENABLE TRIGGER``.

The helpers never use the ledger's append path: they write entries, payloads and
the head directly, computing hashes with :mod:`ledger.core.entry` only where a
test wants a self-consistent forgery.

Tokens are shaped like the upstream producer's (design §2.3) and signed with the
fixture issuer key (``tests/data/qwed_issuer_key.pem``) or any other P-256 key.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, ClassVar

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from sqlalchemy import Connection, create_engine, text

from ledger.core.entry import (
    COLUMN_MAP,
    PAYLOAD_MAP,
    SLOTS,
    build_envelope,
    digest_text,
    genesis_hash,
    link,
    payload_commitment,
)
from ledger.store import codec
from ledger.store.db import normalize_url

# =============================================================================
# Raw SQL
# =============================================================================

# Operations guarded by a trigger (migrations 0001 and 0005; payloads: UPDATE refused,
# DELETE only with a redaction guard row).
GUARDED = {"entries": ("UPDATE", "DELETE"), "payloads": ("UPDATE", "DELETE")}
PG_TRIGGERS = {"entries": ("entries_append_only",),
               "payloads": ("payloads_append_only", "payloads_delete_guard")}
_PAYLOADS_NO_DELETE = """
CREATE TRIGGER payloads_no_delete BEFORE DELETE ON payloads
WHEN NOT EXISTS (SELECT 1 FROM redacted_payloads
                 WHERE seq = OLD.pid / 8 AND slot = OLD.pid % 8)
BEGIN SELECT RAISE(ABORT, 'ledger: DELETE on table payloads is not allowed (no redaction)');
END
"""


def _sqlite_trigger_sql(table: str, what: str) -> str:
    # Exactly as migrations/versions/0001_initial.py and 0005 create them.
    if (table, what) == ("payloads", "DELETE"):
        return _PAYLOADS_NO_DELETE
    return (f"CREATE TRIGGER {table}_no_{what.lower()} BEFORE {what} ON {table} "
            f"BEGIN SELECT RAISE(ABORT, 'ledger: {what} on table {table} is not "
            "allowed (append-only)'); END")


@contextmanager
def connect(url: str) -> Iterator[Connection]:
    """A plain SQLAlchemy connection inside one transaction (committed on exit)."""
    eng = create_engine(normalize_url(url))
    try:
        with eng.begin() as conn:
            yield conn
    finally:
        eng.dispose()


def disable_triggers(conn: Connection, tables: tuple[str, ...] = ("entries", "payloads")) -> None:
    for table in tables:
        if conn.dialect.name == "postgresql":
            for name in PG_TRIGGERS[table]:
                conn.execute(text(f"ALTER TABLE {table} DISABLE TRIGGER {name}"))
        else:
            for what in GUARDED[table]:
                conn.execute(text(f"DROP TRIGGER {table}_no_{what.lower()}"))


def enable_triggers(conn: Connection, tables: tuple[str, ...] = ("entries", "payloads")) -> None:
    for table in tables:
        if conn.dialect.name == "postgresql":
            for name in PG_TRIGGERS[table]:
                conn.execute(text(f"ALTER TABLE {table} ENABLE TRIGGER {name}"))
        else:
            for what in GUARDED[table]:
                conn.execute(text(_sqlite_trigger_sql(table, what)))


@contextmanager
def unlocked(url: str, tables: tuple[str, ...] = ("entries", "payloads")) -> Iterator[Connection]:
    """Triggers off for the block, back on (as the migration made them) after it."""
    with connect(url) as conn:
        disable_triggers(conn, tables)
        yield conn
        enable_triggers(conn, tables)


class EntryRow:
    """An entries row plus the payload digests its envelope holds, as the attributes
    ``doc_digest``, ``preimage_digest``, ... (the columns of revision 0004)."""

    DIGEST_ATTRS: ClassVar[dict[str, int]] = {"doc_digest": 0, "preimage_digest": 1, "attestation_digest": 2,
                                               "query_digest": 3, "meta_digest": 4,
                                               "subject_digest": 5}

    def __init__(self, raw: Any) -> None:
        self._raw = raw
        env = json.loads(bytes(raw.envelope))
        names = {s: n for n, s in PAYLOAD_MAP.get(raw.kind, {}).items()}
        if raw.kind == "result":
            names = {s: n for n, s in SLOTS.items()}
        committed = env.get("payloads") or {}
        self._digests = {slot: committed.get(n) for slot, n in names.items()}

    def __getattr__(self, name: str) -> Any:
        if name in EntryRow.DIGEST_ATTRS:
            return self._digests.get(EntryRow.DIGEST_ATTRS[name])
        return getattr(self._raw, name)


def row(conn: Connection, seq: int) -> Any:
    return EntryRow(conn.execute(text("SELECT * FROM entries WHERE seq = :s"),
                                 {"s": seq}).one())


def pids_of(conn: Connection, digest: str) -> list[int]:
    """The payload rows (``pid = seq * 8 + slot``) whose envelope names ``digest``."""
    out = []
    for r in conn.execute(text("SELECT seq, kind, envelope FROM entries ORDER BY seq")):
        committed = json.loads(bytes(r.envelope)).get("payloads") or {}
        slots = SLOTS if r.kind == "result" else PAYLOAD_MAP.get(r.kind, {})
        out += [r.seq * 8 + slots[n] for n, d in committed.items() if d == digest and n in slots]
    return out


def payload(conn: Connection, digest: str) -> bytes:
    pid = pids_of(conn, digest)[0]
    how, data = conn.execute(text("SELECT codec, data FROM payloads WHERE pid = :p"),
                             {"p": pid}).one()
    return codec.decode(how, bytes(data))


def stored_payload(conn: Connection, seq: int, name: str) -> tuple[bytes | None, bytes] | None:
    """(salt, data) of payload ``name`` of entry ``seq`` (the bytes, decoded from their
    stored codec), None when not stored."""
    r = conn.execute(text("SELECT salt, codec, data FROM payloads WHERE pid = :p"),
                     {"p": seq * 8 + SLOTS[name]}).first()
    return None if r is None else (None if r.salt is None else bytes(r.salt),
                                   codec.decode(r.codec, bytes(r.data)))


def digest_for(conn: Connection, seq: int, name: str, data: bytes) -> str:
    """What entry ``seq``'s envelope would say for ``data`` as its payload ``name``: the
    plain digest (v1) or the commitment under the stored salt (v2 result)."""
    r = row(conn, seq)
    v = json.loads(bytes(r.envelope)).get("v", 1)
    stored = stored_payload(conn, seq, name)
    return payload_commitment(r.kind, v, stored[0] if stored else None, data)


def move_payloads(conn: Connection, a: int, b: int) -> None:
    """Exchange every payload row of entries ``a`` and ``b`` (a reordering moves the
    payloads with their entries; payload triggers off)."""
    rows = {s: conn.execute(text("SELECT pid, salt, codec, data FROM payloads WHERE "
                                 "pid >= :x AND pid < :y"), {"x": s * 8, "y": s * 8 + 8}).all()
            for s in (a, b)}
    conn.execute(text("DELETE FROM payloads WHERE (pid >= :a AND pid < :a + 8) OR "
                      "(pid >= :b AND pid < :b + 8)"), {"a": a * 8, "b": b * 8})
    for src, dst in ((a, b), (b, a)):
        for pid, salt, how, data in rows[src]:
            conn.execute(text("INSERT INTO payloads (pid, salt, codec, data) "
                              "VALUES (:p, :s, :c, :d)"),
                         {"p": dst * 8 + pid % 8, "s": salt, "c": how, "d": data})


def swap_payloads(conn: Connection, a: int, b: int, name: str) -> None:
    """Swap payload ``name`` (bytes and salt) of entries ``a`` and ``b`` (triggers off)."""
    pa, pb = stored_payload(conn, a, name), stored_payload(conn, b, name)
    assert pa is not None and pb is not None
    for seq, (salt, data) in ((a, pb), (b, pa)):
        conn.execute(text("UPDATE payloads SET salt = :s, codec = 0, data = :d WHERE pid = :p"),
                     {"s": salt, "d": data, "p": seq * 8 + SLOTS[name]})


def ledger_id(conn: Connection) -> str:
    return conn.execute(text("SELECT ledger_id FROM ledger_meta")).scalar_one()


def head(conn: Connection) -> tuple[int, bytes, int]:
    size, h, t = conn.execute(text("SELECT size, head_hash, last_recorded_at FROM head "
                                   "WHERE id = 1")).one()
    return int(size), bytes(h), int(t)


def uses_of(conn: Connection, digest: str) -> int:
    """How many entries' envelopes name ``digest`` as a payload."""
    return len({pid // 8 for pid in pids_of(conn, digest)})


def set_payload(conn: Connection, digest: str, data: bytes) -> None:
    """Overwrite a payload's bytes, stored as they are (codec 0; needs the payload trigger
    off)."""
    for pid in pids_of(conn, digest):
        conn.execute(text("UPDATE payloads SET codec = 0, data = :b WHERE pid = :p"),
                     {"b": data, "p": pid})


def update_entry(conn: Connection, seq: int, **values: Any) -> None:
    """Overwrite columns of one entry (needs the entry triggers off)."""
    sets = ", ".join(f"{k} = :{k}" for k in values)
    conn.execute(text(f"UPDATE entries SET {sets} WHERE seq = :seq_"), {**values, "seq_": seq})


def add_payloads(conn: Connection, blobs: dict[str, bytes]) -> None:
    """Keep hand-made payloads (digest -> bytes) for the next :func:`write_linked`, which
    stores those its envelope names at its seq (the payload table is laid out by entry)."""
    conn.info.setdefault("forged_blobs", {}).update(blobs)


def _store_payloads(conn: Connection, seq: int, kind: str, envelope: bytes,
                    replace: bool) -> None:
    blobs = conn.info.get("forged_blobs", {})
    committed = json.loads(envelope).get("payloads") or {}
    slots = PAYLOAD_MAP.get(kind, {})
    if replace:  # needs the payload triggers off
        conn.execute(text("DELETE FROM payloads WHERE pid >= :a AND pid < :b"),
                     {"a": seq * 8, "b": seq * 8 + 8})
    for name, d in committed.items():
        if d is not None and d in blobs and name in slots:
            conn.execute(text("INSERT INTO payloads (pid, salt, data) VALUES (:p, NULL, :d)"),
                         {"p": seq * 8 + slots[name], "d": blobs[d]})


def set_head(conn: Connection, size: int, head_hash: bytes, last_recorded_at: int) -> None:
    """The head table has no trigger: the append path itself updates it.  The default
    tenant's head moves along (a ledger of one tenant: its chain is the ledger's)."""
    conn.execute(text("UPDATE head SET size = :s, head_hash = :h, last_recorded_at = :t "
                      "WHERE id = 1"), {"s": size, "h": head_hash, "t": last_recorded_at})
    conn.execute(text("UPDATE tenant_heads SET size = :s, head_hash = :h "
                      "WHERE tenant = 'default'"), {"s": size, "h": head_hash})


def forged_columns(lid: str, kind: str, fields: dict[str, Any],
                   payloads: dict[str, bytes | None]) -> tuple[dict[str, Any], dict[str, bytes]]:
    """Entry columns (all but seq/time/link) and payload blobs of a hand-made entry: a
    format v1 envelope (plain digests; v1 entries stay valid forever, so a forged one is
    judged on its content, not its version).

    ``fields`` are the kind's envelope fields (``COLUMN_MAP``); missing ones are null.
    """
    fields = {name: fields.get(name) for name in COLUMN_MAP[kind]}
    digests = {name: digest_text(payloads[name]) if payloads.get(name) is not None else None
               for name in PAYLOAD_MAP[kind]}
    envelope = build_envelope(lid, kind, fields, digests)
    cols: dict[str, Any] = {column: fields[name] for name, column in COLUMN_MAP[kind].items()}
    cols.update(kind=kind, envelope=envelope)
    blobs = {d: payloads[n] for n, d in digests.items() if d is not None}
    return cols, blobs  # type: ignore[return-value]


def forged_result(lid: str, submission: dict[str, Any]) -> tuple[dict[str, Any], dict[str, bytes]]:
    """Columns and payloads of ``submission`` exactly as the append path would store it
    (validated and sealed by ``validate_items``; attestation marked unchecked)."""
    from ledger.ops.append import validate_items

    prepared, rejected = validate_items([submission], None, lid)
    assert not rejected, rejected[0].error
    p = prepared[0]
    p.v = 1
    p.seal(lid)
    cols, blobs = forged_columns(lid, "result", p.fields, p.payloads)
    assert cols["envelope"] == p.envelope
    return cols, blobs


def write_linked(conn: Connection, seq: int, recorded_at: int, prev_hash: bytes,
                 cols: dict[str, Any], *, replace: bool) -> bytes:
    """Write entry ``seq`` with a correctly computed body hash and link to ``prev_hash``
    (UPDATE of the existing row when ``replace``, else INSERT).  Returns its entry hash."""
    e = link(prev_hash, seq, recorded_at, cols["envelope"])
    _store_payloads(conn, seq, cols["kind"], cols["envelope"], replace)
    values = {**cols, "recorded_at": recorded_at, "body_hash": e.body_hash,
              "prev_hash": prev_hash, "entry_hash": e.entry_hash}
    if replace:
        update_entry(conn, seq, **values)
    else:
        names = ["seq", *values]
        conn.execute(text(f"INSERT INTO entries ({', '.join(names)}) VALUES "
                          f"({', '.join(':' + n for n in names)})"), {"seq": seq, **values})
    return e.entry_hash


def append_forged(conn: Connection, cols: dict[str, Any], blobs: dict[str, bytes], *,
                  move_head: bool, recorded_at: int | None = None) -> int:
    """Insert a hand-made entry at the tail, correctly linked to the head; move the head
    only if ``move_head``.  Returns its seq."""
    size, h, last = head(conn)
    t = last + 1 if recorded_at is None else recorded_at
    add_payloads(conn, blobs)
    eh = write_linked(conn, size, t, h, cols, replace=False)
    if move_head:
        set_head(conn, size + 1, eh, t)
    return size


def rechain(conn: Connection, start: int) -> bytes:
    """Recompute body/entry hashes of every entry from ``start`` to the tail so that the
    chain is self-consistent again (a wholesale rewrite) and move the head to the tail."""
    prev = genesis_hash(ledger_id(conn)) if start == 0 else bytes(row(conn, start - 1).entry_hash)
    rows = conn.execute(text("SELECT seq, recorded_at, envelope FROM entries WHERE seq >= :s "
                             "ORDER BY seq"), {"s": start}).all()
    for r in rows:
        e = link(prev, r.seq, r.recorded_at, bytes(r.envelope))
        update_entry(conn, r.seq, body_hash=e.body_hash, prev_hash=prev,
                     entry_hash=e.entry_hash)
        prev = e.entry_hash
    if rows:
        set_head(conn, rows[-1].seq + 1, prev, rows[-1].recorded_at)
    return prev


# =============================================================================
# Attestation tokens
# =============================================================================

DATA = Path(__file__).parent / "data"
ISSUER = "did:qwed:node:test"
TYP = "qwed-attestation+jwt"
JWKS: dict[str, Any] = json.loads((DATA / "qwed_issuer_jwks.json").read_text(encoding="utf-8"))
KID: str = JWKS["keys"][0]["kid"]
FIXTURE_KEY = serialization.load_pem_private_key((DATA / "qwed_issuer_key.pem").read_bytes(),
                                                 None)
# Every fixture token has iat in [FIXTURE_IAT, FIXTURE_IAT + 20 s] and a 24 h lifetime.
FIXTURE_IAT = 1_767_225_600
FIXTURE_TIME_US = (FIXTURE_IAT + 3600) * 1_000_000  # one hour into their validity


def fixtures() -> list[dict[str, Any]]:
    """The upstream-generated submissions (without the test-only ``_expect`` key)."""
    out = []
    for line in (DATA / "qwed_fixtures.jsonl").read_text(encoding="utf-8").splitlines():
        obj = json.loads(line)
        assert obj.pop("_expect") == "accept"
        out.append(obj)
    return out


def token_of(sub: dict[str, Any]) -> str | None:
    return sub.get("attestation") or sub["result"].get("attestation")


def new_key() -> Any:
    return ec.generate_private_key(ec.SECP256R1())


def public_jwk(key: Any, kid: str | None = None) -> dict[str, Any]:
    """The public JWK (kty/crv/x/y, optional kid) of a P-256 private key."""
    full = json.loads(jwt.algorithms.ECAlgorithm.to_jwk(key.public_key()))
    jwk = {k: full[k] for k in ("kty", "crv", "x", "y")}
    if kid is not None:
        jwk["kid"] = kid
    return jwk


def jwks_of(key: Any, kid: str | None = None) -> dict[str, Any]:
    return {"keys": [public_jwk(key, kid)]}


def sha(data: str) -> str:
    return "sha256:" + hashlib.sha256(data.encode("utf-8")).hexdigest()


def claims_for(proof_ref: str, *, iat: int, query: str | None = "q", engine: str = "logic",
               admission: str | None = None, status: str = "VERIFIED", iss: str = ISSUER,
               lifetime: int = 24 * 3600) -> dict[str, Any]:
    """Upstream-shaped claims binding ``proof_ref`` (and ``query``, ``admission``)."""
    qh = sha(query if query is not None else "")
    q: dict[str, Any] = {"version": "1.0",
                         "result": {"status": status, "verified": True, "engine": engine,
                                    "confidence": 1.0},
                         "query_hash": qh, "proof_hash": proof_ref}
    if admission is not None:
        q["admission"] = admission
    return {"iss": iss, "sub": qh, "iat": iat, "exp": iat + lifetime,
            "jti": "att_" + uuid.uuid4().hex[:12], "qwed": q}


def sign(claims: dict[str, Any], *, key: Any = None, kid: str = KID,
         header: dict[str, Any] | None = None) -> str:
    """ES256 with the upstream header; ``header`` entries override or add (None removes)."""
    h: dict[str, Any] = {"alg": "ES256", "kid": kid, "typ": TYP}
    for k, v in (header or {}).items():
        if v is None:
            h.pop(k, None)
        else:
            h[k] = v
    return jwt.encode(claims, key or FIXTURE_KEY, algorithm="ES256", headers=h)


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def handmade(header: dict[str, Any], claims: dict[str, Any], secret: bytes | None = None) -> str:
    """A compact JWS built by hand: empty signature (``alg: none``) or HMAC-SHA256."""
    signing_input = (_b64(json.dumps(header, separators=(",", ":")).encode()) + "." +
                     _b64(json.dumps(claims, separators=(",", ":")).encode()))
    sig = b"" if secret is None else hmac.new(secret, signing_input.encode(),
                                              hashlib.sha256).digest()
    return signing_input + "." + _b64(sig)


def attested(sub: dict[str, Any], token: str) -> dict[str, Any]:
    """``sub`` with ``token`` as its top-level attestation (any result.attestation removed)."""
    result = {k: v for k, v in sub["result"].items() if k != "attestation"}
    return {**sub, "result": result, "attestation": token}


def verified_sub(i: int, *, query: str | None = "q", engine: str = "logic",
                 **top: Any) -> dict[str, Any]:
    """A minimal valid VERIFIED submission with a preimage unique to ``i``."""
    pre = repr([f"x > {i}", "y < 10"])
    sub: dict[str, Any] = {
        "result": {"status": "VERIFIED", "agent_message": f"Constraints {i} are satisfiable",
                   "developer_fields": {"constraint_id": "logic.sat"}, "proof_ref": sha(pre),
                   "is_authoritative": True},
        "engine": engine, "proof_preimage": pre, "subject": f"t-{i}", **top}
    if query is not None:
        sub["query"] = query
    return sub


def signed_sub(i: int, t_us: int, *, key: Any = None, kid: str = KID, iss: str = ISSUER,
               **claim_kw: Any) -> dict[str, Any]:
    """``verified_sub(i)`` carrying a token issued at ``t_us`` (valid for 24 h)."""
    sub = verified_sub(i)
    claims = claims_for(sub["result"]["proof_ref"], iat=t_us // 1_000_000, iss=iss, **claim_kw)
    return attested(sub, sign(claims, key=key, kid=kid))
