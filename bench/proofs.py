"""Proofs: ours vs pymerkle on the same leaves, and cost at 10k vs 1M entries.

* Inclusion proof generation and verification, side by side with pymerkle 7 on
  the same leaves (the entry hashes of a real ledger; pymerkle hashes each as
  SHA-256(0x00 || entry hash), so both trees have the same root, checked):
  our database-backed path (``ledger.ops.checkpoint.inclusion_proof`` per call,
  and ``StoredTree`` on one connection) against pymerkle's ``SqliteTree``; our
  ``MemoryTree`` against pymerkle's ``InmemoryTree``; ``verify_inclusion``
  against pymerkle's ``verify_inclusion``.
* Scale: proof generation and checkpoint creation on stored trees of 10k and
  1M leaves.  The 1M tree is built by inserting the nodes ``CompactRange``
  computes in memory (executemany, or COPY on PostgreSQL) and moving the head
  and tree_state sizes, not by appending 1M real entries: proofs and
  checkpoints read only ``merkle_nodes``, so the entries table does not matter
  to them.  Checkpoint time excludes the tree sync: before each checkpoint the
  sizes move by one leaf whose nodes are already stored; it includes the
  consistency check against the previous checkpoint, one Ed25519 signature and
  the insert (one commit, synchronous=FULL on SQLite).
"""

from __future__ import annotations

import hashlib
import random
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

from pymerkle import InmemoryTree, SqliteTree
from pymerkle import verify_inclusion as pm_verify_inclusion

from bench.common import pg_available, pg_url, print_table, rate, sqlite_url, submissions
from ledger import Ledger
from ledger.core.merkle import CompactRange, MemoryTree, leaf_hash, verify_inclusion
from ledger.crypto.keys import Keyring
from ledger.ops.checkpoint import (
    StoredTree,
    inclusion_bundle,
    inclusion_proof,
    make_checkpoint,
    sync_tree,
    tree_root,
)
from ledger.store.tree import read_store
from ledger.verify.proof import verify_bundle

CHECKPOINTS = 30
ROUNDS = 5


def interleaved(cases: dict[str, tuple[int, Callable[[], Any]]],
                rounds: int = ROUNDS) -> dict[str, float]:
    """Best rate of each case over ``rounds`` rounds in which the cases take turns, so
    that load from other processes on a shared machine hits every case alike."""
    out = dict.fromkeys(cases, 0.0)
    for _ in range(rounds):
        for name, (n, fn) in cases.items():
            out[name] = max(out[name], rate(n, fn))
    return out


def _fill(url: str, n: int) -> tuple[Ledger, float]:
    ledger = Ledger.init(url, origin="bench.example/log")
    for i in range(0, n, 1000):
        ledger.append_many(submissions(min(1000, n - i), seed=i, start=i))
    t0 = time.perf_counter()
    sync_tree(ledger.engine)
    return ledger, n / (time.perf_counter() - t0)


