"""SQLAlchemy table definitions: the schema the migrations create.

The tables are created *only* by Alembic (``migrations/``); this module is the
metadata that ``alembic check`` compares the migrations against, and the
column objects the store modules build statements from.  Every hash column
holds raw 32-byte digests.  Payload digests and commitments are stored only in the
envelope (``sha256:<hex>`` text there); the payload bytes are laid out by entry
(``ledger.store.layout``), see docs/storage.md.
"""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Column,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    SmallInteger,
    String,
    Table,
    Text,
    text,
)

from ledger.store.layout import SUBJECT_WHERE

NAMING_CONVENTION = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

metadata = MetaData(naming_convention=NAMING_CONVENTION)

DIGEST = String(71)  # "sha256:" + 64 hex

ledger_meta = Table(
    "ledger_meta", metadata,
    Column("id", Integer, primary_key=True, autoincrement=False),  # always 1
    Column("ledger_id", String(64), nullable=False),
    Column("origin", String(255), nullable=False),
    Column("format_version", Integer, nullable=False),
    Column("created_at", BigInteger, nullable=False),  # µs since epoch, UTC
)

# One row: the chain head.  Appenders lock it (FOR UPDATE / BEGIN IMMEDIATE).
head = Table(
    "head", metadata,
    Column("id", Integer, primary_key=True, autoincrement=False),  # always 1
    Column("size", BigInteger, nullable=False),
    Column("head_hash", LargeBinary, nullable=False),
    Column("last_recorded_at", BigInteger, nullable=False),
)

# One row per tenant: the head of its chain (migration 0013).  Appenders read and move it
# under the append lock; on PostgreSQL it is locked FOR UPDATE.  Not hashed: the entries are
# the authority, and the audit checks that each row equals the last entry of its tenant.
tenant_heads = Table(
    "tenant_heads", metadata,
    Column("tenant", String(64), primary_key=True),
    Column("size", BigInteger, nullable=False),  # entries in the chain (the next tseq)
    Column("head_hash", LargeBinary, nullable=False),  # the last one's entry_hash (or genesis)
)

entries = Table(
    "entries", metadata,
    Column("seq", BigInteger, primary_key=True, autoincrement=False),  # 0-based, gapless
    Column("kind", String(16), nullable=False),
    Column("recorded_at", BigInteger, nullable=False),  # µs since epoch, UTC
    Column("engine", String(64)),
    Column("status", String(16)),
    Column("constraint_id", String(256)),
    Column("proof_ref", DIGEST),
    Column("subject", String(256)),
    Column("producer", String(256)),
    Column("idempotency_key", String(256)),
    Column("admission", String(8)),
    Column("att_verdict", String(16)),
    Column("att_kid", String(512)),
    Column("att_iss", String(512)),
    Column("envelope", LargeBinary, nullable=False),
    Column("body_hash", LargeBinary, nullable=False),
    Column("prev_hash", LargeBinary, nullable=False),
    Column("entry_hash", LargeBinary, nullable=False),
    # the entry's tenant and its position in the tenant's chain (migration 0013; every entry
    # before it is tenant 'default' with tseq NULL, which reads as tseq = seq; see
    # docs/tenants.md)
    Column("tenant", String(64), nullable=False, server_default="default"),
    Column("tseq", BigInteger),
    Index("ix_entries_recorded_at", "recorded_at"),
    Index("ix_entries_kind_seq", "kind", "seq"),
    Index("ix_entries_engine_status_seq", "engine", "status", "seq"),
    Index("ix_entries_subject_seq", "subject", "seq"),
    Index("ix_entries_proof_ref_seq", "proof_ref", "seq"),
    Index("ix_entries_constraint_id_seq", "constraint_id", "seq"),
    Index("ix_entries_att_kid_seq", "att_kid", "seq"),
    Index("ix_entries_entry_hash", "entry_hash"),  # the jump to an entry hash (0012)
    Index("ix_entries_tenant_seq", "tenant", "seq"),  # a tenant's chain in order (0013)
)
# Idempotency keys are scoped per producer (migration 0005): unique per (producer, key),
# and among the entries without a producer (NULLs are distinct in a unique index).
Index("ix_entries_producer_idempotency_key", entries.c.producer, entries.c.idempotency_key,
      unique=True)
