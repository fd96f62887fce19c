"""The tenant export's parts (docs/tenants.md "A complete tenant export"): its filter and the
manifest's ``tenant`` object, the proof that the checkpoint commits to the tenant's head."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from ledger.core.entry import hash_hex
from ledger.core.note import Checkpoint
from ledger.core.tenant import (
    TenantHead,
    absence_proof,
    check_tenant,
    heads_proof,
    heads_root,
    parse_extension,
    sorted_heads,
)
from ledger.errors import CheckpointError, UsageError
from ledger.ops.filters import Filters
from ledger.store.tenants import heads_at


def tenant_filters(tenant: str | None, f: Filters) -> Filters:
    """``f``, or for a tenant export (no other filter allowed) the tenant's entries."""
    if tenant is None:
        return f
    check_tenant(tenant)
    if f != Filters():
        raise UsageError("a tenant export is the tenant's whole chain: it takes no other "
                         "filter", code="tenant_export_filtered", field="tenant")
    return replace(f, tenant=(tenant,))


def tenant_section(store: Any, cp: Checkpoint, tenant: str, written: int,
                   absence: bool = True) -> dict[str, Any]:
    """The manifest's ``tenant`` object: the tenant's head at the checkpoint and the proof
    that the checkpoint's tenants line commits to it, or when the tenant has no head under a
    tenants line the proof of its absence (docs/tenants.md; ``absence`` False withholds it:
    it shows the neighbouring tenants' ids, counts and head hashes).  Raises
    CheckpointError when the entries do not give the heads the checkpoint signed (the
    ledger changed behind the append path: audit it)."""
    heads = sorted_heads(TenantHead(t, n, h) for t, n, h in heads_at(store.cur, store.pg,
                                                                     cp.size))
    line = parse_extension(cp.extensions)
    mine = [i for i, h in enumerate(heads) if h.tenant == tenant]
    count = heads[mine[0]].count if mine else 0
    section: dict[str, Any] = {
        "id": tenant, "count": count,
        "head_hash": hash_hex(heads[mine[0]].head_hash) if mine else None, "heads": None}
    if line is not None:
        if line != (len(heads), heads_root(heads)):
            raise CheckpointError("the tenant heads of the entries are not those the "
                                  f"checkpoint of size {cp.size} committed to; run ledger audit",
                                  code="tenant_heads_mismatch")
        if mine:
            section["heads"] = {"count": len(heads), "index": mine[0],
                                "path": [h.hex() for h in heads_proof(heads, mine[0])]}
        elif absence:  # the leaves that bracket the tenant: it has none
            section["absence"] = absence_proof(heads, tenant)
    if written != count:
        raise CheckpointError(f"tenant {tenant} has {written} entries below {cp.size} but its "
                              f"head counts {count}; run ledger audit",
                              code="tenant_heads_mismatch")
    return section
