"""The parts a store hashes to link an entry (ledger.core.tenant.link_parts, used by the
PostgreSQL one-statement append) give exactly the core's link, for every tenant."""

from __future__ import annotations

import hashlib
import struct

from hypothesis import given
from hypothesis import strategies as st

from ledger.core.tenant import DEFAULT_TENANT, link_parts, tenant_entry_hash

U63 = st.integers(min_value=0, max_value=2**63 - 1)
TENANTS = st.one_of(st.just(DEFAULT_TENANT),
                    st.from_regex(r"\A[a-z0-9][a-z0-9._-]{0,62}\Z", fullmatch=True))


def _from_parts(tenant: str, prev: bytes, seq: int, tseq: int, t: int, body: bytes) -> bytes:
    parts = link_parts(tenant, body)
    q = struct.Struct(">q").pack  # int8send: signed big-endian, as the database packs
    return hashlib.sha256(parts.tag + prev + q(seq) + (q(tseq) if parts.binds_tseq else b"")
                          + q(t) + parts.tail).digest()


@given(TENANTS, st.binary(min_size=32, max_size=32), U63, U63, U63,
       st.binary(min_size=32, max_size=32))
def test_the_parts_hash_to_the_core_link(tenant: str, prev: bytes, seq: int, tseq: int, t: int,
                                         body: bytes) -> None:
    assert _from_parts(tenant, prev, seq, tseq, t, body) == \
        tenant_entry_hash(tenant, prev, seq, tseq, t, body)


def test_only_the_default_link_leaves_tseq_out() -> None:
    body = bytes(32)
    assert not link_parts(DEFAULT_TENANT, body).binds_tseq
    assert link_parts("acme", body).binds_tseq
    assert link_parts("acme", body).tail == b"\x04acme" + body
