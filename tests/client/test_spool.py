"""The spool on a real directory: framing, durability across reopen, the torn tail cut at
every byte, corruption elsewhere, bounds, the directory lock, rotation and compaction."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.client import Spool, SpoolCorrupt, SpoolFull, SpoolLocked, framing, inspect
from ledger.errors import ClientUsage

bodies = st.lists(st.dictionaries(st.text(max_size=8), st.text(max_size=40), max_size=4),
                  min_size=1, max_size=6)


@given(bodies, st.data())
@settings(max_examples=200, deadline=None)
def test_scan_of_any_prefix_keeps_exactly_the_whole_records(docs, data) -> None:
    records = [framing.encode(framing.KIND_DONE, {"id": i + 1, "d": d})
               for i, d in enumerate(docs)]
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
    records = [framing.encode(framing.KIND_DONE, {"id": i + 1, "d": d})
               for i, d in enumerate(docs)]
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


def _one_segment(d: Path, n: int) -> tuple[Path, list[framing.Record]]:
    with Spool(d) as sp:
        sp.put_many([sub(i) for i in range(n)])
    seg = next(d.glob("*.seg"))
    return seg, framing.scan(seg.read_bytes()).records


@pytest.mark.parametrize("where", ["body", "length", "kind"])
def test_a_bad_record_mid_segment_is_corruption_and_salvage_keeps_every_other(
        tmp_path: Path, where: str) -> None:
    """One flipped bit in record 10 of 50 of the newest segment: opening raises naming
    the segment and the offset and changes nothing (it used to cut the segment there,
    losing 40 durably spooled items); salvage sets those bytes aside, keeps the other 49."""
    d = tmp_path / "s"
    seg, records = _one_segment(d, 50)
    bad = records[10]
    at = {"body": bad.offset + framing.HEAD.size + 5, "length": bad.offset + 1,
          "kind": bad.offset + framing.HEAD.size - 1}[where]
    data = bytearray(seg.read_bytes())
    data[at] ^= 0x04
    seg.write_bytes(bytes(data))
    for open_it in (Spool, inspect):
        with pytest.raises(SpoolCorrupt, match=rf"{seg.name} is corrupt at byte {bad.offset}:"
                           r".* 39 readable record\(s\) after") as err:
            open_it(d)
        assert err.value.code == "spool_corrupt" and err.value.exit_code == 1
    assert seg.read_bytes() == bytes(data)  # nothing was cut
    with Spool(d, salvage=True) as sp:
        assert [i.key for i in sp.peek(100)] == [f"k-{i}" for i in range(50) if i != 10]
        (gone,) = sp.status().dropped
        assert (gone["segment"], gone["offset"], gone["bytes"]) == (seg.name, bad.offset,
                                                                    bad.size)
        assert (d / gone["kept_in"]).read_bytes() == bytes(
            data[bad.offset:bad.offset + bad.size])
        sp.put(*sub(77))
    with Spool(d) as sp:  # the repaired segment opens cleanly and keeps the new item
        assert len(sp) == 50 and not sp.status().dropped
        assert sp.peek(100)[-1].key == "k-77"


def test_a_flipped_bit_in_the_last_record_is_a_torn_tail(tmp_path: Path) -> None:
    d = tmp_path / "s"
    seg, records = _one_segment(d, 5)
    data = bytearray(seg.read_bytes())
    data[records[-1].offset + framing.HEAD.size + 3] ^= 1
    seg.write_bytes(bytes(data))
    assert inspect(d).dropped[0]["offset"] == records[-1].offset
    with Spool(d) as sp:
        assert [i.key for i in sp.peek(10)] == [f"k-{i}" for i in range(4)]


MALFORMED = {
    "no id": (framing.KIND_APPEND, {"key": "x", "t": 1, "body": "{}"}),
    "no key": (framing.KIND_APPEND, {"id": 90, "t": 1, "body": "{}"}),
    "id text": (framing.KIND_APPEND, {"id": "abc", "key": "x", "t": 1, "body": "{}"}),
    "id bool": (framing.KIND_APPEND, {"id": True, "key": "x", "t": 1, "body": "{}"}),
    "t text": (framing.KIND_APPEND, {"id": 90, "key": "x", "t": "x", "body": "{}"}),
    "body object": (framing.KIND_APPEND, {"id": 90, "key": "x", "t": 1, "body": {"a": 1}}),
    "done without id": (framing.KIND_DONE, {"outcome": "appended"}),
    "done id text": (framing.KIND_DONE, {"id": "3"}),
}


@pytest.mark.parametrize("last", [False, True], ids=["middle", "last"])
@pytest.mark.parametrize("name", list(MALFORMED))
def test_a_checksummed_record_that_breaks_the_rules_is_corruption(
        tmp_path: Path, name: str, last: bool) -> None:
    """Records with a good checksum but no id/key, a text id or time, an object body, a
    D record without id: spool_corrupt naming segment and offset (they gave tracebacks
    in drain and status), also as the last record (a crash cannot write a good checksum)."""
    d = tmp_path / "s"
    seg, records = _one_segment(d, 3)
    data = seg.read_bytes()
    cut = len(data) if last else records[1].offset
    seg.write_bytes(data[:cut] + framing.encode(*MALFORMED[name]) + data[cut:])
    for open_it in (Spool, inspect):
        with pytest.raises(SpoolCorrupt, match=rf"{seg.name} is corrupt at byte {cut}: record"):
            open_it(d)
    assert seg.read_bytes()[cut:cut + 4] == framing.encode(*MALFORMED[name])[:4]
    with Spool(d, salvage=True) as sp:
        assert [i.key for i in sp.peek(10)] == ["k-0", "k-1", "k-2"]


@pytest.mark.parametrize("body, rule", [
    (b"\xef\xbb\xbf" + json.dumps({"idempotency_key": "k"}).encode(), "byte order mark"),
    (b'{"idempotency_key": "k"},{"idempotency_key": "k2"}', "one JSON object"),
    (b"[1]", "a JSON object"),
    (b'{"a": "\xff"}', "UTF-8"),
    (b"", "one JSON object"),
])
def test_put_refuses_a_body_that_is_not_one_json_object(tmp_path: Path, body: bytes,
                                                        rule: str) -> None:
    with Spool(tmp_path) as sp:
        sp.put(*sub(0))
        size = sum(p.stat().st_size for p in tmp_path.glob("*.seg"))
        with pytest.raises(ClientUsage, match=rule) as err:
            sp.put_many([sub(1), (body, "k")])
        assert err.value.field == "body" and err.value.exit_code == 2
        assert len(sp) == 1
    assert sum(p.stat().st_size for p in tmp_path.glob("*.seg")) == size
    assert inspect(tmp_path).pending == 1


def test_a_symlinked_segment_is_refused_and_its_target_untouched(tmp_path: Path) -> None:
    d = tmp_path / "s"
    d.mkdir()
    target = tmp_path / "precious.txt"
    target.write_bytes(b"not a spool\n")
    (d / "0000000001.seg").symlink_to(target)
    for open_it in (Spool, inspect):
        with pytest.raises(SpoolCorrupt, match="0000000001.seg is a symbolic link"):
            open_it(d)
    assert target.read_bytes() == b"not a spool\n"


def test_a_symlink_planted_as_the_next_segment_or_lock_is_refused(tmp_path: Path) -> None:
    d = tmp_path / "s"
    target = tmp_path / "precious.txt"
    target.write_bytes(b"keep\n")
    with Spool(d, segment_bytes=100) as sp:
        sp.put(*sub(0))
        (d / "0000000002.seg").symlink_to(target)  # where the next put would rotate to
        with pytest.raises(SpoolCorrupt, match="0000000002.seg is a symbolic link"):
            sp.put(*sub(1))
        (d / "rejected.jsonl").symlink_to(target)
        with pytest.raises(SpoolCorrupt, match="rejected.jsonl is a symbolic link"):
            sp.done([(sp.peek(1)[0], {"outcome": "rejected", "error": {"code": "x"}})])
    (d / "0000000002.seg").unlink()
    (d / "lock").unlink()
    (d / "lock").symlink_to(target)
    with pytest.raises(SpoolCorrupt, match="lock is a symbolic link"):
        Spool(d)
    assert target.read_bytes() == b"keep\n"


def test_segments_writable_by_others_linked_or_foreign_are_refused(tmp_path: Path) -> None:
    d = tmp_path / "s"
    with Spool(d) as sp:
        sp.put(*sub(0))
    seg = d / "0000000001.seg"
    assert seg.stat().st_mode & 0o777 == 0o600
    seg.chmod(0o664)
    with pytest.raises(SpoolCorrupt, match="mode 0664, writable by group or others"):
        Spool(d)
    seg.chmod(0o600)
    os.link(seg, tmp_path / "other-name")
    with pytest.raises(SpoolCorrupt, match="2 hard links"):
        Spool(d)
    (tmp_path / "other-name").unlink()
    if os.geteuid() == 0:  # only root can give a file away
        os.chown(seg, 54321, -1)
        with pytest.raises(SpoolCorrupt, match="owned by uid 54321"):
            Spool(d)
        os.chown(seg, 0, -1)
    with Spool(d) as sp:
        assert len(sp) == 1
