"""Tenants: one hash chain per tenant under the one global Merkle tree (docs/tenants.md).

Every entry belongs to exactly one tenant.  A tenant id is 1..63 characters of
``[a-z0-9._-]`` starting with a letter or a digit (:func:`check_tenant`).  ``default`` is the
tenant of every entry written before tenants existed, and of every entry appended without
one.

Hashed structures (SHA-256; worked vectors in docs/format.md §11)::

    tseq            = 0-based position of the entry in its tenant's chain
    default tenant  : entry_hash = the v1 link, ledger.core.entry.entry_hash(prev, seq, t, body)
                      with prev = entry_hash of the previous *default* entry, or
                      genesis_hash(ledger_id) for tseq 0 -- so a ledger that only ever had
                      the default tenant is byte-for-byte the single-chain ledger it was
    other tenants   : entry_hash = SHA-256(TENANT_ENTRY_TAG || prev || u64be(seq) ||
                          u64be(tseq) || u64be(recorded_at_us) || u8(len(tenant)) ||
                          ascii(tenant) || body_hash)
                      prev = entry_hash of the tenant's previous entry, or
                      tenant_genesis(ledger_id, tenant) for tseq 0
    tenant_genesis  = SHA-256(TENANT_GENESIS_TAG || utf8(ledger_id) || 0x00 || ascii(tenant))

The tenant heads at a tree size N are, for every tenant with an entry below N, the pair
(count of its entries below N, entry_hash of the last of them).  They are committed by a
Merkle tree (RFC 6962 hashing) over the leaves, sorted by tenant id::

    head_leaf       = u8(len(tenant)) || ascii(tenant) || u64be(count) || head_hash
    heads_root      = MTH(head_leaf...)   (leaf hash SHA-256(0x00 || head_leaf))

and a checkpoint of size N carries the extension line ``tenants <n> <base64 heads_root>``
whenever an entry below N belongs to a tenant other than ``default``.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ledger.core.entry import (
    ENTRY_TAG,
    HASH_SIZE,
    MAX_U63,
    entry_hash,
    genesis_hash,
)
from ledger.core.merkle import (
    LEAF_PREFIX,
    inclusion_nodes,
    root_from_inclusion_proof,
)
from ledger.errors import LedgerError, TenantError

DEFAULT_TENANT = "default"
TENANT_ENTRY_TAG = b"ledger.entry.tenant.v1\x00"
TENANT_GENESIS_TAG = b"ledger.genesis.tenant.v1\x00"
EXTENSION_PREFIX = "tenants "
MAX_TENANT_LEN = 63
_TENANT_RE = re.compile(r"[a-z0-9][a-z0-9._-]{0,62}\Z")
_U64 = struct.Struct(">Q")


def is_tenant(value: object) -> bool:
    return isinstance(value, str) and _TENANT_RE.match(value) is not None


def check_tenant(value: object, field: str = "tenant") -> str:
    """``value`` when it is a valid tenant id; raises TenantError naming the rule."""
    if not is_tenant(value):
        raise TenantError(f"{field} must be 1..{MAX_TENANT_LEN} characters of a-z, 0-9, '.', "
                          "'_', '-', starting with a letter or a digit", field=field)
    assert isinstance(value, str)
    return value


def tseq_of(tenant: str, seq: int, tseq: int | None) -> int:
    """An entry's place in its tenant's chain: ``tseq``, or ``seq`` for an entry written
    before tenants (stored NULL; such entries are always tenant ``default``)."""
    return seq if tseq is None and tenant == DEFAULT_TENANT else (-1 if tseq is None else tseq)


def tenant_genesis(ledger_id: str, tenant: str) -> bytes:
    """``prev_hash`` of a tenant's first entry (tseq 0)."""
    if tenant == DEFAULT_TENANT:
        return genesis_hash(ledger_id)
    return hashlib.sha256(TENANT_GENESIS_TAG + ledger_id.encode("utf-8") + b"\x00"
                          + check_tenant(tenant).encode("ascii")).digest()


def tenant_entry_hash(tenant: str, prev_hash: bytes, seq: int, tseq: int, recorded_at_us: int,
                      body: bytes) -> bytes:
    """The link of an entry of ``tenant`` (the v1 link for the default tenant, which does
    not bind ``tseq``: it is the entry's position in the default chain)."""
    if tenant == DEFAULT_TENANT:
        return entry_hash(prev_hash, seq, recorded_at_us, body)
    if len(prev_hash) != HASH_SIZE or len(body) != HASH_SIZE:
        raise ValueError("prev_hash and body_hash must be 32 bytes")
    if not all(0 <= x <= MAX_U63 for x in (seq, tseq, recorded_at_us)):
        raise ValueError("seq, tseq and recorded_at_us must be in [0, 2**63-1]")
    t = check_tenant(tenant).encode("ascii")
    return hashlib.sha256(TENANT_ENTRY_TAG + prev_hash + _U64.pack(seq) + _U64.pack(tseq)
                          + _U64.pack(recorded_at_us) + bytes([len(t)]) + t + body).digest()


