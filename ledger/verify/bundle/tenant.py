"""The completeness of a tenant export (``ledger-export/2`` with a ``tenant`` manifest
object; docs/tenants.md "A complete tenant export").

A tenant's entries are one hash chain from its genesis; the checkpoint's ``tenants`` line
commits to every tenant's head (count, hash of its last entry) at the checkpoint's size. The
bundle proves it holds exactly that chain when: the head named by the manifest is a leaf of
the heads tree whose root the signed checkpoint carries; ``entries.jsonl`` holds only the
tenant's entries, tseq 0, 1, ... in seq order, the first linked to the tenant's genesis, each
to the one before, and the last is the head -- so none was left out, added or reordered (a
second chain to the same head would need a SHA-256 collision).  Each entry is in the global
tree by its interval's inclusion proof (the rows step).  A tenant without entries under a
tenants line is proven empty by the manifest's ``absence``: the adjacent head leaves that
bracket its id in the sorted heads tree (ledger.core.tenant.check_absence).
"""

from __future__ import annotations

from ledger.core.entry import parse_hash_hex
from ledger.core.finding import FindingClass
from ledger.core.tenant import (
    DEFAULT_TENANT,
    TenantHead,
    check_absence,
    is_tenant,
    parse_extension,
    tenant_genesis,
    verify_head,
)
from ledger.errors import LedgerError
from ledger.verify.bundle.context import BundleContext
from ledger.verify.bundle.sink import FindingSink

ENTRIES = "entries.jsonl"
MANIFEST = "manifest.json"
CHECKPOINT = "checkpoint.txt"
SECTION_KEYS = {"id", "count", "head_hash", "heads"}


