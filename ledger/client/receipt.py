"""Receipt verification for the client: its only code that calls PyJWT (its crypto boundary).

A per-entry receipt (docs/http.md "Receipts") is a JWT signed by the ledger key::

    header {"alg": "EdDSA", "kid": <thumbprint>, "typ": "ledger-receipt+jwt"}
    claims {"iss", "origin", "ledger_id", "seq", "entry_hash", "recorded_at", "producer"?,
            "tenant"?, "tseq"?, "iat"}

``tenant`` and ``tseq`` (both, or neither) name the chain of an entry of a tenant other than
``default`` and its place there; the batch leaf document carries them the same way.

A batch receipt (docs/format-receipt.md, asked for with ``Prefer: receipt=batch``) is
``<JWS>~<leaf>~<proof>``: one JWS (``typ`` ``ledger-batch-receipt+jwt``) over the RFC 9162
root of a committed batch's leaf documents, this entry's leaf document and its audit path.
This module checks it with its own few lines of RFC 9162 (the client imports nothing of the
server side; a test pins it to the server's code and to the format's vectors).

:func:`verify_receipt` accepts either only if the signature verifies with the key its ``kid``
names in the ledger's JWKS (the ``kid`` is a hint: nothing is trusted because of it),
``iss``/``origin`` and ``ledger_id`` are the ledger's, a batch receipt's path leads from the
hash of its leaf document to the signed root, and ``seq``/``entry_hash`` (of the claims or
the leaf document) equal what the response said -- and so do ``tenant`` and ``tseq`` (a
receipt without them is of the ``default`` tenant).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import re
from typing import Any

import jwt

from ledger.client.errors import ReceiptInvalid

RECEIPT_TYP = "ledger-receipt+jwt"
RECEIPT_CLAIMS = ("iss", "origin", "ledger_id", "seq", "entry_hash", "recorded_at", "iat")
BATCH_RECEIPT_TYP = "ledger-batch-receipt+jwt"
BATCH_CLAIMS = ("iss", "origin", "ledger_id", "size", "root", "iat")
LEAF_MEMBERS = ("seq", "entry_hash", "recorded_at", "producer", "tenant", "tseq")
DEFAULT_TENANT = "default"
TENANT_ID = re.compile(r"[a-z0-9][a-z0-9._-]{0,62}\Z")


_KEYS: dict[str, Any] = {}  # JWK text -> public key object (parsing one costs more than a check)


def _key(jwk: dict[str, Any]) -> Any:
    text = json.dumps(jwk, sort_keys=True)
    if text not in _KEYS:
        if len(_KEYS) > 64:
            _KEYS.clear()
        _KEYS[text] = jwt.PyJWK(jwk, algorithm="EdDSA").key
    return _KEYS[text]


def receipt_kid(token: str) -> str | None:
    """The unverified ``kid`` hint of a receipt (None if it does not decode)."""
    try:
        kid = jwt.get_unverified_header(token.split("~", 1)[0]).get("kid")
    except jwt.InvalidTokenError:
        return None
    return kid if isinstance(kid, str) else None


def token_tenant(token: str) -> str | None:
    """The tenant the ledger appends a token's items to, read from the token itself (the
    caller's own credential, not verified here): its ``tenant`` claim, or ``default`` for a
    JWT without one; None when the token is not a JWT (then only the answer is compared)."""
    try:
        claims = jwt.decode(token, options={"verify_signature": False})
    except jwt.InvalidTokenError:
        return None
    tenant = claims.get("tenant", DEFAULT_TENANT) if isinstance(claims, dict) else None
    return tenant if isinstance(tenant, str) else None


def _unb64(text: str) -> bytes:
    """Strict unpadded base64url (ValueError otherwise)."""
    try:
        data = base64.b64decode(text + "=" * (-len(text) % 4), altchars=b"-_", validate=True)
    except (binascii.Error, ValueError):
        raise ValueError("not unpadded base64url") from None
    if base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii") != text:
        raise ValueError("not canonical unpadded base64url")
    return data


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in pairs:
        if k in out:
            raise ValueError(f"duplicate key {k!r}")
        out[k] = v
    return out


def _strict_json(data: bytes, what: str) -> Any:
    """UTF-8 JSON without duplicate keys, NaN or Infinity (ValueError otherwise)."""
    def constant(name: str) -> Any:
        raise ValueError(f"{name} is not JSON")

    try:
        return json.loads(data.decode("utf-8"), object_pairs_hook=_no_duplicates,
                          parse_constant=constant)
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise ValueError(f"the {what} is not strict JSON: {exc}") from None


def _strict_jws(token: str) -> dict[str, Any]:
    """The header of a compact JWS whose three parts are canonical unpadded base64url and
    whose header and claims are JSON objects without duplicate keys (ValueError else)."""
    parts = token.split(".")
    if len(parts) != 3:
        raise ValueError("a compact JWS has three parts")
    header, claims = (_strict_json(_unb64(p), what)
                      for p, what in zip(parts[:2], ("header", "claims"), strict=True))
    _unb64(parts[2])
    if not isinstance(header, dict) or not isinstance(claims, dict):
        raise ValueError("the header and the claims must be JSON objects")
    if "crit" in header:
        raise ValueError("the header has crit")
    return header


def batch_root(leaf: bytes, index: int, size: int, path: list[bytes]) -> bytes:
    """The root RFC 9162 §2.1.3.2 computes from ``leaf`` (a leaf document) at ``index`` in
    a tree of ``size`` leaves along ``path``; ValueError when the path cannot be one."""
    if not 0 <= index < size:
        raise ValueError(f"leaf index {index} out of range for batch size {size}")
    fn, sn = index, size - 1
    r = hashlib.sha256(b"\x00" + leaf).digest()
    for p in path:
        if sn == 0:
            raise ValueError("the path is longer than the tree is high")
        if fn & 1 or fn == sn:
            r = hashlib.sha256(b"\x01" + p + r).digest()
            while fn and not fn & 1:
                fn, sn = fn >> 1, sn >> 1
        else:
            r = hashlib.sha256(b"\x01" + r + p).digest()
        fn, sn = fn >> 1, sn >> 1
    if sn != 0:
        raise ValueError("the path does not reach the root")
    return r


def _verify_jws(token: str, jwks: dict[str, Any], typ: str, origin: str,
                require: tuple[str, ...]) -> dict[str, Any]:
    try:
        header = _strict_jws(token)
    except ValueError as exc:
        raise ReceiptInvalid(f"receipt is not read strictly: {exc}") from None
    try:
        if header.get("typ") != typ or header.get("alg") != "EdDSA":
            raise ReceiptInvalid("not a ledger receipt (typ/alg)")
        keys = [k for k in jwks.get("keys", []) if k.get("kid") == header.get("kid")]
        if not keys:
            raise ReceiptInvalid("receipt signed by a key the ledger does not publish")
        key = _key(keys[0])
        return jwt.decode(token, key, algorithms=["EdDSA"], issuer=origin,
                          options={"require": list(require), "verify_aud": False})
    except (jwt.InvalidTokenError, jwt.PyJWKError) as exc:
        raise ReceiptInvalid(f"receipt does not verify: {exc}") from exc


def _batch_claims(token: str, jwks: dict[str, Any], origin: str) -> dict[str, Any]:
    """The signed batch claims merged with this entry's leaf document (and ``index``)."""
    parts = token.split("~")
    if len(parts) != 3:
        raise ReceiptInvalid("a batch receipt has three parts joined by '~'")
    try:
        leaf, proof = _unb64(parts[1]), _unb64(parts[2])
    except ValueError as exc:
        raise ReceiptInvalid(f"batch receipt: {exc}") from exc
    if len(proof) < 4 or (len(proof) - 4) % 32:
        raise ReceiptInvalid("batch receipt: the proof is not a 4-byte index and 32-byte hashes")
    claims = _verify_jws(parts[0], jwks, BATCH_RECEIPT_TYP, origin, BATCH_CLAIMS)
    size, root = claims.get("size"), claims.get("root")
    if type(size) is not int or not isinstance(root, str):
        raise ReceiptInvalid("batch receipt: size or root is malformed")
    index = int.from_bytes(proof[:4], "big")
    try:
        got = batch_root(leaf, index, size, [proof[i:i + 32] for i in range(4, len(proof), 32)])
        doc = _strict_json(leaf, "leaf document")
    except ValueError as exc:
        raise ReceiptInvalid(f"batch receipt: {exc}") from exc
    if "sha256:" + got.hex() != root:
        raise ReceiptInvalid("batch receipt: the path does not lead to the signed root")
    if not isinstance(doc, dict) or type(doc.get("seq")) is not int \
            or not isinstance(doc.get("entry_hash"), str):
        raise ReceiptInvalid("batch receipt: the leaf document is not a JSON object with an "
                             "integer seq and a string entry_hash")
    if set(doc) - {*LEAF_MEMBERS}:
        raise ReceiptInvalid("batch receipt: the leaf document has a member it does not define")
    fields = {k: doc[k] for k in LEAF_MEMBERS if k in doc}
    signed = {k: v for k, v in claims.items() if k not in ("tenant", "tseq")}  # the leaf's
    return {**signed, **fields, "index": index}


