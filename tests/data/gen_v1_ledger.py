#!/usr/bin/env python3
"""Write ``tests/data/ledger_rev0004.json``: a small ledger made by the schema and append
code of migration revision 0004 (format v1 envelopes, content-addressed payloads, digest
columns), dumped table by table.

It was run once with the code of that revision (the commit before the version 2 layout)::

    python tests/data/gen_v1_ledger.py tests/data/ledger_rev0004.json

and is kept for the record: with today's code it no longer runs (it needs the v1 append
path).  ``tests/store/test_migrate_v2.py`` loads the dump into a database migrated to
0004, upgrades it to the head and audits it.
"""

from __future__ import annotations

import base64
import json
import sys
import tempfile
from pathlib import Path

from sqlalchemy import create_engine, inspect, text

from ledger import Ledger
from ledger.clock import FixedClock
from ledger.crypto.keys import Keyring
from ledger.demo.samples import bench_submission
from ledger.ops.audit import AuditOptions

DATA = Path(__file__).resolve().parent
ISSUER = "did:qwed:node:test"
FIXTURE_TIME_US = (1767225600 + 3600) * 1_000_000  # see tests/tamper.py (FIXTURE_IAT)
ORIGIN = "ledger.example/fixture-v1"


def _cell(v: object) -> object:
    if isinstance(v, (bytes, memoryview)):
        return {"b64": base64.b64encode(bytes(v)).decode("ascii")}
    return v


def main(out: str) -> None:
    import random

    fixtures = [json.loads(x) for x in (DATA / "qwed_fixtures.jsonl").read_text().splitlines()]
    for f in fixtures:
        f.pop("_expect", None)
    jwks = json.loads((DATA / "qwed_issuer_jwks.json").read_text())
    rng = random.Random(7)
    tmp = Path(tempfile.mkdtemp())
    url = f"sqlite:///{tmp / 'v1.db'}"
    ring = Keyring.load(tmp / "keys")
    ring.generate(ORIGIN, FIXTURE_TIME_US)
    with Ledger.init(url, origin=ORIGIN, clock=FixedClock(FIXTURE_TIME_US, 1000)) as L:
        L.trust_issuer(ISSUER, jwks)
        L.append_many(fixtures[:30], producer="fixture")
        L.append_many([bench_submission(i, rng) for i in range(20)], producer="bench")
        L.checkpoint(ring)
        L.append_many(fixtures[30:], producer="fixture")
        L.append_many([{**bench_submission(100 + i, rng), "idempotency_key": f"k-{i}"}
                       for i in range(5)])
        L.audit(AuditOptions(record=True, producer="auditor"))
        L.checkpoint(ring)
        ledger_id = L.meta.ledger_id
    engine = create_engine(url)
    tables = {}
    with engine.connect() as conn:
        rev = conn.execute(text("SELECT version_num FROM alembic_version")).scalar_one()
        for name in inspect(conn).get_table_names():
            if name == "alembic_version":
                continue
            res = conn.execute(text(f"SELECT * FROM {name}"))
            tables[name] = {"columns": list(res.keys()),
                            "rows": [[_cell(v) for v in r] for r in res]}
    pub = json.loads((tmp / "keys" / "jwks.json").read_text())
    doc = {"revision": rev, "ledger_id": ledger_id, "origin": ORIGIN,
           "clock_us": FIXTURE_TIME_US, "ledger_jwks": pub, "tables": tables}
    Path(out).write_text(json.dumps(doc, indent=0, sort_keys=True) + "\n")


if __name__ == "__main__":
    main(sys.argv[1])
