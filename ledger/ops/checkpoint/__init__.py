"""The checkpoint family: signed checkpoints, proofs, and their anchors.

This module is the family's face: what the facade and other callers import.  Its private
modules, each importing only those before it: ``tree`` (the stored Merkle tree, synced
from the entries) <- ``check`` (a stored tree against a signed checkpoint) <- ``make``
(sign and read checkpoints, proofs from the stored tree) <- ``anchor`` (witness
cosignatures and RFC 3161 timestamps of a checkpoint) <- ``anchor_check`` (an auditor's
anchor policy) and ``prove`` (inclusion and consistency proof bundles).
"""

from __future__ import annotations

from ledger.errors import TreeIntegrityError
from ledger.ops.checkpoint.anchor import (
    AnchorConfig,
    AnchorReport,
    WitnessEndpoint,
    anchor_config_from,
    anchor_files,
    cosigned_note,
    latest_cosigned_note,
    load_anchor_config,
    make_anchored_checkpoint,
    timestamps_of,
    write_timestamp_sidecar,
)
from ledger.ops.checkpoint.anchor_check import (
    anchor_policy_from,
    apply_anchor_policy,
    checkpoint_anchors,
)
from ledger.ops.checkpoint.check import check_against_checkpoint, checkpoint_findings
from ledger.ops.checkpoint.make import (
    CheckpointError,
    CheckpointRow,
    checkpoint_at,
    consistency_proof,
    inclusion_proof,
    latest_checkpoint,
    make_checkpoint,
    make_checkpoint_bounded,
    tree_root,
)
from ledger.ops.checkpoint.prove import consistency_bundle, inclusion_bundle, refuse_empty_old
from ledger.ops.checkpoint.tree import StoredTree, sync_tree

__all__ = ["AnchorConfig", "AnchorReport", "CheckpointError", "CheckpointRow", "StoredTree",
           "TreeIntegrityError", "WitnessEndpoint", "anchor_config_from", "anchor_files",
           "anchor_policy_from", "apply_anchor_policy", "check_against_checkpoint",
           "checkpoint_anchors", "checkpoint_at", "checkpoint_findings", "consistency_bundle",
           "consistency_proof", "cosigned_note", "inclusion_bundle", "inclusion_proof",
           "latest_checkpoint", "latest_cosigned_note", "load_anchor_config",
           "make_anchored_checkpoint", "make_checkpoint", "make_checkpoint_bounded",
           "refuse_empty_old", "sync_tree", "timestamps_of", "tree_root", "write_timestamp_sidecar"]
