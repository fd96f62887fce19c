"""``ledger tiles write DIR`` on SQLite and PostgreSQL: the tiles are the RFC 6962 hashes
(recomputed here from the entries with the core, not read back from merkle_nodes), the
entry bundles are the export records whose hashes are the level-0 tile, a second write
touches only what grew, an erasure rewrites the bundles it concerns, and a directory that
is another log's or whose checkpoint the stored tree no longer has is refused (nothing
written)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from ledger import Ledger
from ledger.cli.main import cli
from ledger.clock import SystemClock
from ledger.core.entry import body_hash, entry_hash
from ledger.core.merkle import leaf_hash, node_hash
from ledger.core.tiles import Tile, split_tile
from ledger.crypto.keys import Keyring
from ledger.demo.samples import realistic
from ledger.errors import CheckpointError, NotFound

ORIGIN = "test.example/tiles"


def make(db_url: str, tmp: Path, sizes: tuple[int, ...]) -> tuple[Ledger, Keyring]:
    ring = Keyring.load(tmp / "keys")
    ring.generate(ORIGIN, SystemClock().now_us())
    L = Ledger.init(db_url, origin=ORIGIN)
    done = 0
    for size in sizes:
        L.append_many(realistic(size - done, start=done))
        L.checkpoint(ring)
        done = size
    return L, ring


def grow(L: Ledger, ring: Keyring, size: int) -> None:
    done = L.head()["size"]
    L.append_many(realistic(size - done, start=done))
    L.checkpoint(ring)


def mth(hashes: list[bytes]) -> bytes:
    """RFC 6962 MTH over leaf hashes, the naive recursion (a reference, not the core's)."""
    if len(hashes) == 1:
        return hashes[0]
    k = 1 << ((len(hashes) - 1).bit_length() - 1)
    return node_hash(mth(hashes[:k]), mth(hashes[k:]))


def leaves(L: Ledger, size: int) -> list[bytes]:
    return [leaf_hash(bytes(r.entry_hash)) for r in L.iter_entries(0, size)]


def files(root: Path) -> dict[str, tuple[int, bytes]]:
    return {p.relative_to(root).as_posix(): (p.stat().st_mtime_ns, p.read_bytes())
            for p in root.rglob("*") if p.is_file()}


def test_tiles_are_the_rfc6962_hashes_and_bundles_the_export_records(db_url, tmp_path):
    L, ring = make(db_url, tmp_path, (600,))
    out = tmp_path / "tiles"
    report = L.write_tiles(out)
    got = files(out)
    assert sorted(got) == ["checkpoint", "tile/0/000", "tile/0/001", "tile/0/002.p/88",
                           "tile/1/000.p/2", "tile/entries/000", "tile/entries/001",
                           "tile/entries/002.p/88"]
    assert (report.previous_size, report.size) == (0, 600)
    want = leaves(L, 600)
    assert split_tile(got["tile/0/000"][1]) + split_tile(got["tile/0/001"][1]) + \
        split_tile(got["tile/0/002.p/88"][1]) == want
    # level 1 lists the roots of the full level-0 tiles
    assert split_tile(got["tile/1/000.p/2"][1]) == [mth(want[:256]), mth(want[256:512])]
    lines = b"".join(got[f"tile/entries/{n}"][1] for n in ("000", "001", "002.p/88"))
    records = [json.loads(line) for line in lines.splitlines()]
    assert [r["seq"] for r in records] == list(range(600))
    assert lines == b"".join(_export_lines(L))
    for r, leaf in zip(records, want, strict=True):  # each record hashes to its leaf
        link = entry_hash(bytes.fromhex(r["prev_hash"][7:]), r["seq"], r["recorded_at_us"],
                          body_hash(r["envelope"].encode("utf-8")))
        assert leaf_hash(link) == leaf
    assert got["checkpoint"][1].decode() == L.latest_checkpoint().note
    L.close()


def _export_lines(L: Ledger) -> list[bytes]:
    from ledger.ops.query import make_filters
    return list(L.export_records(make_filters()))


def test_a_second_write_touches_only_the_tiles_that_grew(db_url, tmp_path):
    L, ring = make(db_url, tmp_path, (300,))
    out = tmp_path / "tiles"
    L.write_tiles(out)
    before = files(out)
    grow(L, ring, 600)
    report = L.write_tiles(out)
    after = files(out)
    assert report.tiles == ["tile/0/001", "tile/0/002.p/88", "tile/1/000.p/2"]
    assert report.bundles == ["tile/entries/001", "tile/entries/002.p/88"]
    for path in before:  # the full tile of 300 and every old partial tile are untouched
        if path != "checkpoint":
            assert after[path] == before[path], path
    assert set(after) - set(before) == set(report.tiles) | set(report.bundles)
    again = L.write_tiles(out)  # nothing new: only the checkpoint is rewritten
    assert (again.tiles, again.bundles, again.rewritten) == ([], [], [])
    L.close()


def test_an_erasure_rewrites_the_bundles_that_held_the_payload(db_url, tmp_path):
    from ledger.ops.custody import Ask

    L, ring = make(db_url, tmp_path, (300,))
    out = tmp_path / "tiles"
    L.write_tiles(out)
    records = [json.loads(x) for x in (out / "tile/entries/000").read_bytes().splitlines()]
    seq = next(r["seq"] for r in records
               if (r["payloads"].get("query") or {}).get("data_b64") is not None)
    L.redact(Ask(reason="test"), seqs=[seq], payloads=["query"], keyring=ring)
    L.checkpoint(ring)
    report = L.write_tiles(out)
    assert "tile/entries/000" in report.rewritten
    line = json.loads((out / "tile/entries/000").read_bytes().splitlines()[seq])
    assert line["payloads"]["query"]["data_b64"] is None
    assert line["payloads"]["query"]["redacted_by"] == 300
    L.close()


def test_a_directory_of_another_log_is_refused_with_exit_2(db_url, tmp_path):
    L, ring = make(db_url, tmp_path, (10,))
    out = tmp_path / "tiles"
    L.write_tiles(out)
    L.close()
    other = tmp_path / "other"
    other_ring = Keyring.load(other / "keys")
    other_ring.generate("test.example/other", SystemClock().now_us())
    other_url = f"sqlite:///{other / 'l.db'}"
    with Ledger.init(other_url, origin="test.example/other") as other_ledger:
        other_ledger.append_many(realistic(5))
        other_ledger.checkpoint(other_ring)
    before = files(out)
    res = CliRunner().invoke(cli, ["--db", other_url, "tiles", "write", str(out)])
    assert res.exit_code == 2 and "not of 'test.example/other'" in res.stderr
    assert files(out) == before


def test_a_checkpoint_the_stored_tree_does_not_have_is_refused(db_url, tmp_path):
    L, ring = make(db_url, tmp_path, (20,))
    out = tmp_path / "tiles"
    L.write_tiles(out)
    note = (out / "checkpoint").read_text()
    lines = note.split("\n")
    lines[2] = "A" * 43 + "="  # another root for the same size
    (out / "checkpoint").write_text("\n".join(lines))
    grow(L, ring, 30)
    with pytest.raises(CheckpointError) as caught:
        L.write_tiles(out)
    assert caught.value.code == "checkpoint_inconsistent"
    assert not (out / "tile/0/000.p/30").exists()
    L.close()


def test_cli_writes_and_reports(db_url, tmp_path):
    L, ring = make(db_url, tmp_path, (5,))
    L.close()
    out = tmp_path / "tiles"
    res = CliRunner().invoke(cli, ["--db", db_url, "tiles", "write", str(out)])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout) == {"previous_size": 0, "size": 5, "tiles": 1,
                                      "bundles": 1, "rewritten": [], "bytes": json.loads(
                                          res.stdout)["bytes"]}
    assert (out / "tile/0/000.p/5").stat().st_size == 5 * 32


def test_nothing_before_the_first_checkpoint(db_url, tmp_path):
    with Ledger.init(db_url, origin=ORIGIN) as L:
        L.append_many(realistic(3))
        res = CliRunner().invoke(cli, ["--db", db_url, "tiles", "write",
                                       str(tmp_path / "t")])
        assert res.exit_code == 2 and "no checkpoint" in res.stderr
        with pytest.raises(NotFound):
            L.tile(Tile(0, 0, 3))
