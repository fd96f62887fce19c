"""C2SP tlog-tiles coordinates: the N path encoding, partial widths, which tiles a tree
size has (the spec's own example), and a bad path refused with the element named."""

from __future__ import annotations

import pytest

from ledger.core.tiles import Tile, encode_index, parse_tile_path, tiles_for_size, tree_levels
from ledger.errors import UsageError


@pytest.mark.parametrize(("index", "text"), [
    (0, "000"), (5, "005"), (999, "999"), (1000, "x001/000"), (1234067, "x001/x234/067"),
    (10**9, "x001/x000/x000/000")])
def test_index_encoding_is_x_prefixed_groups_of_three(index, text):
    assert encode_index(index) == text
    assert parse_tile_path(f"tile/0/{text}") == Tile(0, index)


def test_paths_round_trip():
    for t in (Tile(0, 0), Tile(3, 1234067, 17), Tile(None, 2, 188), Tile(None, 1000)):
        assert parse_tile_path(t.path) == t
    assert Tile(1, 1234067, 17).path == "tile/1/x001/x234/067.p/17"
    assert Tile(None, 2, 188).path == "tile/entries/002.p/188"


@pytest.mark.parametrize(("path", "field"), [
    ("tiles/0/000", "tile"), ("tile/000", "tile"), ("tile/01/000", "L"), ("tile/64/000", "L"),
    ("tile/-1/000", "L"), ("tile/data/000", "L"), ("tile/0/1234", "N"), ("tile/0/12", "N"),
    ("tile/0/001/002", "N"), ("tile/0/x000/001", "N"), ("tile/0/y001/000", "N"),
    ("tile/0/00a", "N"), ("tile/0/000.p/0", "W"), ("tile/0/000.p/256", "W"),
    ("tile/0/000.p/07", "W"), ("tile/0/000.p/x", "W"), ("tile/entries/000.p/", "W"),
    ("tile/0/" + "x001/" * 9 + "000", "N")])
def test_a_bad_path_names_the_element_and_its_rule(path, field):
    with pytest.raises(UsageError) as caught:
        parse_tile_path(path)
    assert (caught.value.code, caught.value.field) == ("bad_tile_path", field)


def test_the_specs_example_tree_of_70000():
    # 273 full level-0 tiles, a partial of 112, one full level-1 tile, a partial of 17,
    # and a level-2 partial of width 1
    assert list(tree_levels(70_000)) == [0, 1, 2]
    level0 = list(tiles_for_size(70_000, 0))
    assert len(level0) == 274 and level0[-1] == Tile(0, 273, 112)
    assert list(tiles_for_size(70_000, 1)) == [Tile(1, 0), Tile(1, 1, 17)]
    assert list(tiles_for_size(70_000, 2)) == [Tile(2, 0, 1)]
    assert list(tiles_for_size(256, 1)) == [Tile(1, 0, 1)] and list(tree_levels(0)) == []


def test_growth_yields_only_new_full_tiles_and_the_new_partial():
    assert list(tiles_for_size(700, 0, since=600)) == [Tile(0, 2, 188)]
    assert list(tiles_for_size(770, 0, since=600)) == [Tile(0, 2), Tile(0, 3, 2)]
    assert list(tiles_for_size(770, 1, since=600)) == [Tile(1, 0, 3)]
    assert list(tiles_for_size(700, 1, since=600)) == []  # level 1 did not grow
    assert list(tiles_for_size(512, 0, since=512)) == []


def test_the_worked_examples_of_docs_tiles_md():
    import hashlib
    from pathlib import Path

    from ledger.core.merkle import leaf_hash

    doc = (Path(__file__).resolve().parents[2] / "docs" / "tiles.md").read_text("utf-8")
    t = Tile(1, 1234067, 17)
    assert f"is `{t.path}`" in doc
    first = t.first_node
    assert f"`1234067·256 = {first}` to `{first + 16}`" in doc
    assert f"`[{first * 256}, {(first + 17) * 256})`" in doc
    assert f"`{Tile(None, first).path}`" in doc
    tile = b"".join(leaf_hash(hashlib.sha256(b"leaf-%d" % i).digest()) for i in range(13))
    assert len(tile) == 416 and Tile(0, 0, 13).path == "tile/0/000.p/13"
    for offset in (0, 32, 384):
        assert f"offset {offset:>3}: {tile[offset:offset + 32].hex()}" in doc
    assert f"416 bytes: {hashlib.sha256(tile).hexdigest()}" in doc