Index("ix_entries_idempotency_key_no_producer", entries.c.idempotency_key, unique=True,
      sqlite_where=entries.c.producer.is_(None), postgresql_where=entries.c.producer.is_(None))

# Payload bytes by entry: pid = layout.pid(seq, slot) (ledger.store.layout), so the payloads
# of a seq range are one ordered range of the primary key (a rowid table on SQLite).
# ``salt`` is the 32-byte salt of a v2 result payload's commitment (NULL: a plain digest).
# ``codec`` says how ``data`` is stored (ledger.store.codec: 0 as is, 1 DEFLATE with the
# preset dictionary; migration 0009); every reader decodes before hashing.
# Insert-only; a row may be deleted only when ``redacted_payloads`` names it (trigger).
payloads = Table(
    "payloads", metadata,
    Column("pid", BigInteger().with_variant(Integer, "sqlite"), primary_key=True,
           autoincrement=False),
    Column("salt", LargeBinary),
    Column("data", LargeBinary, nullable=False),
    Column("codec", SmallInteger, nullable=False, server_default="0"),
    # v2 subjects (SUBJECT_SLOT) by value: ledger.store.entries.subject_seqs
    Index("ix_payloads_subject", "data", sqlite_where=text(SUBJECT_WHERE),
          postgresql_where=text(SUBJECT_WHERE)),
)

# The guard of erasure: (seq, slot) erased by the redaction entry at redaction_seq.
# Insert-only; not hashed (the chain's redaction entries are the authority).
redacted_payloads = Table(
    "redacted_payloads", metadata,
    Column("seq", BigInteger, primary_key=True, autoincrement=False),
    Column("slot", Integer, primary_key=True, autoincrement=False),
    Column("redaction_seq", BigInteger, nullable=False),
    sqlite_with_rowid=False,
)

# Rejected submissions, kept raw for auditors; never part of the chain.
quarantine = Table(
    "quarantine", metadata,
    Column("id", BigInteger().with_variant(Integer, "sqlite"), primary_key=True,
           autoincrement=True),
    Column("received_at", BigInteger, nullable=False),
    Column("code", String(64), nullable=False),
    Column("field", String(256)),
    Column("message", Text, nullable=False),
    Column("producer", String(256)),
    Column("raw", LargeBinary, nullable=False),
    Index("ix_quarantine_producer", "producer"),
    Index("ix_quarantine_received_at", "received_at"),
)

# Per producer ('' = none): rejects not kept because a quarantine bound was reached, and
# rows removed by a prune (migration 0006; operational counters, not part of the chain).
quarantine_stats = Table(
    "quarantine_stats", metadata,
    Column("producer", String(256), primary_key=True),
    Column("dropped", BigInteger, nullable=False),
    Column("pruned", BigInteger, nullable=False),
    Column("last_dropped_at", BigInteger),  # µs since epoch, UTC
)

# A gate row that exists only inside a prune transaction: the quarantine's DELETE trigger
# lets rows go only while it exists.
quarantine_prune = Table(
    "quarantine_prune", metadata,
    Column("id", Integer, primary_key=True, autoincrement=False),
)

# -- Merkle tree and checkpoints (migration 0002) -------------------------------------------

# Every complete subtree of the RFC 6962 tree over entry hashes: (level, idx) covers leaves
# [idx * 2**level, (idx + 1) * 2**level); level 0 holds leaf hashes.  Insert-only.
merkle_nodes = Table(
    "merkle_nodes", metadata,
    Column("level", Integer, primary_key=True, autoincrement=False),
    Column("idx", BigInteger, primary_key=True, autoincrement=False),
    Column("hash", LargeBinary, nullable=False),
    sqlite_with_rowid=False,
)

# One row: merkle_nodes holds every complete subtree of the first ``size`` entries.
tree_state = Table(
    "tree_state", metadata,
    Column("id", Integer, primary_key=True, autoincrement=False),  # always 1
    Column("size", BigInteger, nullable=False),
)