@dataclass(frozen=True)
class LinkParts:
    """A tenant's link as the byte string ``tag || prev || u64be(seq) || [u64be(tseq)] ||
    u64be(recorded_at_us) || tail`` that SHA-256 hashes: what a store that computes the
    link itself (the PostgreSQL one-statement append) needs.  ``binds_tseq`` is False for
    the default tenant's v1 link."""

    tag: bytes
    binds_tseq: bool
    tail: bytes


def link_parts(tenant: str, body: bytes) -> LinkParts:
    """The parts of :func:`tenant_entry_hash` for an entry of ``tenant`` with ``body``."""
    if tenant == DEFAULT_TENANT:
        return LinkParts(ENTRY_TAG, False, body)
    t = check_tenant(tenant).encode("ascii")
    return LinkParts(TENANT_ENTRY_TAG, True, bytes([len(t)]) + t + body)


@dataclass(frozen=True, order=True)
class TenantHead:
    """A tenant's chain at a tree size: ``count`` entries, the last one's ``head_hash``."""

    tenant: str
    count: int
    head_hash: bytes

    def leaf(self) -> bytes:
        t = check_tenant(self.tenant).encode("ascii")
        if len(self.head_hash) != HASH_SIZE or not 0 < self.count <= MAX_U63:
            raise TenantError("a tenant head has a positive count and a 32-byte hash")
        return bytes([len(t)]) + t + _U64.pack(self.count) + self.head_hash

    def leaf_hash(self) -> bytes:
        return hashlib.sha256(LEAF_PREFIX + self.leaf()).digest()

    def to_json(self) -> dict[str, object]:
        return {"tenant": self.tenant, "count": self.count,
                "head_hash": "sha256:" + self.head_hash.hex()}


def sorted_heads(heads: Iterable[TenantHead]) -> list[TenantHead]:
    """The heads in leaf order (tenant id, ASCII); raises TenantError on a repeated id."""
    out = sorted(heads, key=lambda h: h.tenant.encode("ascii"))
    for a, b in zip(out, out[1:], strict=False):
        if a.tenant == b.tenant:
            raise TenantError(f"tenant {a.tenant!r} has two heads")
    return out


def heads_root(heads: Sequence[TenantHead]) -> bytes:
    """MTH over the head leaves in leaf order (``heads`` must already be sorted)."""
    return hash_range_rfc([h.leaf_hash() for h in heads])


def hash_range_rfc(leaf_hashes: Sequence[bytes]) -> bytes:
    """RFC 6962 MTH of already-hashed leaves (the empty tree: SHA-256 of nothing)."""
    if not leaf_hashes:
        return hashlib.sha256(b"").digest()
    return _mth(list(leaf_hashes))


def _mth(hs: list[bytes]) -> bytes:
    if len(hs) == 1:
        return hs[0]
    k = 1
    while k * 2 < len(hs):
        k *= 2
    return hashlib.sha256(b"\x01" + _mth(hs[:k]) + _mth(hs[k:])).digest()


def heads_proof(heads: Sequence[TenantHead], index: int) -> list[bytes]:
    """RFC 9162 inclusion proof of leaf ``index`` in the heads tree (sorted ``heads``)."""
    hashes = [h.leaf_hash() for h in heads]
    out = []
    for spec in inclusion_nodes(index, len(hashes)):
        out.append(hash_range_rfc(hashes[spec.start:spec.end]))
    return out


def verify_head(head: TenantHead, index: int, count: int, proof: Sequence[bytes],
                root: bytes) -> bool:
    """Whether ``head`` is leaf ``index`` of a heads tree of ``count`` leaves with ``root``."""
    try:
        return root_from_inclusion_proof(index, count, head.leaf_hash(), proof) == root
    except (ValueError, LedgerError):  # a malformed proof or head (ProofError, TenantError)
        return False


def extension_line(heads: Sequence[TenantHead]) -> str:
    """``tenants <n> <base64 heads_root>`` for sorted ``heads``."""
    return f"{EXTENSION_PREFIX}{len(heads)} {base64.b64encode(heads_root(heads)).decode()}"


def needs_extension(heads: Sequence[TenantHead]) -> bool:
    """A checkpoint carries the line once any tenant but ``default`` has an entry."""
    return any(h.tenant != DEFAULT_TENANT for h in heads)