def _side_by_side(n: int, tmp: Path, backends: list[str]) -> None:
    with sqlite_url(tmp) as url, ExitStack() as stack:
        ledger, sync_rate = _fill(url, n)
        stack.callback(ledger.close)
        hashes = [bytes(r.entry_hash) for r in ledger.iter_entries()]
        mem = MemoryTree(hashes)
        pm_mem = InmemoryTree(algorithm="sha256")
        for h in hashes:
            pm_mem.append_entry(h)
        pm_sql = SqliteTree(str(tmp / "pymerkle.db"), algorithm="sha256")
        stack.callback(pm_sql.close)
        pm_sql.append_entries(hashes)
        root = tree_root(ledger, n)
        assert root == mem.root() == pm_mem.get_root() == pm_sql.get_root(), "roots differ"
        rng = random.Random(5)
        idx = [rng.randrange(n) for _ in range(2000)]
        few = idx[:500]
        tree = StoredTree(stack.enter_context(read_store(ledger.engine)), n)
        ours_p = [(i, mem.leaf_hash(i), mem.inclusion_proof(i, n)) for i in idx]
        pm_p = [(pm_mem.get_leaf(i + 1), pm_mem.prove_inclusion(i + 1)) for i in idx]
        ring = Keyring.load(tmp / "keys")
        ring.generate(ledger.meta.origin, ledger.clock.now_us())
        make_checkpoint(ledger, ring)
        bundles = [inclusion_bundle(ledger, i) for i in few[:200]]
        keys = ring.public_keys()
        r = interleaved({
            "op": (len(idx), lambda: [inclusion_proof(ledger, i, n) for i in idx]),
            "conn": (len(idx), lambda: [tree.inclusion_proof(i, n) for i in idx]),
            "pms": (len(few), lambda: [pm_sql.prove_inclusion(i + 1) for i in few]),
            "mem": (len(idx), lambda: [mem.inclusion_proof(i, n) for i in idx]),
            "pmm": (len(idx), lambda: [pm_mem.prove_inclusion(i + 1) for i in idx]),
            "v_ours": (len(idx), lambda: [verify_inclusion(i, n, leaf, p, root)
                                          for i, leaf, p in ours_p]),
            "v_pm": (len(idx), lambda: [pm_verify_inclusion(leaf, root, p) for leaf, p in pm_p]),
            "v_bundle": (len(bundles), lambda: [verify_bundle(b, keys) for b in bundles]),
        })
    pg_rows = _pg_side_by_side(n, idx) if "postgresql" in backends and pg_available() else []
    pms, pmm, v_pm = r["pms"], r["pmm"], r["v_pm"]
    print_table(
        f"Inclusion proofs, {n:,} entries, same leaves as pymerkle 7 (roots equal)",
        ["implementation", "proofs/s", "vs pymerkle"],
        [["ours, stored nodes, SQLite: inclusion_proof() per call", r["op"],
          f"{r['op'] / pms:.1f}x"],
         ["ours, stored nodes, SQLite: StoredTree, one connection", r["conn"],
          f"{r['conn'] / pms:.1f}x"],
         ["pymerkle SqliteTree.prove_inclusion", pms, "1.0x"],
         ["ours, MemoryTree.inclusion_proof", r["mem"], f"{r['mem'] / pmm:.1f}x"],
         ["pymerkle InmemoryTree.prove_inclusion", pmm, "1.0x"],
         *[[label, rate_, "-"] for label, rate_ in pg_rows]])
    print_table(
        f"Inclusion proof verification, {n:,} entries",
        ["implementation", "verifications/s", "vs pymerkle"],
        [["ours, ledger.core.merkle.verify_inclusion", r["v_ours"],
          f"{r['v_ours'] / v_pm:.1f}x"],
         ["pymerkle verify_inclusion", v_pm, "1.0x"],
         ["ours, whole bundle (payloads, entry hash, path, Ed25519)", r["v_bundle"], "-"]])
    print(f"(rates: best of {ROUNDS} interleaved rounds; tree sync of {n:,} appended"
          f" entries: {sync_rate:,.0f} entries/s)")


def _pg_side_by_side(n: int, idx: list[int]) -> list[tuple[str, float]]:
    with pg_url() as url:
        ledger, _ = _fill(url, n)
        with read_store(ledger.engine) as store:
            tree = StoredTree(store, n)
            r = interleaved({
                "op": (len(idx), lambda: [inclusion_proof(ledger, i, n) for i in idx]),
                "conn": (len(idx), lambda: [tree.inclusion_proof(i, n) for i in idx])}, 3)
        ledger.close()
    return [("ours, stored nodes, PostgreSQL: inclusion_proof() per call", r["op"]),
            ("ours, stored nodes, PostgreSQL: StoredTree, one connection", r["conn"])]


def _leaves(n: int) -> Iterator[bytes]:
    for i in range(n):
        yield leaf_hash(hashlib.sha256(b"bench-%d" % i).digest())


@contextmanager
def synthetic(kind: str, tmp: Path, n: int, spare: int) -> Iterator[Ledger]:
    """A ledger whose stored tree has ``n + spare`` leaves' nodes and sizes set to ``n``."""
    with (sqlite_url(tmp) if kind == "sqlite" else pg_url()) as url:
        ledger = Ledger.init(url, origin="bench.example/log")
        edge, chunk = CompactRange(), 200_000
        leaves = _leaves(n + spare)
        raw = ledger.engine.raw_connection()
        cur = raw.cursor()
        if kind == "sqlite":
            cur.execute("BEGIN")
        while True:
            part = [leaf for _, leaf in zip(range(chunk), leaves, strict=False)]  # take chunk
            if not part:
                break
            nodes = edge.extend(part)
            if kind == "sqlite":
                cur.executemany("INSERT INTO merkle_nodes (level, idx, hash) VALUES (?, ?, ?)",
                                [(lv, ix, h) for (lv, ix), h in nodes])
            else:
                with cur.copy("COPY merkle_nodes (level, idx, hash) FROM STDIN") as copy:
                    for (lv, ix), h in nodes:
                        copy.write_row((lv, ix, h))
        _set_sizes(cur, kind, n)
        cur.execute("COMMIT") if kind == "sqlite" else raw.commit()
        # Let the bulk load settle (as it would in a ledger grown over time) so that its
        # background write-out does not land in the measurements.
        if kind == "sqlite":
            cur.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        else:
            raw.driver_connection.autocommit = True
            cur.execute("VACUUM ANALYZE merkle_nodes")
            cur.execute("CHECKPOINT")
            raw.driver_connection.autocommit = False
        cur.close()
        raw.close()
        try:
            yield ledger
        finally:
            ledger.close()


