"""Large batches validated by worker processes give exactly the plain path's results.

``validate_batch`` with workers (``LEDGER_VALIDATE_WORKERS``) against ``validate_items`` in
this process, on a batch that mixes every kind of item: realistic results of all
statuses, attested upstream submissions (judged here, not in a worker), and rejections
(bad JSON, duplicate keys, contract violations, bad evidence).  Then end to end: a ledger
appended through the pool holds what the plain path would, and its audit is clean.
"""

from __future__ import annotations

import json
import random

import pytest

from ledger import Ledger
from ledger.clock import FixedClock
from ledger.demo.samples import realistic, rejected_examples
from ledger.ops.append import pool as A
from ledger.store import codec
from tests import tamper as T


@pytest.fixture(scope="module", autouse=True)
def _stop_pool():
    yield
    A.shutdown_pool()


def _batch(n: int = A.POOL_MIN_ITEMS + 40) -> list[bytes]:
    good = [json.dumps(s).encode() for s in realistic(n)]
    attested = [json.dumps(s).encode() for s in T.fixtures()]
    bad = [json.dumps(s).encode() for _, s in rejected_examples()]
    bad += [b"{not json", b'{"engine": "math", "engine": "math"}', b"[1, 2]", b"\xff\xfe"]
    items = good[:]
    rng = random.Random(3)
    for extra in attested + bad:  # spread over every worker's slice
        items.insert(rng.randrange(len(items)), extra)
    return items


def _same(plain: A.Prepared, pooled: A.Prepared, ledger_id: str) -> None:
    assert (pooled.index, pooled.raw, pooled.kind) == (plain.index, plain.raw, plain.kind)
    assert pooled.fields == plain.fields and pooled.payloads == plain.payloads
    assert pooled.idempotency_key == plain.idempotency_key
    assert pooled.salts.keys() == plain.salts.keys()
    # the salts are random: sealed under the pooled item's salts, the plain item's envelope
    # and digests must be the pooled item's bytes
    resealed = A.Prepared(plain.kind, dict(plain.fields), dict(plain.payloads),
                          plain.idempotency_key).seal(ledger_id, salts=pooled.salts)
    assert resealed.envelope == pooled.envelope
    assert resealed.digests == pooled.digests
    assert resealed.payload_rows() == pooled.payload_rows()
    # the stored form was made in the worker: the same as made here, and it decodes back
    assert resealed.stored_rows() == pooled.stored_rows()
    assert [codec.decode(how, kept) for _s, _salt, how, kept in pooled.stored_rows()] == \
        [data for _s, _salt, data in pooled.payload_rows()]


@pytest.mark.parametrize("workers", [1, 2])
def test_pool_results_equal_the_plain_path(workers):
    items = _batch()
    lid = "5b0cbb2e-6d6a-4a51-8d3c-3c1c1f7f6b10"
    plain_ok, plain_bad = A.validate_items(items, "p", lid)
    pool_ok, pool_bad = A.validate_batch(items, "p", lid, A.default_judge, workers)
    assert [(r.index, r.error) for r in pool_bad] == [(r.index, r.error) for r in plain_bad]
    assert len(plain_bad) == len(rejected_examples()) + 4
    assert [p.index for p in pool_ok] == [p.index for p in plain_ok]
    for a, b in zip(plain_ok, pool_ok, strict=True):
        _same(a, b, lid)
    attested = [p for p in pool_ok if p.fields["att_verdict"] != "none"]
    assert len(attested) == sum(T.token_of(s) is not None for s in T.fixtures()) > 0
    assert all(p.sub is not None for p in attested)  # judged here, can be re-judged


def test_small_batches_and_objects_stay_in_process(monkeypatch):
    """Below the threshold, or with items that are not bytes, no worker is involved."""
    monkeypatch.setattr(A, "_pool", lambda workers: pytest.fail("pool used"))
    lid = "5b0cbb2e-6d6a-4a51-8d3c-3c1c1f7f6b10"
    small = _batch()[:A.POOL_MIN_ITEMS - 1]
    A.validate_batch(small, None, lid, A.default_judge, 1)
    objects = realistic(A.POOL_MIN_ITEMS + 1)
    ok, bad = A.validate_batch(objects, None, lid, A.default_judge, 1)
    assert len(ok) == len(objects) and not bad


def test_workers_setting(monkeypatch):
    monkeypatch.delenv("LEDGER_VALIDATE_WORKERS", raising=False)
    assert A.pool_workers() == 0
    monkeypatch.setenv("LEDGER_VALIDATE_WORKERS", "2")
    assert A.pool_workers() == 2
    monkeypatch.setenv("LEDGER_VALIDATE_WORKERS", "two")
    with pytest.raises(Exception, match="LEDGER_VALIDATE_WORKERS must be an integer"):
        A.pool_workers()


def test_append_through_the_pool_equals_plain_and_audits_clean(tmp_path, monkeypatch):
    items = _batch()
    outcomes = {}
    for mode in ("plain", "pool"):
        monkeypatch.setenv("LEDGER_VALIDATE_WORKERS", "1" if mode == "pool" else "0")
        with Ledger.init(f"sqlite:///{tmp_path / mode}.db", clock=FixedClock(T.FIXTURE_TIME_US)
                         ) as L:
            results = L.append_many(items, producer="p")
            outcomes[mode] = [(r.ok, r.seq, r.error) for r in results]
            report = L.audit()
            assert report.findings == () and report.summary.failed == 0, report
            assert L.quarantine_status()["rows"] == sum(not r.ok for r in results)
    assert outcomes["pool"] == outcomes["plain"]


def test_no_workers_available_falls_back_to_this_process(monkeypatch, caplog):
    """A host that cannot start processes still validates the batch, with the same results."""
    def refuse(workers):
        raise OSError("no processes here")

    monkeypatch.setattr(A, "_pool", refuse)
    items = _batch()
    lid = "5b0cbb2e-6d6a-4a51-8d3c-3c1c1f7f6b10"
    ok, bad = A.validate_batch(items, None, lid, A.default_judge, 1)
    plain_ok, plain_bad = A.validate_items(items, None, lid)
    assert [(r.index, r.error) for r in bad] == [(r.index, r.error) for r in plain_bad]
    assert [(p.index, p.fields) for p in ok] == [(p.index, p.fields) for p in plain_ok]
    assert "validation workers unavailable" in caplog.text