def parse_extension(extensions: Sequence[str]) -> tuple[int, bytes] | None:
    """(count, heads_root) from a checkpoint's extension lines; None when it has no
    tenants line; raises TenantError on a malformed or repeated one."""
    found = [x for x in extensions if x.startswith(EXTENSION_PREFIX)]
    if not found:
        return None
    if len(found) > 1:
        raise TenantError("the checkpoint has more than one tenants line")
    parts = found[0].split(" ")
    if len(parts) != 3 or not parts[1].isdigit() or (len(parts[1]) > 1 and parts[1][0] == "0"):
        raise TenantError(f"malformed tenants line {found[0]!r}")
    try:
        root = base64.b64decode(parts[2], validate=True)
    except (binascii.Error, ValueError):
        raise TenantError(f"malformed tenants line {found[0]!r}") from None
    if len(root) != HASH_SIZE or base64.b64encode(root).decode() != parts[2]:
        raise TenantError(f"malformed tenants line {found[0]!r}")
    return int(parts[1]), root


# -- the proof that a tenant has no head (docs/tenants.md "Proof of a tenant's absence") ------
ABSENCE_VERSION = 1
ABSENCE_KEYS = frozenset({"v", "leaves", "left", "right"})
ABSENCE_LEAF_KEYS = frozenset({"id", "count", "head_hash", "index", "path"})


def absence_proof(heads: Sequence[TenantHead], tenant: str) -> dict[str, object]:
    """The manifest's ``tenant.absence`` object: the one or two leaves of the (sorted,
    non-empty) heads tree that bracket ``tenant``, each with its inclusion proof.  Raises
    TenantError when ``tenant`` has a head or the heads tree is empty."""
    key = check_tenant(tenant).encode("ascii")
    if not heads or any(h.tenant == tenant for h in heads):
        raise TenantError(f"tenant {tenant!r} has a head: its absence cannot be proven")
    at = sum(1 for h in heads if h.tenant.encode("ascii") < key)  # T's place in the order

    def leaf(i: int) -> dict[str, object]:
        h = heads[i]
        return {"id": h.tenant, "count": h.count, "head_hash": "sha256:" + h.head_hash.hex(),
                "index": i, "path": [p.hex() for p in heads_proof(heads, i)]}

    return {"v": ABSENCE_VERSION, "leaves": len(heads),
            "left": leaf(at - 1) if at > 0 else None,
            "right": leaf(at) if at < len(heads) else None}


def check_absence(tenant: str, absence: object, leaves: int, root: bytes) -> str | None:
    """None when ``absence`` (a manifest's ``tenant.absence``) proves that ``tenant`` has no
    leaf in the heads tree of ``leaves`` leaves with ``root``; else why not.  The leaves are
    sorted by id strictly ascending (the signer's rule, which the audit checks), so two
    adjacent leaves ``i``, ``i + 1`` with ``id_i < tenant < id_{i+1}`` leave no room for it,
    nor does leaf 0 with ``tenant < id_0`` or leaf ``n - 1`` with ``id_{n-1} < tenant``."""
    a = absence
    if not isinstance(a, dict) or set(a) != ABSENCE_KEYS:
        return "absence must be {v, leaves, left, right}"
    if type(a["v"]) is not int or a["v"] != ABSENCE_VERSION:
        return f"absence proof version {a['v']!r} is not {ABSENCE_VERSION}"
    if type(a["leaves"]) is not int or a["leaves"] != leaves:
        return f"absence.leaves is not the {leaves} leaves of the checkpoint's tenants line"
    key = tenant.encode("ascii")
    found: dict[str, int] = {}
    for side in ("left", "right"):
        x = a[side]
        if x is None:
            continue
        if not isinstance(x, dict) or set(x) != ABSENCE_LEAF_KEYS or not is_tenant(x["id"]) \
                or type(x["count"]) is not int or type(x["index"]) is not int \
                or not isinstance(x["path"], list) \
                or not all(isinstance(p, str) and len(p) == 64 for p in x["path"]):
            return f"absence.{side} must be {{id, count, head_hash, index, path}}"
        try:
            head = bytes.fromhex(x["head_hash"][7:]) if isinstance(x["head_hash"], str) \
                and x["head_hash"].startswith("sha256:") else b""
            path = [bytes.fromhex(p) for p in x["path"]]
        except ValueError:
            return f"absence.{side} has a malformed hash"
        if len(head) != HASH_SIZE or "sha256:" + head.hex() != x["head_hash"] \
                or any(p.hex() != s for p, s in zip(path, x["path"], strict=True)):
            return f"absence.{side} has a malformed hash"
        if not verify_head(TenantHead(x["id"], x["count"], head), x["index"], leaves, path,
                           root):
            return f"absence.{side} is not leaf {x['index']} of the heads tree"
        found[side] = x["index"]
        below = x["id"].encode("ascii") < key
        if below != (side == "left") or x["id"] == tenant:
            return f"absence.{side} ({x['id']}) is not on the {side} of {tenant}"
    if not found:
        return "absence has neither a left nor a right leaf"
    if "left" not in found and found["right"] != 0:
        return "a right leaf alone must be leaf 0"
    if "right" not in found and found["left"] != leaves - 1:
        return f"a left leaf alone must be the last leaf ({leaves - 1})"
    if len(found) == 2 and found["right"] != found["left"] + 1:
        return "the left and right leaves are not adjacent"
    return None
