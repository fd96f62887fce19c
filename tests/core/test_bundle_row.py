"""BundleRow declares, for the type checker, exactly the entries columns it stores."""

from __future__ import annotations

from ledger.core import bundle
from ledger.core.bundle import BundleRow, read_entry


def test_declared_attributes_are_the_slots() -> None:
    assert set(BundleRow.__annotations__) == set(BundleRow.__slots__)
    assert set(BundleRow.__slots__) == set(bundle._COLUMNS) | {"redacted_by"}


def test_a_read_line_has_every_column() -> None:
    h = "sha256:" + "00" * 32
    row, blobs, problems = read_entry({
        "seq": 3, "kind": "result", "recorded_at_us": 7, "envelope": "{}", "body_hash": h,
        "prev_hash": h, "entry_hash": h, "payloads": {}})
    assert (row.seq, row.kind, row.recorded_at, row.envelope) == (3, "result", 7, b"{}")
    assert row.entry_hash == bytes(32) and row.status is None and row.subject is None
    assert row.redacted_by == {}
    assert (blobs, problems) == ({}, [])
