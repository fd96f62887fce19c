"""Batch receipts (``ledger-batch-receipt/2``): one signature for a committed batch.

A per-entry receipt (``ledger-receipt+jwt``, docs/http.md) costs one Ed25519 signature per
append.  A batch receipt costs one per committed batch: the ledger signs the RFC 9162
Merkle root of the batch's *leaf documents* once, and each caller gets that signed
statement, its own leaf document and its audit path.  The text form (docs/format-receipt.md,
with worked vectors) is three parts joined by ``~`` (a character neither base64url nor a
compact JWS uses; SD-JWT joins its parts the same way)::

    <JWS> "~" base64url(leaf document) "~" base64url(index as 4 bytes, big-endian || path)

* JWS: EdDSA, header ``{"alg": "EdDSA", "kid": <thumbprint>, "typ": BATCH_RECEIPT_TYP}``,
  claims ``{"iss", "origin", "ledger_id", "size", "root": "sha256:<hex>", "iat"}``;
* leaf document: the bytes of a compact JSON object ``{"entry_hash", "producer"?,
  "recorded_at", "seq", "tenant"?, "tseq"?}`` (``tenant``/``tseq`` for an entry of a tenant
  other than ``default``: what /2 adds to /1) as the ledger wrote them (a verifier hashes
  these exact bytes and reads the fields from them; it never re-encodes them);
* tree: ``leaf = SHA-256(0x00 || leaf document)``, nodes ``SHA-256(0x01 || l || r)``,
  RFC 9162 §2.1.1 over the batch's leaves in commit order; the path is PATH(index, D[size]).

Pure: the signature is made and checked by the callers (``ledger.api.receipts``, the
client's own ``ledger.client.receipt``).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from collections.abc import Sequence
from typing import Any

from ledger.core.merkle import HASH_SIZE, LEAF_PREFIX, MemoryTree, root_from_inclusion_proof
from ledger.core.strict import StrictError, loads
from ledger.core.tenant import DEFAULT_TENANT, is_tenant

__all__ = ["BATCH_CLAIMS", "BATCH_RECEIPT_TYP", "FORMAT", "FORMAT_V1", "SEPARATOR",
           "TENANT_FIELDS", "batch_claims", "batch_tree", "check_tenant_claims", "encode",
           "is_batch", "leaf_document", "leaf_hash", "read_leaf", "root_of", "split",
           "tenant_claims"]

FORMAT = "ledger-batch-receipt/2"  # /1 with the leaf members tenant and tseq
FORMAT_V1 = "ledger-batch-receipt/1"  # a /2 leaf without them is a /1 leaf, byte for byte
BATCH_RECEIPT_TYP = "ledger-batch-receipt+jwt"
BATCH_CLAIMS = ("iss", "origin", "ledger_id", "size", "root", "iat")
LEAF_FIELDS = ("entry_hash", "recorded_at", "seq")  # and "producer" when the append had one
TENANT_FIELDS = ("tenant", "tseq")  # both, for an entry of a tenant other than "default"
SEPARATOR = "~"
INDEX_BYTES = 4
MAX_SIZE = 2 ** (8 * INDEX_BYTES) - 1


def leaf_document(seq: int, entry_hash: str, recorded_at: str, producer: str | None,
                  tenant: str | None = None, tseq: int | None = None) -> bytes:
    """The leaf document of one committed entry: compact JSON, keys sorted, ASCII; an entry
    of a tenant other than ``default`` adds its ``tenant`` and ``tseq``."""
    doc: dict[str, Any] = {"entry_hash": entry_hash, "recorded_at": recorded_at, "seq": seq}
    if producer is not None:
        doc["producer"] = producer
    doc.update(tenant_claims(tenant, tseq))
    return json.dumps(doc, sort_keys=True, separators=(",", ":")).encode("ascii")


def leaf_hash(leaf: bytes) -> bytes:
    """SHA-256(0x00 || leaf document)."""
    return hashlib.sha256(LEAF_PREFIX + leaf).digest()


def batch_tree(leaves: Sequence[bytes]) -> tuple[bytes, list[list[bytes]]]:
    """The root over ``leaves`` (leaf documents, in order) and each one's audit path."""
    if not 1 <= len(leaves) <= MAX_SIZE:
        raise ValueError(f"a batch receipt covers 1..{MAX_SIZE} entries, got {len(leaves)}")
    tree = MemoryTree()
    for leaf in leaves:
        tree.append_leaf(leaf_hash(leaf))
    return tree.root(), [tree.inclusion_proof(i) for i in range(len(leaves))]


def batch_claims(*, origin: str, ledger_id: str, size: int, root: bytes,
                 now_s: int) -> dict[str, Any]:
    """The claims the ledger signs once for a batch."""
    return {"iss": origin, "origin": origin, "ledger_id": ledger_id, "size": size,
            "root": "sha256:" + root.hex(), "iat": now_s}


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str, what: str) -> bytes:
    """Strict unpadded base64url: no padding, no other characters, canonical last bits."""
    try:
        data = base64.b64decode(text + "=" * (-len(text) % 4), altchars=b"-_", validate=True)
    except (binascii.Error, ValueError):
        raise ValueError(f"the {what} part is not unpadded base64url") from None
    if "=" in text or _b64(data) != text:
        raise ValueError(f"the {what} part is not canonical unpadded base64url")
    return data