def _tenant_of(claims: dict[str, Any]) -> tuple[str, int | None]:
    """(tenant, tseq) the receipt names: ("default", None) without them."""
    if "tenant" not in claims and "tseq" not in claims:
        return DEFAULT_TENANT, None
    tenant, tseq = claims.get("tenant"), claims.get("tseq")
    if not isinstance(tenant, str) or not TENANT_ID.match(tenant) or tenant == DEFAULT_TENANT \
            or type(tseq) is not int or tseq < 0:
        raise ReceiptInvalid("receipt: tenant and tseq come together, a tenant id other than "
                             "default and an integer >= 0")
    return tenant, tseq


def verify_receipt(token: Any, jwks: dict[str, Any], *, origin: str, ledger_id: str | None,
                   seq: Any, entry_hash: Any, tenant: Any = None,
                   tseq: Any = None) -> dict[str, Any]:
    """The verified claims of ``token`` (per-entry or batch; for a batch receipt, the
    batch's signed claims with its leaf document's fields and ``index``), which must name
    ``seq``, ``entry_hash`` and -- for an entry of a tenant other than ``default`` (None:
    the default tenant) -- ``tenant`` and ``tseq``.  Raises ReceiptInvalid for anything
    else."""
    if not isinstance(token, str):
        raise ReceiptInvalid("the ledger answered without a receipt")
    if "~" in token:
        claims = _batch_claims(token, jwks, origin)
    else:
        claims = _verify_jws(token, jwks, RECEIPT_TYP, origin, RECEIPT_CLAIMS)
    if claims.get("origin") != origin:
        raise ReceiptInvalid("receipt names another ledger origin")
    if ledger_id is not None and claims.get("ledger_id") != ledger_id:
        raise ReceiptInvalid("receipt names another ledger id")
    if claims.get("seq") != seq or claims.get("entry_hash") != entry_hash:
        raise ReceiptInvalid("receipt does not sign the seq and entry_hash the ledger answered",
                             detail={"seq": seq, "entry_hash": entry_hash})
    want = (tenant or DEFAULT_TENANT, None if tenant in (None, DEFAULT_TENANT) else tseq)
    if _tenant_of(claims) != want:
        raise ReceiptInvalid("receipt does not sign the tenant and tseq the ledger answered",
                             detail={"tenant": want[0], "tseq": want[1]})
    return claims
