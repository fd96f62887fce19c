"""The demo's anchoring part: two local witnesses and a local TSA cosign and time-stamp
the checkpoint; a history rewritten and re-signed with the ledger's own key is then
refused by both witnesses, and ``ledger audit --quorum 2`` against the witnessed
checkpoint reports the rewrite.  Needs the ``openssl`` command for the TSA (without it
the timestamp is skipped, with a line saying so)."""

from __future__ import annotations

import shutil
import sqlite3
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

from ledger.crypto.keys import Keyring
from ledger.crypto.timestamp import load_tsa_trust
from ledger.demo.samples import realistic
from ledger.facade import Ledger
from ledger.ops.audit import AuditOptions
from ledger.ops.checkpoint import AnchorConfig, WitnessEndpoint
from ledger.store.layout import pid
from ledger.verify.anchor import AnchorPolicy
from ledger.witness.local import LocalWitness
from ledger.witness.local_tsa import LocalTsa

REWRITTEN_FROM = 10  # entries from this seq on are replaced in the rewritten copy


def anchored_demo(ledger: Ledger, ring: Keyring, directory: Path) -> Iterator[str]:
    """Lines of the demo's witness and timestamp part (``ledger`` is open on
    ``directory/ledger.db``)."""
    folder = directory / "anchoring"
    shutil.rmtree(folder, ignore_errors=True)
    origin = ledger.meta.origin
    with ExitStack() as stack:
        ws = [stack.enter_context(LocalWitness(folder / f"w{i}", f"witness.demo.local/w{i}",
                                               {origin: ring.path / "jwks.json"}))
              for i in (1, 2)]
        tsa = stack.enter_context(LocalTsa(folder / "tsa")) if shutil.which("openssl") \
            else None
        config = AnchorConfig(tuple(WitnessEndpoint(w.key, w.url) for w in ws),
                              tsa.url if tsa else None,
                              load_tsa_trust(tsa.ca_file) if tsa else None)
        report = ledger.anchored_checkpoint(ring, config)
        kept = folder / "witnessed-checkpoint.txt"
        kept.write_text(report.note, encoding="utf-8")
        ledger.write_timestamp_sidecar(str(kept), report.size)  # as `checkpoint --out` does
        when = report.timestamp.gen_time.isoformat() if report.timestamp else \
            "no timestamp (openssl not installed)"
        yield (f"checkpoint of size {report.size} cosigned by {', '.join(report.cosigned)};"
               f" time-stamped: {when} -> {kept}")
        copy = _rewritten_copy(directory, folder)
        with Ledger.open(f"sqlite:///{copy}") as fork:
            fork.append_many(realistic(report.size, start=500), producer="rewriter")
            refused = fork.anchored_checkpoint(ring, config)
            yield (f"rewritten copy {copy.name}: entries {REWRITTEN_FROM}.. replaced, chain and"
                   f" tree recomputed, checkpoint of size {refused.size} re-signed with the"
                   " ledger's own key")
            for name, why in refused.failed.items():
                yield f"  witness {name} refused it: {why}"
            policy = AnchorPolicy(tuple(w.key for w in ws), 2, config.tsa_trust)
            audit = fork.audit(AuditOptions(checkpoints=(str(kept),),
                                            keys=(str(ring.path / "jwks.json"),),
                                            anchor_policy=policy))
        yield f"  ledger audit --checkpoint {kept.name} --quorum 2: {audit.summary_line()}"
        for f in audit.findings:
            yield f"  {f.line()}"


def _rewritten_copy(directory: Path, folder: Path) -> Path:
    """A copy of the demo ledger whose entries from REWRITTEN_FROM on are gone (with their
    tree nodes, checkpoints and anchors), as someone holding the database would do."""
    src, dst = directory / "ledger.db", folder / "rewritten.db"
    with sqlite3.connect(src) as c:
        c.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    shutil.copyfile(src, dst)
    k = REWRITTEN_FROM
    with sqlite3.connect(dst) as c:
        for name in ("entries_no_delete", "merkle_nodes_no_delete", "checkpoints_no_delete",
                     "checkpoint_anchors_no_delete", "tree_state_no_delete",
                     "payloads_no_delete", "redacted_payloads_no_delete"):
            c.execute(f"DROP TRIGGER IF EXISTS {name}")
        c.execute("DELETE FROM entries WHERE seq >= ?", (k,))
        c.execute("DELETE FROM payloads WHERE pid >= ?", (pid(k),))  # payloads by entry
        c.execute("DELETE FROM redacted_payloads WHERE redaction_seq >= ?", (k,))
        c.execute("DELETE FROM merkle_nodes WHERE ((idx + 1) << level) > ?", (k,))
        c.execute("DELETE FROM checkpoints WHERE size > ?", (k,))
        c.execute("DELETE FROM checkpoint_anchors WHERE checkpoint_size > ?", (k,))
        c.execute("UPDATE tree_state SET size = MIN(size, ?)", (k,))
        last = c.execute("SELECT entry_hash, recorded_at FROM entries WHERE seq = ?",
                         (k - 1,)).fetchone()
        c.execute("UPDATE head SET size = ?, head_hash = ?, last_recorded_at = ?",
                  (k, last[0], last[1]))
        c.execute("UPDATE tenant_heads SET size = ?, head_hash = ? WHERE tenant = 'default'",
                  (k, last[0]))
    return dst
