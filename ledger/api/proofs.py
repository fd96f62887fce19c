"""Proofs served over HTTP, from stored checkpoints only (docs/http.md, docs/reader.md).

* :func:`entry_proof`: the inclusion proof of one entry to the stored checkpoint of a
  given size, or to the latest one.  When none covers the entry and on-demand signing is
  on, a new checkpoint is signed -- at most one per ``--checkpoint-on-demand-interval``
  for the whole ledger (``ledger.ops.checkpoint.make_checkpoint_bounded`` judges the age
  of the latest stored checkpoint under the append lock).  Inside the interval the answer
  is 404 ``not_checkpointed`` with ``Retry-After``, so a loop of proof requests for the
  newest entry cannot make the ledger sign and keep a checkpoint per request.
* :func:`consistency_answer`: the RFC 9162 consistency proof between two stored
  checkpoints (the ``ledger-consistency-proof/1`` bundle: both signed notes and the path).
"""

from __future__ import annotations

import math
import time
from typing import Any

from ledger.errors import NotFound, ReplicaBehind, UsageError

# the part of an auditor's inclusion bundle a caller without layer 3 receives
PATH_ONLY = ("origin", "seq", "tree_size", "leaf_index", "inclusion_path", "checkpoint")
SHORT_WAIT_S = 1.0  # a request this close to the next allowed signature waits for it


def _stored_note(service: Any, size: int) -> str:
    row = service.reader.checkpoint_at(size)
    if row is None:
        raise NotFound(f"no stored checkpoint has tree size {size}", code="not_checkpointed",
                       field="tree_size")
    return str(row.note)


def _covering_note(service: Any, seq: int) -> str:
    """The latest stored checkpoint if it covers ``seq``; else one signed now, if on-demand
    signing is on and the interval since the latest stored checkpoint has passed.  With a
    read replica the checkpoint is read there and signed on the primary; one the replica
    has not replayed yet is ReplicaBehind (503), never a proof it cannot build."""
    ledger = service.ledger  # the primary: signing writes
    latest = service.reader.latest_checkpoint()
    if latest is not None and latest.size > seq:
        return str(latest.note)
    if not service.settings.checkpoint_on_demand:
        raise NotFound(f"no checkpoint covers seq {seq} yet", code="not_checkpointed",
                       field="proof")
    interval_us = int(service.settings.on_demand_interval_s() * 1_000_000)
    with service.checkpoint_lock:  # this process's concurrent requests share one
        for _ in range(2):
            note = ledger.checkpoint_bounded(service.keyring, interval_us)
            latest = ledger.latest_checkpoint()
            if note is not None or latest is not None and latest.size > seq:
                break  # signed now, or another request (or process) just signed one
            wait_s = (latest.created_at + interval_us - ledger.clock.now_us()) / 1e6 \
                if latest is not None else 0.0
            if wait_s > SHORT_WAIT_S:
                raise NotFound(
                    f"no checkpoint covers seq {seq} yet; the next one may be signed in"
                    f" {math.ceil(wait_s)} s (at most one per"
                    f" {service.settings.checkpoint_on_demand_interval})",
                    code="not_checkpointed", field="proof",
                    detail={"retry_after_s": math.ceil(wait_s)})
            time.sleep(max(0.0, wait_s))
    if latest is None or latest.size <= seq:
        raise NotFound(f"no checkpoint covers seq {seq} yet", code="not_checkpointed",
                       field="proof", detail={"retry_after_s": 1})
    if service.reader is not ledger and service.reader.checkpoint_at(latest.size) is None:
        raise ReplicaBehind(f"the checkpoint of size {latest.size} covering seq {seq} is "
                            "signed but not on the read replica yet; retry shortly",
                            field="proof")
    return str(latest.note)


def entry_proof(service: Any, seq: int, layer: str, tree_size: int | None = None,
                ) -> dict[str, Any]:
    """Inclusion proof of ``seq`` to the stored checkpoint of ``tree_size`` (None: the
    latest, see the module docstring).  Auditors get the ``ledger-inclusion-proof/1``
    bundle; other layers ``ledger-inclusion-path/1`` (no envelope: it names layer-3
    fields).  Raises NotFound (``not_checkpointed``, naming ``tree_size`` or ``proof``),
    UsageError (``seq_out_of_range``: the checkpoint does not cover ``seq``)."""
    if tree_size is not None:
        if seq >= tree_size:
            raise UsageError(f"the checkpoint of size {tree_size} does not cover seq {seq}",
                             code="seq_out_of_range", field="tree_size")
        note = _stored_note(service, tree_size)
    else:
        note = _covering_note(service, seq)
    bundle: dict[str, Any] = service.reader.prove(seq, note)
    if layer == "auditor":
        return bundle
    out = {k: bundle[k] for k in PATH_ONLY}
    out["entry_hash"] = bundle["entry"]["entry_hash"]
    out["format"] = "ledger-inclusion-path/1"
    return out


def consistency_answer(service: Any, old_size: int, new_size: int) -> dict[str, Any]:
    """The ``ledger-consistency-proof/1`` bundle between the stored checkpoints of
    ``old_size`` and ``new_size`` (``0 < old_size <= new_size``).  Raises UsageError
    (``size_out_of_range`` naming ``from``), NotFound (``not_checkpointed`` naming the
    size no stored checkpoint has)."""
    if old_size > new_size:
        raise UsageError(f"from ({old_size}) is larger than to ({new_size})",
                         code="size_out_of_range", field="from")
    notes = {}
    for name, size in (("from", old_size), ("to", new_size)):
        row = service.reader.checkpoint_at(size)
        if row is None:
            raise NotFound(f"no stored checkpoint has tree size {size}",
                           code="not_checkpointed", field=name)
        notes[name] = str(row.note)
    return service.reader.prove_consistency(notes["from"], notes["to"])  # type: ignore[no-any-return]