# Signed checkpoints (C2SP tlog-checkpoint notes) in the order they were made.  Insert-only.
checkpoints = Table(
    "checkpoints", metadata,
    Column("id", BigInteger().with_variant(Integer, "sqlite"), primary_key=True,
           autoincrement=True),
    Column("size", BigInteger, nullable=False),
    Column("root_hash", LargeBinary, nullable=False),
    Column("note", Text, nullable=False),
    Column("created_at", BigInteger, nullable=False),  # µs since epoch, UTC
    Index("ix_checkpoints_size", "size", unique=True),
)

# Audit job progress (operational state, not part of the ledger; see docs/audit.md).
audit_runs = Table(
    "audit_runs", metadata,
    Column("id", BigInteger().with_variant(Integer, "sqlite"), primary_key=True,
           autoincrement=True),
    Column("started_at", BigInteger, nullable=False),
    Column("updated_at", BigInteger, nullable=False),
    Column("range_start", BigInteger, nullable=False),
    Column("range_end", BigInteger, nullable=False),
    Column("next_seq", BigInteger, nullable=False),
    Column("state", String(16), nullable=False),  # running | complete
    Column("options", Text, nullable=False),  # JSON
    Column("counts", Text, nullable=False),  # JSON
    # audit | reverify (migration 0010; every audit reader selects job = 'audit')
    Column("job", String(16), nullable=False, server_default="audit"),
    Index("ix_audit_runs_job_id", "job", "id"),
)

# The outcomes a re-verification run has decided so far, committed with its checkpoint
# (migration 0010; docs/reverify.md).
reverify_outcomes = Table(
    "reverify_outcomes", metadata,
    Column("run_id", BigInteger, primary_key=True, autoincrement=False),
    Column("seq", BigInteger, primary_key=True, autoincrement=False),
    Column("outcome", Text, nullable=False),  # JSON
)

audit_findings = Table(
    "audit_findings", metadata,
    Column("id", BigInteger().with_variant(Integer, "sqlite"), primary_key=True,
           autoincrement=True),
    Column("run_id", BigInteger, nullable=False),
    Column("seq", BigInteger, nullable=False),
    Column("kind", String(16), nullable=False),  # finding | abstention
    Column("body", Text, nullable=False),  # JSON
    Index("ix_audit_findings_run_id_seq", "run_id", "seq"),
)

# Counts of the rows an audit run walked, by hour (bucket_us: the hour's first µs), kind,
# status, engine, producer and attestation verdict (the envelope's values: a row is counted
# under them only when the run verified it or abstained on it), with its disposition
# (verified | unverified | flagged; a flagged row has no values).  Operational state
# (migration 0011; docs/audit.md "Aggregates").
audit_aggregates = Table(
    "audit_aggregates", metadata,
    Column("id", BigInteger().with_variant(Integer, "sqlite"), primary_key=True,
           autoincrement=True),
    Column("run_id", BigInteger, nullable=False),
    Column("bucket_us", BigInteger, nullable=False),
    Column("disposition", String(16), nullable=False),
    Column("kind", String(16)),
    Column("status", String(16)),
    Column("engine", String(64)),
    Column("producer", String(256)),
    Column("att_verdict", String(16)),
    Column("n", BigInteger, nullable=False),
    Index("ix_audit_aggregates_run_id_bucket_us", "run_id", "bucket_us"),
)

# Witness cosignatures and RFC 3161 timestamp tokens of checkpoints (migration 0007_anchors;
# docs/anchoring.md).  kind: "cosignature" (data: the signature line) or "timestamp" (data:
# base64 DER TimeStampResp, nonce: the request's nonce).  Insert-only.
checkpoint_anchors = Table(
    "checkpoint_anchors", metadata,
    Column("id", BigInteger().with_variant(Integer, "sqlite"), primary_key=True,
           autoincrement=True),
    Column("checkpoint_size", BigInteger, nullable=False),
    Column("kind", String(16), nullable=False),
    Column("name", String(512), nullable=False),  # witness name or TSA URL
    Column("data", Text, nullable=False),
    Column("nonce", String(64)),
    Column("created_at", BigInteger, nullable=False),  # µs since epoch, UTC
    Index("ix_checkpoint_anchors_checkpoint_size_kind", "checkpoint_size", "kind"),
    Index("ix_checkpoint_anchors_name_checkpoint_size", "name", "checkpoint_size"),
)
