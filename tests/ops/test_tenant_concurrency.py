"""Eight writer processes over four tenants at once, then a full audit: the global tree has
no gap and no fork, every tenant's chain is whole, every result stored exactly once, and each
tenant's export verifies complete (docs/tenants.md).  Real processes on both engines."""

from __future__ import annotations

import multiprocessing as mp
import random
from typing import Any

from sqlalchemy import text

from ledger.crypto.keys import Keyring
from ledger.demo.samples import math_verified
from ledger.facade import Ledger
from ledger.ops.audit import AuditOptions
from ledger.ops.export import ExportOptions
from ledger.verify.export import verify_export

TENANTS = ["north", "south", "east", "west"]
PER_WRITER = 12


def _sub(tag: str) -> dict[str, Any]:
    s = math_verified(random.Random(tag).randrange(10**6), random.Random(tag))
    s["subject"] = tag
    s["idempotency_key"] = tag
    return s


def _writer(url: str, tenant: str, k: int, start: Any, out: Any) -> None:
    try:
        with Ledger.open(url) as ledger:
            start.wait()
            for i in range(PER_WRITER):
                tag = f"{tenant}-{k}-{i}"
                if i % 4 == 3:  # some as a batch of two, one of them a replay
                    rs = ledger.append_many([_sub(tag), _sub(f"{tenant}-{k}-{i - 1}")],
                                            producer=f"p-{tenant}", tenant=tenant)
                    assert all(r.ok for r in rs) and rs[1].replayed, rs
                else:
                    assert ledger.append(_sub(tag), producer=f"p-{tenant}", tenant=tenant).ok
        out.put(("ok", tenant, k))
    except BaseException as exc:  # noqa: BLE001 - reported by the parent
        out.put(("error", tenant, repr(exc)))


def _run(ctx: Any, target: Any, args: list[tuple[Any, ...]], start: Any = None) -> None:
    """One process of ``target(*a, out)`` per ``a`` in ``args``; ``start`` (an Event) set
    once all are started; every one must report ``ok``."""
    out = ctx.Queue()
    procs = [ctx.Process(target=target, args=(*a, out)) for a in args]
    for p in procs:
        p.start()
    if start is not None:
        start.set()
    got = [out.get(timeout=300) for _ in procs]
    for p in procs:
        p.join(timeout=60)
    assert [g for g in got if g[0] != "ok"] == []


def test_eight_writers_over_four_tenants(db_url, tmp_path):
    with Ledger.init(db_url) as ledger:
        ring = Keyring.load(tmp_path / "keys")
        ring.generate(ledger.meta.origin, ledger.clock.now_us())
    ctx = mp.get_context("spawn")
    start = ctx.Event()
    _run(ctx, _writer, [(db_url, t, k, start) for t in TENANTS for k in range(2)], start)
    with Ledger.open(db_url) as ledger:
        with ledger.engine.connect() as conn:
            rows = conn.execute(text("SELECT seq, tenant, tseq, idempotency_key FROM entries "
                                     "ORDER BY seq")).all()
        # the global sequence: gapless; every result once
        assert [r.seq for r in rows] == list(range(len(rows)))
        assert len(rows) == len(TENANTS) * 2 * PER_WRITER
        subjects = [r.idempotency_key for r in rows]
        assert len(set(subjects)) == len(subjects)
        for t in TENANTS:  # each chain: tseq 0..n-1 in seq order
            assert [r.tseq for r in rows if r.tenant == t] == list(range(2 * PER_WRITER))
        note = ledger.checkpoint(ring)
        cp = tmp_path / "cp.txt"
        cp.write_text(note, encoding="utf-8")
        report = ledger.audit(AuditOptions(checkpoints=(str(cp),),
                                           keys=(str(ring.path / "jwks.json"),)))
        assert report.findings == () and report.outcome == "passed"
        for t in TENANTS:
            assert ledger.audit_tenant(t).findings == ()
            ledger.export(tmp_path / t, ExportOptions(keys=ring.path, tenant=t))
            v = verify_export(tmp_path / t, ring.path / "jwks.json")
            assert v["findings"] == [] and v["complete"] is True


def _first_writer(url: str, tenants: list[str], k: int, barrier: Any, out: Any) -> None:
    """Single appends without an idempotency key (PostgreSQL: the one-statement append):
    in each round every writer appends to the same new tenant at the same moment."""
    try:
        with Ledger.open(url) as ledger:
            for t in tenants:
                s = _sub(f"{t}-{k}")
                del s["idempotency_key"]
                barrier.wait(timeout=60)
                assert ledger.append(s, producer=f"p-{k}", tenant=t).ok
        out.put(("ok", k, None))
    except BaseException as exc:  # noqa: BLE001 - reported by the parent
        out.put(("error", k, repr(exc)))


def test_writers_racing_for_the_first_entries_of_new_tenants(db_url):
    """Four writers, in each of twenty rounds, append at the same moment to one new tenant:
    its first entry (its head row created, linked to its genesis) is raced for by every
    writer.  Each chain must come out tseq 0..3 with no fork (on PostgreSQL each append's
    statement must see the head row that the writer before it created)."""
    tenants = [f"new{i:02d}" for i in range(20)]
    with Ledger.init(db_url):
        pass
    ctx = mp.get_context("spawn")
    barrier = ctx.Barrier(4)
    _run(ctx, _first_writer, [(db_url, tenants, k, barrier) for k in range(4)])
    with Ledger.open(db_url) as ledger:
        with ledger.engine.connect() as conn:
            rows = conn.execute(text("SELECT seq, tenant, tseq FROM entries "
                                     "ORDER BY seq")).all()
            heads = dict(conn.execute(text("SELECT tenant, size FROM tenant_heads")).all())
        assert [r.seq for r in rows] == list(range(len(tenants) * 4))
        for t in tenants:
            assert [r.tseq for r in rows if r.tenant == t] == [0, 1, 2, 3], t
            assert heads[t] == 4
        assert ledger.audit().findings == ()
        for t in tenants[:3]:
            assert ledger.audit_tenant(t).findings == ()
