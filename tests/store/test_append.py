"""The append transaction (SQLite and PostgreSQL): lock, insert, move the head, commit;
an error rolls everything back; idempotency keys are found."""

from __future__ import annotations

import pytest

from ledger.errors import StoreDataError
from ledger.store import db
from ledger.store import entries as repo
from ledger.store.append import append_transaction
from ledger.store.entries import ENTRY_COLUMNS, Head


def _row(seq: int, prev: bytes, key: str | None = None) -> dict:
    row = {c: None for c in ENTRY_COLUMNS}
    row.update(seq=seq, kind="result", recorded_at=1000 + seq, envelope=b"{}" + bytes([seq]),
               body_hash=b"b" * 32, prev_hash=prev, entry_hash=bytes([seq]) * 32,
               idempotency_key=key)
    return row


def test_insert_and_move_the_head_then_read_back(ledger):
    with append_transaction(ledger.engine) as txn:
        h = txn.lock_head()
        assert h.size == 0
        txn.insert_payloads([(0, None, b"doc0"), (8, None, b"d1")])  # pid = seq * 8 + slot
        txn.insert_entries([_row(0, h.head_hash, "k0"), _row(1, b"\x00" * 32)])
        txn.set_head(Head(2, b"\x01" * 32, 1001))
    with db.connect(ledger.engine) as conn:
        assert repo.read_head(conn) == Head(2, b"\x01" * 32, 1001)
        assert [r.seq for r in repo.iter_entries(conn)] == [0, 1]
        assert repo.get_payloads(conn, 0) == {0: repo.Payload(None, b"doc0")}


def test_an_error_inside_rolls_back_everything(ledger):
    with pytest.raises(RuntimeError), append_transaction(ledger.engine) as txn:
        h = txn.lock_head()
        txn.insert_payloads([(0, None, b"x")])
        txn.insert_entries([_row(0, h.head_hash)])
        txn.set_head(Head(1, b"\x00" * 32, 1000))
        raise RuntimeError("caller failed")
    with db.connect(ledger.engine) as conn:
        assert repo.read_head(conn).size == 0  # type: ignore[union-attr]
        assert repo.max_seq(conn) is None
        assert repo.get_payloads(conn, 0) == {}


def test_payload_rows_are_keyed_by_entry_and_never_replaced(ledger):
    """(Revision 0005: payloads are laid out by entry, pid = seq * 8 + slot.)"""
    with append_transaction(ledger.engine) as txn:
        txn.lock_head()
        txn.insert_payloads([(3, b"s" * 32, b"first")])
    with pytest.raises(StoreDataError), append_transaction(ledger.engine) as txn:
        txn.lock_head()
        txn.insert_payloads([(3, None, b"second")])
    with db.connect(ledger.engine) as conn:
        assert repo.get_payloads(conn, 0) == {3: repo.Payload(b"s" * 32, b"first")}


def test_idempotency_lookup_finds_stored_keys_only(ledger):
    with append_transaction(ledger.engine) as txn:
        h = txn.lock_head()
        txn.insert_entries([_row(0, h.head_hash, "key-a")])
        txn.set_head(Head(1, b"\x00" * 32, 1000))
    with append_transaction(ledger.engine) as txn:
        txn.lock_head()
        keys = ["key-a", "key-b"] + [f"k{i}" for i in range(1200)]  # several chunks
        found = txn.find_idempotent(keys)
    assert list(found) == ["key-a"]
    assert found["key-a"].seq == 0 and found["key-a"].entry_hash == b"\x00" * 32
    assert found["key-a"].envelope == b"{}\x00" and found["key-a"].recorded_at == 1000
