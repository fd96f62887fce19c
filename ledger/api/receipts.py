"""Signed append receipts: per entry (a JWT each) or per committed batch (one signature).

**Per entry** (the default): header ``{"alg": "EdDSA", "kid": <ledger key thumbprint>,
"typ": "ledger-receipt+jwt"}``; claims::

    {"iss": <ledger origin>, "origin": <ledger origin>, "ledger_id": <uuid>,
     "seq": <int>, "entry_hash": "sha256:<hex>", "recorded_at": "<RFC 3339 µs>",
     "producer": <token subject>, "tenant": <id>, "tseq": <int>, "iat": <s>}

``tenant`` and ``tseq`` (the entry's chain and its place there) only for an entry of a
tenant other than ``default``: a default-tenant receipt has exactly the claims it always had.

**Per batch** (asked for with ``Prefer: receipt=batch``; ``ledger.core.receipt``,
docs/format-receipt.md): one JWS over the Merkle root of the batch's leaf documents, and
for each caller its leaf document and audit path, ``<JWS>~<leaf>~<proof>``.

A receipt is issued only after the entry's transaction has committed; it says
"this ledger holds entry ``seq`` with this hash".  Verify it with the keys
at ``/.well-known/jwks.json`` and, for the strongest check, with an inclusion
proof (``GET /v1/entries/{seq}?proof=true``) whose leaf is ``entry_hash``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ledger.core import receipt as batch
from ledger.core.tenant import DEFAULT_TENANT
from ledger.crypto.tokens import JwtSigner, verify_ledger_jwt
from ledger.errors import IntegrityError, ProofError
from ledger.ops.append import AppendResult
from ledger.ops.tokens import RECEIPT_TYP

RECEIPT_CLAIMS = ("iss", "origin", "ledger_id", "seq", "entry_hash", "recorded_at", "iat")
PREFER_BATCH = "receipt=batch"


def wants_batch(prefer: str | None) -> bool:
    """Whether a ``Prefer`` header (RFC 7240) asks for batch receipts."""
    if not prefer:
        return False
    return any(p.strip().lower().replace('"', "") == PREFER_BATCH
               for part in prefer.split(",") for p in part.split(";")[:1])


def receipt_claims(result: AppendResult, *, origin: str, ledger_id: str,
                   producer: str | None, now_s: int) -> dict[str, Any]:
    claims: dict[str, Any] = {"iss": origin, "origin": origin, "ledger_id": ledger_id,
                              "seq": result.seq, "entry_hash": result.entry_hash,
                              "recorded_at": result.recorded_at, "iat": now_s}
    if producer is not None:
        claims["producer"] = producer
    claims.update(batch.tenant_claims(result.tenant, result.tseq))
    return claims


def sign_receipt(signer: JwtSigner, result: AppendResult, *, origin: str, ledger_id: str,
                 producer: str | None, now_s: int) -> str:
    """The receipt JWT for an accepted ``result`` (``result.ok`` must be true)."""
    assert result.ok, "receipts are only issued for appended entries"
    return signer.sign_jwt(receipt_claims(result, origin=origin, ledger_id=ledger_id,
                                          producer=producer, now_s=now_s), RECEIPT_TYP)


def sign_batch_receipts(signer: JwtSigner, items: Sequence[tuple[AppendResult, str | None]],
                        *, origin: str, ledger_id: str, now_s: int) -> list[str]:
    """One batch receipt per accepted ``(result, producer)``, in order, under ONE signature."""
    assert all(r.ok for r, _ in items), "receipts are only issued for appended entries"
    leaves = [batch.leaf_document(r.seq, r.entry_hash, r.recorded_at,  # type: ignore[arg-type]
                                  p, r.tenant, r.tseq) for r, p in items]
    root, paths = batch.batch_tree(leaves)
    jws = signer.sign_jwt(batch.batch_claims(origin=origin, ledger_id=ledger_id,
                                             size=len(leaves), root=root, now_s=now_s),
                          batch.BATCH_RECEIPT_TYP)
    return [batch.encode(jws, leaf, i, path) for i, (leaf, path) in enumerate(zip(leaves, paths,
                                                                                  strict=True))]


def verify_receipt(token: str, jwks: dict[str, Any], origin: str,
                   entry: dict[str, Any] | None = None) -> dict[str, Any]:
    """The claims of a receipt signed by one of ``jwks``'s Ed25519 keys for ``origin``:
    a per-entry receipt's own claims, or for a batch receipt the batch's signed claims with
    the leaf's ``seq``/``entry_hash``/``recorded_at``/``producer``/``tenant``/``tseq`` (and
    ``index``).  With ``entry`` (an entry or an append response: ``seq``, ``entry_hash`` and,
    for a tenant other than ``default``, ``tenant`` and ``tseq``), the receipt must name that
    entry, its tenant and its place in the tenant's chain.

    Raises IntegrityError (code ``receipt_invalid``) for anything else.
    """
    claims = _verified(token, jwks, origin)
    try:
        tenant, tseq = batch.check_tenant_claims(claims)
    except ValueError as exc:
        raise IntegrityError(f"receipt tenant: {exc}", code="receipt_invalid") from exc
    if entry is not None:
        want = entry.get("tenant") or DEFAULT_TENANT
        want_tseq = None if want == DEFAULT_TENANT else entry.get("tseq")
        if (claims.get("seq"), claims.get("entry_hash")) != (entry.get("seq"),
                                                             entry.get("entry_hash")):
            raise IntegrityError("the receipt does not name this entry's seq and entry_hash",
                                 code="receipt_invalid")
        if (tenant, tseq) != (want, want_tseq):
            raise IntegrityError(f"the receipt names tenant {tenant} (tseq {tseq}), the entry "
                                 f"is of {want} (tseq {want_tseq})", code="receipt_invalid")
    return claims


def _verified(token: str, jwks: dict[str, Any], origin: str) -> dict[str, Any]:
    if not batch.is_batch(token):
        return verify_ledger_jwt(token, jwks, typ=RECEIPT_TYP, issuer=origin,
                                 require=list(RECEIPT_CLAIMS), code="receipt_invalid")
    try:
        jws, leaf, index, path = batch.split(token)
        doc = batch.read_leaf(leaf)
    except ValueError as exc:
        raise IntegrityError(f"malformed batch receipt: {exc}", code="receipt_invalid") from exc
    claims = verify_ledger_jwt(jws, jwks, typ=batch.BATCH_RECEIPT_TYP, issuer=origin,
                               require=list(batch.BATCH_CLAIMS), code="receipt_invalid")
    size, root = claims.get("size"), claims.get("root")
    if claims.get("origin") != origin or type(size) is not int or not isinstance(root, str):
        raise IntegrityError("batch receipt claims are malformed", code="receipt_invalid")
    try:
        got = batch.root_of(leaf, index, size, path)
    except ProofError as exc:
        raise IntegrityError(f"batch receipt path: {exc}", code="receipt_invalid") from exc
    if "sha256:" + got.hex() != root:
        raise IntegrityError("batch receipt path does not lead to the signed root",
                             code="receipt_invalid")
    signed = {k: v for k, v in claims.items() if k not in batch.TENANT_FIELDS}  # the leaf's
    return {**signed, **{k: doc[k] for k in (*batch.LEAF_FIELDS, "producer",
                                              *batch.TENANT_FIELDS) if k in doc},
            "index": index}