class TenantCheck:
    """Fed every ``entries.jsonl`` row in order (:meth:`add`); :meth:`finish` says whether
    the tenant's chain is proven complete (its own findings are in the sink)."""

    def __init__(self, ctx: BundleContext, sink: FindingSink) -> None:
        self.ctx, self.sink = ctx, sink
        self.section = ctx.manifest.get("tenant")
        self.ok = self._read()
        self.rows = 0

    def _read(self) -> bool:
        sec = self.section
        try:
            if not isinstance(sec, dict) or set(sec) - {"absence"} != SECTION_KEYS \
                    or not is_tenant(sec["id"]) or type(sec["count"]) is not int \
                    or sec["count"] < 0:
                raise ValueError("tenant must be {id, count, head_hash, heads[, absence]}")
            if "absence" in sec and (sec["count"] or sec["heads"] is not None):
                raise ValueError("only a tenant without entries has an absence proof")
            self.tenant: str = sec["id"]
            self.count: int = sec["count"]
            self.head = None if sec["head_hash"] is None else parse_hash_hex(sec["head_hash"])
            if (self.head is None) != (self.count == 0):
                raise ValueError("head_hash is null exactly when count is 0")
            lid = self.ctx.manifest.get("ledger_id")
            self.prev: bytes | None = tenant_genesis(lid, self.tenant) \
                if isinstance(lid, str) else None
        except (ValueError, TypeError, KeyError) as exc:
            self.sink.fail("manifest_malformed", FindingClass.PAYLOAD_MODIFIED,
                           f"tenant: {exc}", MANIFEST)
            return False
        self.next_tseq = 0
        return True

    def add(self, row: object) -> None:
        if not self.ok and not hasattr(self, "tenant"):
            return
        seq = getattr(row, "seq", None)
        tenant = getattr(row, "tenant", None) or DEFAULT_TENANT
        if tenant != self.tenant:
            self.sink.fail("tenant_foreign_entry", FindingClass.CONTRACT_VIOLATION,
                           f"an entry of tenant {tenant} in the export of {self.tenant}",
                           ENTRIES, seq)
            self.ok = False
            return
        self.rows += 1
        tseq = getattr(row, "tseq", None)
        if tseq != self.next_tseq:
            self.sink.fail("tenant_incomplete", FindingClass.DELETED,
                           f"tseq {tseq} where {self.next_tseq} comes next in the tenant's chain "
                           "(an entry dropped, added or reordered)", ENTRIES, seq,
                           self.next_tseq, tseq)
            self.ok = False
        if getattr(row, "prev_hash", None) != self.prev:
            self.sink.fail("tenant_incomplete", FindingClass.FORKED,
                           "the entry does not link to the tenant's previous entry (or its "
                           "genesis)", ENTRIES, seq)
            self.ok = False
        self.prev = getattr(row, "entry_hash", None)
        self.next_tseq = (tseq if isinstance(tseq, int) else self.next_tseq) + 1

    def finish(self) -> bool:
        """Whether the export holds exactly the tenant's chain committed at the checkpoint."""
        if not hasattr(self, "tenant"):
            return False
        if self.rows != self.count or (self.count and self.prev != self.head):
            self.sink.fail("tenant_incomplete", FindingClass.TRUNCATED,
                           f"the export holds {self.rows} entries of the tenant ending at "
                           f"another hash; its head counts {self.count}", ENTRIES,
                           expected=self.count, actual=self.rows)
            self.ok = False
        return self._head_committed() and self.ok

    def _head_committed(self) -> bool:
        cp = self.ctx.checkpoint
        if cp is None:
            return False
        try:
            line = parse_extension(cp.extensions)
        except LedgerError as exc:
            self.sink.fail("tenant_head_unproven", FindingClass.SIGNATURE_INVALID,
                           f"the checkpoint's tenants line cannot be read: {exc}", CHECKPOINT)
            return False
        heads = self.section.get("heads") if isinstance(self.section, dict) else None
        if line is None:
            return self._no_line(cp.size)
        if self.count == 0:
            return self._absent(line)
        try:
            assert self.head is not None
            ok = isinstance(heads, dict) and set(heads) == {"count", "index", "path"} \
                and heads["count"] == line[0] and verify_head(
                    TenantHead(self.tenant, self.count, self.head), heads["index"], line[0],
                    [bytes.fromhex(h) for h in heads["path"]], line[1])
        except (ValueError, TypeError, KeyError, AssertionError):
            ok = False
        if not ok:
            self.sink.fail("tenant_head_unproven", FindingClass.FORKED,
                           "the tenant head is not a leaf of the heads tree the checkpoint "
                           "commits to", MANIFEST)
        return ok

    def _absent(self, line: tuple[int, bytes]) -> bool:
        """A tenant with no head under a tenants line: complete (and empty) when the
        manifest's ``absence`` proof shows it has no leaf in the heads tree."""
        sec = self.section
        assert isinstance(sec, dict)
        if "absence" not in sec:  # a bundle written before absence proofs
            self.sink.abstain("tenant_completeness", "tenant_absence_unproven",
                              "the tenant has no head in the checkpoint; its absence from the "
                              "heads tree is not proven by this bundle", MANIFEST)
            return False
        absence = sec["absence"]
        if isinstance(absence, dict) and absence.get("v") != 1 \
                and isinstance(absence.get("v"), int):
            self.sink.abstain("tenant_completeness", "tenant_absence_unproven",
                              f"absence proof version {absence.get('v')} is not known to this "
                              "verifier", MANIFEST)
            return False
        why = check_absence(self.tenant, absence, line[0], line[1])
        if why is not None:
            self.sink.fail("tenant_absence_invalid", FindingClass.FORKED,
                           f"the proof that the tenant has no head does not hold: {why}",
                           MANIFEST)
            return False
        return True

    def _no_line(self, size: int) -> bool:
        """No tenants line: only the default tenant had entries below the size, so its
        chain is every entry and another tenant's is empty."""
        if isinstance(self.section, dict) and "absence" in self.section:
            self.sink.fail("tenant_absence_invalid", FindingClass.FORKED, "an absence proof "
                           "under a checkpoint without a tenants line", MANIFEST)
            return False
        if self.tenant != DEFAULT_TENANT:
            if self.count:
                self.sink.fail("tenant_head_unproven", FindingClass.FORKED, "the checkpoint "
                               "commits to no tenant heads, so no tenant but default has "
                               "entries below its size", MANIFEST)
            return self.count == 0
        if self.count != size:
            self.sink.fail("tenant_head_unproven", FindingClass.FORKED, "without a tenants "
                           "line the default tenant's chain is every entry of the checkpoint",
                           MANIFEST, expected=size, actual=self.count)
            return False
        return True
