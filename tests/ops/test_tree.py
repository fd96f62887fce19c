"""Syncing the stored Merkle tree refuses a ledger it cannot extend honestly (SQLite and
PostgreSQL): a deleted row, a rewritten link, a lost node; and the stored tree's proofs
refuse sizes it does not hold."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sqlalchemy import text

from ledger import Ledger
from ledger.demo.samples import realistic
from ledger.errors import TreeIntegrityError, UsageError
from ledger.ops.checkpoint import StoredTree, sync_tree
from ledger.store.tree import read_store
from tests import merkle_tamper as M
from tests import tamper as T


@pytest.fixture
def ledger(db_url: str) -> Iterator[Ledger]:
    with Ledger.init(db_url) as L:
        L.append_many(realistic(12))
        yield L


def _sync_fails(L: Ledger) -> TreeIntegrityError:
    with pytest.raises(TreeIntegrityError) as caught:
        sync_tree(L.engine)
    return caught.value


def test_a_deleted_row_is_an_entry_gap(ledger, db_url):
    with T.unlocked(db_url) as conn:
        conn.execute(text("DELETE FROM entries WHERE seq = 5"))
    err = _sync_fails(ledger)
    assert (err.code, err.detail) == ("entry_gap", {"seq": 5})


def test_a_deleted_last_row_is_an_entry_gap(ledger, db_url):
    with T.unlocked(db_url) as conn:
        conn.execute(text("DELETE FROM entries WHERE seq = 11"))  # the head still says 12
    err = _sync_fails(ledger)
    assert (err.code, err.detail) == ("entry_gap", {"seq": 11})


def test_a_rewritten_link_is_a_broken_chain(ledger, db_url):
    with T.unlocked(db_url) as conn:
        T.update_entry(conn, 7, prev_hash=b"\x07" * 32)
    err = _sync_fails(ledger)
    assert (err.code, err.detail) == ("chain_broken", {"seq": 7})


def test_a_lost_edge_node_stops_the_next_sync(ledger, db_url):
    assert sync_tree(ledger.engine) == 12
    ledger.append_many(realistic(3, start=12))
    with M.connection(db_url) as conn, M.unguarded(conn, "merkle_nodes"):
        conn.execute(text("DELETE FROM merkle_nodes WHERE level = 3 AND idx = 0"))
    assert _sync_fails(ledger).code == "tree_node_missing"


def test_the_stored_tree_refuses_what_it_does_not_hold(ledger, db_url):
    assert sync_tree(ledger.engine) == 12
    with read_store(ledger.engine) as store:
        tree = StoredTree(store, 12)
        for call, code in [(lambda: tree.root(13), "size_out_of_range"),
                           (lambda: tree.inclusion_proof(12, 12), "seq_out_of_range"),
                           (lambda: tree.consistency_proof(8, 4), "size_out_of_range")]:
            with pytest.raises(UsageError) as caught:
                call()
            assert caught.value.code == code
    with M.connection(db_url) as conn, M.unguarded(conn, "merkle_nodes"):
        conn.execute(text("DELETE FROM merkle_nodes WHERE level = 0 AND idx = 3"))
    with read_store(ledger.engine) as store, pytest.raises(TreeIntegrityError) as caught:
        StoredTree(store, 12).inclusion_proof(2, 12)
    assert caught.value.code == "tree_node_missing"
