"""Fixtures: a ledger with a signing key, real witness processes and a real TSA."""

from __future__ import annotations

import pytest

from ledger import Ledger
from ledger.crypto.keys import Keyring
from ledger.witness.local_tsa import LocalTsa
from tests.witness.procs import WitnessProcess

ORIGIN = "ledger.example/witnessed"


@pytest.fixture
def keyring(tmp_path):
    ring = Keyring.load(tmp_path / "keys")
    ring.generate(ORIGIN, 1_790_000_000_000_000)
    return ring


@pytest.fixture
def ledger(db_url):
    with Ledger.init(db_url, origin=ORIGIN) as L:
        yield L


@pytest.fixture
def witnesses(tmp_path, keyring):
    """Two running witnesses of ORIGIN, stopped at the end."""
    procs = [WitnessProcess(tmp_path / f"w{i}", f"witness.example/w{i}", ORIGIN,
                            [keyring.path / "jwks.json"]) for i in (1, 2)]
    try:
        for p in procs:
            p.start()
        yield procs
    finally:
        for p in procs:
            p.stop()


@pytest.fixture(scope="session")
def tsa():
    with LocalTsa() as t:
        yield t