def _set_sizes(cur: Any, kind: str, n: int) -> None:
    ph = "?" if kind == "sqlite" else "%s"
    cur.execute(f"UPDATE head SET size = {ph} WHERE id = 1", (n,))
    cur.execute(f"UPDATE tree_state SET size = {ph} WHERE id = 1", (n,))


def _bump(ledger: Ledger, kind: str, size: int) -> None:
    raw = ledger.engine.raw_connection()
    cur = raw.cursor()
    _set_sizes(cur, kind, size)
    raw.commit()
    cur.close()
    raw.close()


def _scale_rows(kind: str, tmp: Path, sizes: tuple[int, int]) -> list[list[Any]]:
    """Both sizes side by side: proofs interleaved, checkpoints alternating."""
    with ExitStack() as stack:
        built, ledgers = [], []
        for n in sizes:
            t0 = time.perf_counter()
            ledgers.append(stack.enter_context(synthetic(kind, tmp, n, CHECKPOINTS + 1)))
            built.append(time.perf_counter() - t0)
        cases: dict[str, tuple[int, Callable[[], Any]]] = {}
        for n, ledger in zip(sizes, ledgers, strict=True):
            rng = random.Random(9)
            idx = [rng.randrange(n) for _ in range(2000)]
            tree = StoredTree(stack.enter_context(read_store(ledger.engine)), n)
            cases[f"op{n}"] = (len(idx), lambda L=ledger, x=idx, n=n:
                               [inclusion_proof(L, i, n) for i in x])
            cases[f"conn{n}"] = (len(idx), lambda t=tree, x=idx, n=n:
                                 [t.inclusion_proof(i, n) for i in x])
        r = interleaved(cases)
        rings = []
        for n, ledger in zip(sizes, ledgers, strict=True):
            ring = Keyring.load(tmp / f"keys-{kind}-{n}")
            ring.generate(ledger.meta.origin, ledger.clock.now_us())
            make_checkpoint(ledger, ring)  # the first has no predecessor to check
            rings.append(ring)
        times: list[list[float]] = [[], []]
        for k in range(1, CHECKPOINTS + 1):
            for j, (n, ledger) in enumerate(zip(sizes, ledgers, strict=True)):
                _bump(ledger, kind, n + k)
                t0 = time.perf_counter()
                make_checkpoint(ledger, rings[j])
                times[j].append(time.perf_counter() - t0)
    rows = [[kind, f"{n:,}", r[f"op{n}"], r[f"conn{n}"], statistics.median(t) * 1000,
             f"{b:.1f}"] for n, t, b in zip(sizes, times, built, strict=True)]
    a, b = rows
    rows.append([kind, f"slowdown at {sizes[1] // sizes[0]}x size", a[2] / b[2], a[3] / b[3],
                 b[4] / a[4], "-"])
    return rows


def run(backends: list[str], scale: float = 1.0) -> None:
    small, large = max(1000, int(10_000 * scale)), max(10_000, int(1_000_000 * scale))
    with tempfile.TemporaryDirectory() as tmp:
        _side_by_side(small, Path(tmp), backends)
        kinds = ["sqlite"] + (["postgresql"] if "postgresql" in backends and pg_available()
                              else [])
        rows = [row for kind in kinds for row in _scale_rows(kind, Path(tmp), (small, large))]
    print_table("Stored-tree proofs and checkpoints at two sizes (proofs: best of"
                f" {ROUNDS} interleaved rounds; checkpoint: median of {CHECKPOINTS},"
                " excluding tree sync)",
                ["backend", "entries", "proofs/s per call", "proofs/s one conn",
                 "checkpoint ms", "build s"], rows)
