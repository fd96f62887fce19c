"""The tree store (SQLite and PostgreSQL): sizes, nodes, entry links, checkpoints."""

from __future__ import annotations

from ledger.demo.samples import realistic
from ledger.store.append import append_transaction
from ledger.store.tree import TreeStore, read_store


def test_nodes_sizes_and_checkpoints_round_trip(ledger):
    ledger.append_many(realistic(5))
    with read_store(ledger.engine) as store:
        assert store.sizes() == (5, 0)
        links = [row for page in store.iter_entry_links(0, 5, 2) for row in page]
        assert [s for s, _, _, _ in links] == [0, 1, 2, 3, 4]
        assert {t for *_, t in links} == {"default"}
        assert all(links[i][1] == links[i - 1][2] for i in range(1, 5))
        hashes = [row for page in store.iter_entry_hashes(3, None, 2) for row in page]
        assert hashes == [(s, e) for s, _, e, _ in links[3:]]
        assert store.latest_checkpoint() is None
    with append_transaction(ledger.engine) as txn:
        store = TreeStore(txn.cur, txn.pg)
        store.insert_nodes([((0, 0), b"a" * 32), ((0, 1), b"b" * 32), ((1, 0), b"c" * 32)])
        store.set_tree_size(2)
        store.insert_checkpoint(2, b"c" * 32, "note-2", 10)
        store.insert_checkpoint(1, b"a" * 32, "note-1", 11)
    with read_store(ledger.engine) as store:
        assert store.tree_size() == 2
        assert store.get_nodes([(1, 0), (0, 1), (5, 5)]) == {(1, 0): b"c" * 32,
                                                             (0, 1): b"b" * 32}
        assert store.get_nodes([]) == {}
        latest = store.latest_checkpoint()
        assert latest is not None and (latest.size, latest.note) == (2, "note-2")
        one = store.checkpoint_at(1)
        assert one is not None and one.root_hash == b"a" * 32
        assert store.checkpoint_at(3) is None


def test_a_failed_tree_write_is_rolled_back(ledger):
    try:
        with append_transaction(ledger.engine) as txn:
            store = TreeStore(txn.cur, txn.pg)
            store.insert_nodes([((0, 0), b"a" * 32)])
            store.set_tree_size(1)
            raise KeyError("stop")
    except KeyError:
        pass
    with read_store(ledger.engine) as store:
        assert store.tree_size() == 0 and store.get_nodes([(0, 0)]) == {}



def test_empty_node_inserts_and_pages_past_the_end(ledger):
    ledger.append_many(realistic(3))
    with append_transaction(ledger.engine) as txn:
        TreeStore(txn.cur, txn.pg).insert_nodes([])
    with read_store(ledger.engine) as store:
        assert store.get_nodes([(0, 0)]) == {}
        assert list(store.iter_entry_links(3, 10, 2)) == []  # no rows: the walk stops
        assert [len(p) for p in store.iter_entry_links(0, 10, 2)] == [2, 1]
