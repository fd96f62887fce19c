"""Reads of a tenant entry over HTTP and through the reader client, on both engines.

``GET /v1/entries/{seq}`` (with and without ``?proof=true``) shows an entry of a tenant
other than ``default`` as proven, with its tenant; its proof bundle carries ``tenant`` and
``tseq`` and verifies offline; ``LedgerReader.get`` proves it.  With its ``tenant`` or its
``tseq`` changed by raw SQL the server flags it, the bundle fails, and the reader refuses it.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from ledger.client import LedgerReader
from ledger.crypto.keys import Keyring, jwks_public_keys
from ledger.demo.samples import math_verified
from ledger.errors import EntryUnverified, ProofError
from ledger.facade import Ledger
from ledger.verify.proof import verify_inclusion_bundle
from tests.client.server import LedgerServer
from tests.conftest import ENGINES
from tests.conftest import engine_url as fresh_db_url
from tests.tamper import unlocked, update_entry

PLAN = ["default", "acme", "default", "acme", "beta", "default"]
TENANT_SEQ = 3  # acme's second entry (tseq 1), between entries of other tenants


@pytest.fixture(scope="module", params=ENGINES)
def srv(request: pytest.FixtureRequest,
        tmp_path_factory: pytest.TempPathFactory) -> Iterator[LedgerServer]:
    tmp = tmp_path_factory.mktemp(f"tenant-reads-{request.param}")
    server = LedgerServer(fresh_db_url(request.param, request, tmp), tmp,
                          f"test.example/tenant-reads-{request.param}")
    with Ledger.open(server.db_url) as ledger:
        for i, t in enumerate(PLAN):
            s = math_verified(random.Random(i).randrange(10**6), random.Random(i))
            assert ledger.append(s, tenant=t).seq == i
        ledger.checkpoint(Keyring.load(server.keys))
    server.start()
    yield server
    server.stop()


def _jwks(srv: LedgerServer) -> dict[str, Any]:
    return httpx.get(srv.url + "/.well-known/jwks.json").json()  # type: ignore[no-any-return]


def _get(srv: LedgerServer, seq: int, proof: bool, role: str = "auditor") -> dict[str, Any]:
    with httpx.Client(base_url=srv.url, timeout=30, headers={
            "Authorization": f"Bearer {srv.token(role, f'r-{role}')}"}) as c:
        r = c.get(f"/v1/entries/{seq}", params={"proof": "true"} if proof else {})
    assert r.status_code == 200, r.text
    return r.json()  # type: ignore[no-any-return]


def _reader(srv: LedgerServer, state: Path) -> LedgerReader:
    return LedgerReader(srv.url, srv.token("auditor", "r-auditor"), state, keys=_jwks(srv))


@pytest.fixture
def rewrite(srv: LedgerServer) -> Iterator[Any]:
    """Change columns of the tenant entry behind the ledger's back; put them back after."""
    with Ledger.open(srv.db_url) as ledger:
        before = ledger.get(TENANT_SEQ)

    def change(**values: Any) -> None:
        with unlocked(srv.db_url) as conn:
            update_entry(conn, TENANT_SEQ, **values)
    yield change
    change(tenant=before["tenant"], tseq=before["tseq"])


def test_a_tenant_entry_is_proven_over_http_and_by_the_reader(srv: LedgerServer,
                                                               tmp_path: Path) -> None:
    for seq, tenant in enumerate(PLAN):
        for role in ("auditor", "developer"):
            entry = _get(srv, seq, False, role)["entry"]
            assert entry["integrity"]["verified"] is True, (seq, role, entry["integrity"])
            assert entry["tenant"] == tenant
    got = _get(srv, TENANT_SEQ, True)
    assert got["entry"]["integrity"]["verified"] is True
    bundle = got["proof"]
    assert (bundle["entry"]["tenant"], bundle["entry"]["tseq"]) == ("acme", 1)
    assert "tenant" not in _get(srv, 2, True)["proof"]["entry"]
    proven = verify_inclusion_bundle(bundle, jwks_public_keys(_jwks(srv)))
    assert (proven.seq, proven.tenant, proven.tseq) == (TENANT_SEQ, "acme", 1)
    with _reader(srv, tmp_path / "state.json") as reader:
        for seq, tenant in enumerate(PLAN):
            v = reader.get(seq)
            assert v.values_checked and v.entry["tenant"] == tenant, seq


@pytest.mark.parametrize("change", [{"tenant": "beta"}, {"tenant": "default"}, {"tseq": 5}])
def test_a_tenant_entry_rewritten_by_sql_is_flagged(srv: LedgerServer, tmp_path: Path,
                                                    rewrite: Any, change: dict[str, Any]) -> None:
    rewrite(**change)
    entry = _get(srv, TENANT_SEQ, False)["entry"]
    assert entry["integrity"]["verified"] is False
    assert "entry_hash_mismatch" in entry["integrity"]["codes"]
    assert entry["tenant"] is None
    got = _get(srv, TENANT_SEQ, True)
    assert got["entry"]["integrity"]["verified"] is False
    with pytest.raises(ProofError) as exc:
        verify_inclusion_bundle(got["proof"], jwks_public_keys(_jwks(srv)))
    assert exc.value.code == "entry_hash_mismatch"
    with _reader(srv, tmp_path / "state.json") as reader, \
            pytest.raises(EntryUnverified) as refused:
        reader.get(TENANT_SEQ)
    assert refused.value.code == "entry_hash_mismatch"
    assert refused.value.detail["reported_by"] == "reader"
