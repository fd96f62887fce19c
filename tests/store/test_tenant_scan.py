"""The audit's tenant heads (ledger.store.tenants.all_heads_at) found by a skip scan of the
(tenant, seq) index equal those of a plain GROUP BY over the entries, at every size."""

from __future__ import annotations

from ledger import Ledger
from ledger.demo.samples import realistic
from ledger.store.db import is_pg
from ledger.store.tenants import all_heads_at

GROUP_BY = ("SELECT e.tenant, e.seq, e.tseq, e.entry_hash FROM entries e JOIN "
            "(SELECT tenant, max(seq) AS m FROM entries WHERE seq < {ph} GROUP BY tenant) x "
            "ON e.tenant = x.tenant AND e.seq = x.m")


def _reference(cur, pg: bool, size: int) -> list[tuple[str, int, bytes]]:
    cur.execute(GROUP_BY.format(ph="%s" if pg else "?"), (size,))
    return sorted((t, (seq if tseq is None else tseq) + 1, bytes(eh))
                  for t, seq, tseq, eh in cur.fetchall())


def test_the_skip_scan_finds_every_tenant_head_at_every_size(ledger: Ledger) -> None:
    # tenants whose ids sort around each other and around "default" ('-', '.', '_', digits)
    order = ["acme", "default", "a-b", "a.b", "a_b", "0z", "zz", "acme", "a-b", "default"]
    subs = realistic(len(order))
    for tenant, sub in zip(order, subs, strict=True):
        assert ledger.append(sub, tenant=tenant).ok
    pg = is_pg(ledger.engine)
    with ledger.engine.connect() as conn:
        cur = conn.connection.cursor()
        for size in range(len(order) + 2):
            got = all_heads_at(cur, pg, size)
            assert got == _reference(cur, pg, size), size
            assert [t for t, _, _ in got] == sorted({t for t in order[:size]})
        cur.close()


def test_no_entries_no_heads(ledger: Ledger) -> None:
    with ledger.engine.connect() as conn:
        cur = conn.connection.cursor()
        assert all_heads_at(cur, is_pg(ledger.engine), 10) == []
        cur.close()
