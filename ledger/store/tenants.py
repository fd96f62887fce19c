"""Tenant heads read from the entries (docs/tenants.md): never from ``tenant_heads`` alone.

A tenant's head at a tree size N is its last entry below N.  The functions take a DBAPI
cursor (the append transaction's, to sign under the append lock, or a read's) and whether
it is PostgreSQL.
"""

from __future__ import annotations

from typing import Any

from ledger.store.db import placeholder

# (tenant, count of its entries below the size, the last one's entry hash)
HeadRow = tuple[str, int, bytes]


def _bytes(data: Any) -> bytes:
    return data.encode("utf-8", "surrogatepass") if isinstance(data, str) else bytes(data)


def heads_at(cur: Any, pg: bool, size: int) -> list[HeadRow]:
    """The head of every tenant that ``tenant_heads`` names and that has an entry below
    ``size``: one index lookup per tenant (what a checkpoint signs; the audit checks the
    set against the entries with :func:`all_heads_at`)."""
    cur.execute("SELECT tenant FROM tenant_heads ORDER BY tenant")
    return _last_below(cur, pg, [r[0] for r in cur.fetchall()], size)


def _last_below(cur: Any, pg: bool, tenants: list[str], size: int) -> list[HeadRow]:
    """The head at ``size`` of each of ``tenants`` that has an entry below it, in the order
    given: one index lookup each."""
    ph = placeholder(pg)
    out: list[HeadRow] = []
    for tenant in tenants:
        cur.execute(f"SELECT seq, tseq, entry_hash FROM entries WHERE tenant = {ph} "
                    f"AND seq < {ph} ORDER BY seq DESC LIMIT 1", (tenant, size))
        got = cur.fetchone()
        if got is not None:
            seq, tseq, eh = got
            out.append((tenant, (seq if tseq is None else tseq) + 1, _bytes(eh)))
    return out


# The distinct tenants of the entries, one index probe each (a skip scan of the
# (tenant, seq) index: O(tenants * log entries), where GROUP BY reads the whole index).
_TENANTS_SQL = """
WITH RECURSIVE t(tenant) AS (
  SELECT min(tenant) FROM entries
  UNION ALL
  SELECT (SELECT min(e.tenant) FROM entries e WHERE e.tenant > t.tenant)
  FROM t WHERE t.tenant IS NOT NULL)
SELECT tenant FROM t WHERE tenant IS NOT NULL
"""


def all_heads_at(cur: Any, pg: bool, size: int) -> list[HeadRow]:
    """The head of every tenant with an entry below ``size``, whatever ``tenant_heads``
    says (the audit's): the tenants found in the entries by a skip scan of the
    ``(tenant, seq)`` index, then one lookup each -- O(tenants x log entries), so an
    incremental audit does not read the whole ledger for it."""
    cur.execute(_TENANTS_SQL)
    return _last_below(cur, pg, sorted(r[0] for r in cur.fetchall()), size)
