"""The spool on a real directory: framing, durability across reopen, the torn tail cut at
every byte, corruption elsewhere, bounds, the directory lock, rotation and compaction."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.client import Spool, SpoolCorrupt, SpoolFull, SpoolLocked, framing, inspect

bodies = st.lists(st.dictionaries(st.text(max_size=8), st.text(max_size=40), max_size=4),
                  min_size=1, max_size=6)


@given(bodies, st.data())
@settings(max_examples=200, deadline=None)
def test_scan_of_any_prefix_keeps_exactly_the_whole_records(docs, data) -> None:
    records = [framing.encode(framing.KIND_APPEND, {"id": i, "d": d}) for i, d in enumerate(docs)]
    blob = framing.SEGMENT_MAGIC + b"".join(records)
    cut = data.draw(st.integers(len(framing.SEGMENT_MAGIC), len(blob)))
    got = framing.scan(blob[:cut])
    ends, pos = [], len(framing.SEGMENT_MAGIC)
    for r in records:
        pos += len(r)
        ends.append(pos)
    whole = sum(1 for e in ends if e <= cut)
    assert [r.body["d"] for r in got.records] == docs[:whole]
    assert got.good_end == (ends[whole - 1] if whole else len(framing.SEGMENT_MAGIC))
    assert (got.problem is None) == (cut in ends or cut == len(framing.SEGMENT_MAGIC))


@given(bodies, st.data())
@settings(max_examples=100, deadline=None)
def test_a_flipped_bit_is_never_read_as_a_good_record(docs, data) -> None:
    records = [framing.encode(framing.KIND_APPEND, {"id": i, "d": d}) for i, d in enumerate(docs)]
    blob = bytearray(framing.SEGMENT_MAGIC + b"".join(records))
    at = data.draw(st.integers(len(framing.SEGMENT_MAGIC), len(blob) - 1))
    blob[at] ^= 1 << data.draw(st.integers(0, 7))
    got = framing.scan(bytes(blob))
    assert got.problem is not None
    assert got.good_end <= at  # nothing at or after the damage is believed


def sub(i: int) -> tuple[bytes, str]:
    return json.dumps({"n": i, "idempotency_key": f"k-{i}"}).encode(), f"k-{i}"


def test_items_survive_reopen_in_order_and_done_removes_them(tmp_path: Path) -> None:
    with Spool(tmp_path / "s") as sp:
        for i in range(5):
            sp.put(*sub(i))
    with Spool(tmp_path / "s") as sp:
        items = sp.peek(10)
        assert [i.key for i in items] == [f"k-{i}" for i in range(5)]
        assert [json.loads(i.body)["n"] for i in items] == list(range(5))
        sp.done([(items[0], {"outcome": "appended", "seq": 0}),
                 (items[1], {"outcome": "replayed", "seq": 1})])
        assert len(sp) == 3
    with Spool(tmp_path / "s") as sp:
        assert [i.key for i in sp.peek(10)] == ["k-2", "k-3", "k-4"]
        assert sp.status().pending == 3


def test_torn_last_record_is_cut_at_every_byte_and_earlier_ones_survive(tmp_path: Path) -> None:
    with Spool(tmp_path / "full") as sp:
        for i in range(3):
            sp.put(*sub(i))
    seg = next((tmp_path / "full").glob("*.seg"))
    data = seg.read_bytes()
    last = framing.scan(data).records[-1]
    for cut in range(last.offset + 1, last.offset + last.size):
        d = tmp_path / f"cut-{cut}"
        d.mkdir()
        (d / seg.name).write_bytes(data[:cut])
        assert inspect(d).pending == 2 and inspect(d).dropped
        with Spool(d) as sp:
            assert [i.key for i in sp.peek(10)] == ["k-0", "k-1"]
            assert sp.status().dropped[0]["bytes"] == cut - last.offset
            sp.put(*sub(9))  # appending after the cut works
        with Spool(d) as sp:
            assert [i.key for i in sp.peek(10)] == ["k-0", "k-1", "k-9"]
            assert not sp.status().dropped


def test_damage_before_the_newest_segment_is_corruption(tmp_path: Path) -> None:
    with Spool(tmp_path, segment_bytes=200) as sp:
        for i in range(6):
            sp.put(*sub(i))
    segs = sorted(tmp_path.glob("*.seg"))
    assert len(segs) > 1
    data = bytearray(segs[0].read_bytes())
    data[-3] ^= 0xFF
    segs[0].write_bytes(bytes(data))
    with pytest.raises(SpoolCorrupt, match="corrupt"):
        Spool(tmp_path)
    with pytest.raises(SpoolCorrupt):
        inspect(tmp_path)


def test_bounds_say_so_and_write_nothing(tmp_path: Path) -> None:
    with Spool(tmp_path / "n", max_records=2) as sp:
        sp.put(*sub(0))
        sp.put(*sub(1))
        with pytest.raises(SpoolFull, match="full: 2 items") as err:
            sp.put(*sub(2))
        assert err.value.code == "spool_full" and err.value.exit_code == 4
        assert len(sp) == 2
    with Spool(tmp_path / "b", max_bytes=150) as sp:
        sp.put(*sub(0))
        with pytest.raises(SpoolFull, match="bytes"):
            sp.put_many([sub(1), sub(2)])
        assert len(sp) == 1
    assert inspect(tmp_path / "b").pending == 1


def test_one_process_at_a_time(tmp_path: Path) -> None:
    with Spool(tmp_path), pytest.raises(SpoolLocked):
        Spool(tmp_path)
    Spool(tmp_path).close()  # released


def test_segments_rotate_and_drained_ones_are_deleted(tmp_path: Path) -> None:
    with Spool(tmp_path, segment_bytes=300) as sp:
        for i in range(20):
            sp.put(*sub(i))
        assert len(list(tmp_path.glob("*.seg"))) > 3
        items = sp.peek(12)
        sp.done([(i, {"outcome": "appended"}) for i in items])
        assert [i.key for i in sp.peek(1)] == ["k-12"]
        kept = len(list(tmp_path.glob("*.seg")))
        sp.done([(i, {"outcome": "rejected", "error": {"code": "x"}}) for i in sp.peek(100)])
        assert len(list(tmp_path.glob("*.seg"))) == 1 < kept
        status = sp.status()
        assert status.pending == 0 and status.rejected == 8
    rejected = (tmp_path / "rejected.jsonl").read_text().splitlines()
    assert json.loads(rejected[0])["key"] == "k-12"
    assert json.loads(json.loads(rejected[0])["body"])["n"] == 12
    with Spool(tmp_path) as sp:
        assert len(sp) == 0
        assert sp.put(*sub(99)).id > 20  # ids never repeat within a spool's life