def encode(jws: str, leaf: bytes, index: int, path: Sequence[bytes]) -> str:
    """The text form of one caller's batch receipt."""
    if not 0 <= index <= MAX_SIZE:
        raise ValueError(f"leaf index {index} out of range")
    proof = index.to_bytes(INDEX_BYTES, "big") + b"".join(path)
    return SEPARATOR.join((jws, _b64(leaf), _b64(proof)))


def is_batch(receipt: object) -> bool:
    """Whether ``receipt`` has the batch form (a per-entry receipt is a bare JWS)."""
    return isinstance(receipt, str) and SEPARATOR in receipt


def split(receipt: str) -> tuple[str, bytes, int, list[bytes]]:
    """(JWS, leaf document, index, path) of a batch receipt; raises ValueError naming the
    part that is malformed.  Nothing here is verified: see :func:`root_of`."""
    parts = receipt.split(SEPARATOR)
    if len(parts) != 3:
        raise ValueError(f"a batch receipt has 3 parts joined by '{SEPARATOR}', "
                         f"got {len(parts)}")
    jws, leaf_text, proof_text = parts
    leaf = _unb64(leaf_text, "leaf")
    proof = _unb64(proof_text, "proof")
    if len(proof) < INDEX_BYTES or (len(proof) - INDEX_BYTES) % HASH_SIZE:
        raise ValueError(f"the proof part must be {INDEX_BYTES} bytes of index and whole "
                         f"{HASH_SIZE}-byte hashes, got {len(proof)} bytes")
    index = int.from_bytes(proof[:INDEX_BYTES], "big")
    path = [proof[i:i + HASH_SIZE] for i in range(INDEX_BYTES, len(proof), HASH_SIZE)]
    return jws, leaf, index, path


def root_of(leaf: bytes, index: int, size: int, path: Sequence[bytes]) -> bytes:
    """The root the path implies for ``leaf`` at ``index`` in a batch of ``size``.
    Raises ProofError (index out of range, wrong path length)."""
    return root_from_inclusion_proof(index, size, leaf_hash(leaf), path)


def tenant_claims(tenant: str | None, tseq: int | None) -> dict[str, Any]:
    """``{"tenant", "tseq"}`` for an entry of a tenant other than ``default``, else nothing:
    a receipt of the default tenant is what it always was."""
    if tenant is None or tenant == DEFAULT_TENANT:
        return {}
    if not is_tenant(tenant) or type(tseq) is not int or tseq < 0:
        raise ValueError("a tenant receipt names a tenant id and a non-negative tseq")
    return {"tenant": tenant, "tseq": tseq}


def check_tenant_claims(doc: dict[str, Any]) -> tuple[str, int | None]:
    """(tenant, tseq) a receipt's claims or leaf document name: ``("default", None)``
    without them; raises ValueError when only one is there, the tenant is not a tenant id
    or is ``default`` (never written: one statement has one form), or tseq is not an
    integer >= 0."""
    has = [k in doc for k in TENANT_FIELDS]
    if not any(has):
        return DEFAULT_TENANT, None
    tenant, tseq = doc.get("tenant"), doc.get("tseq")
    if not all(has) or not is_tenant(tenant) or tenant == DEFAULT_TENANT \
            or type(tseq) is not int or tseq < 0:
        raise ValueError("tenant and tseq come together: a tenant id other than default and "
                         "an integer >= 0")
    assert isinstance(tenant, str)
    return tenant, tseq


def read_leaf(leaf: bytes) -> dict[str, Any]:
    """The fields of a leaf document, read strictly (UTF-8 JSON, no duplicate keys, no
    member but ``entry_hash``, ``recorded_at``, ``seq``, ``producer``, ``tenant`` and
    ``tseq``); raises ValueError unless it is a JSON object with an integer ``seq`` and
    string ``entry_hash``/``recorded_at`` (and ``producer``, if any; ``tenant`` and ``tseq``
    together, if any)."""
    try:
        doc = loads(leaf)
    except StrictError as exc:
        raise ValueError(f"the leaf document is not strict JSON: {exc.message}") from None
    if not isinstance(doc, dict):
        raise ValueError("the leaf document is not a JSON object")
    unknown = sorted(set(doc) - {*LEAF_FIELDS, "producer", *TENANT_FIELDS})
    if unknown:
        raise ValueError(f"the leaf document has the unknown member {unknown[0]!r}")
    if type(doc.get("seq")) is not int or not isinstance(doc.get("entry_hash"), str) \
            or not isinstance(doc.get("recorded_at"), str) \
            or not isinstance(doc.get("producer", ""), str):
        raise ValueError("the leaf document needs an integer seq and string entry_hash, "
                         "recorded_at (and producer)")
    check_tenant_claims(doc)
    return doc
