"""C2SP tlog-tiles: tile coordinates, their paths, and which tiles a tree size has.

Pure and stdlib-only (docs/tiles.md).  A tile of height 8 at level ``L``, index ``N``
and width ``W`` (1..256) lists the hashes of the stored Merkle nodes ``(8·L, N·256 + i)``
for ``i < W`` (``ledger.core.merkle`` node ids): at level 0 the leaf hashes, above it the
roots of the full tiles of the level below.  A full tile has 256 hashes (8,192 bytes) and
never changes; a partial one (``W < 256``) is the right edge of one tree size.  The entry
bundle of index ``N`` holds the entries of leaves ``[N·256, N·256 + W)``.

Paths (relative to the log's prefix)::

    tile/<L>/<N>[.p/<W>]          Merkle hashes
    tile/entries/<N>[.p/<W>]      entry bundles
    checkpoint

``<N>`` is written in zero-padded groups of three digits, every group but the last
prefixed by ``x`` (1234067 -> ``x001/x234/067``); ``<L>`` is 0..63 and ``<W>`` 1..255,
decimal without leading zeros.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

from ledger.errors import UsageError

TILE_HEIGHT = 8
TILE_WIDTH = 1 << TILE_HEIGHT  # hashes in a full tile
HASH_SIZE = 32
FULL_TILE_BYTES = TILE_WIDTH * HASH_SIZE
MAX_LEVEL = 63
ENTRIES = "entries"  # the level element of an entry bundle's path
CHECKPOINT = "checkpoint"

_DECIMAL = re.compile(r"0|[1-9][0-9]*")
_GROUP = re.compile(r"x[0-9]{3}")
_LAST = re.compile(r"[0-9]{3}")


@dataclass(frozen=True)
class Tile:
    """``level`` is ``None`` for an entry bundle; ``width`` 1..256 (256: a full tile)."""

    level: int | None
    index: int
    width: int = TILE_WIDTH

    @property
    def full(self) -> bool:
        return self.width == TILE_WIDTH

    @property
    def node_level(self) -> int:
        """The Merkle level of the node hashes this tile lists (0 for a bundle)."""
        return TILE_HEIGHT * (self.level or 0)

    @property
    def first_node(self) -> int:
        """Index of the tile's first node at :attr:`node_level`."""
        return self.index * TILE_WIDTH

    @property
    def path(self) -> str:
        return tile_path(self)


def encode_index(index: int) -> str:
    """``N`` as path elements: ``0`` -> ``000``, ``1234067`` -> ``x001/x234/067``."""
    if index < 0:
        raise ValueError(f"tile index {index} is negative")
    digits = str(index)
    digits = "0" * (-len(digits) % 3) + digits
    groups = [digits[i:i + 3] for i in range(0, len(digits), 3)]
    return "/".join(["x" + g for g in groups[:-1]] + [groups[-1]])


def tile_path(tile: Tile) -> str:
    """The tile's path relative to the log prefix (no leading slash)."""
    level = ENTRIES if tile.level is None else str(tile.level)
    suffix = "" if tile.full else f".p/{tile.width}"
    return f"tile/{level}/{encode_index(tile.index)}{suffix}"


def _bad(field: str, message: str) -> UsageError:
    return UsageError(message, code="bad_tile_path", field=field)


def parse_tile_path(path: str) -> Tile:
    """The tile named by ``path`` (``tile/...``, without the prefix).

    Raises UsageError (code ``bad_tile_path``) whose ``field`` names the path element
    that breaks its rule: ``tile``, ``L``, ``N`` or ``W``.
    """
    parts = path.split("/")
    if len(parts) < 3 or parts[0] != "tile":
        raise _bad("tile", "a tile path is tile/<L>/<N>[.p/<W>] or "
                           "tile/entries/<N>[.p/<W>]")
    level_text, rest = parts[1], parts[2:]
    if level_text == ENTRIES:
        level = None
    elif _DECIMAL.fullmatch(level_text) and int(level_text) <= MAX_LEVEL:
        level = int(level_text)
    else:
        raise _bad("L", f"L must be 'entries' or a decimal 0..{MAX_LEVEL} without leading "
                        f"zeros, got {level_text[:40]!r}")
    width = TILE_WIDTH
    if len(rest) >= 2 and rest[-2].endswith(".p"):
        width_text = rest[-1]
        if not (_DECIMAL.fullmatch(width_text) and 1 <= int(width_text) < TILE_WIDTH):
            raise _bad("W", f"W must be a decimal 1..{TILE_WIDTH - 1} without leading zeros,"
                            f" got {width_text[:40]!r}")
        width = int(width_text)
        rest = rest[:-2] + [rest[-2][:-2]]
    if len(rest) > 8 or not all(_GROUP.fullmatch(g) for g in rest[:-1]) \
            or not _LAST.fullmatch(rest[-1]):
        raise _bad("N", "N must be groups of three digits, every group but the last "
                        "prefixed by 'x' (1234067 is x001/x234/067)")
    index = int("".join(g.lstrip("x") for g in rest))
    if encode_index(index) != "/".join(rest):
        raise _bad("N", "N must not start with a group x000 (no leading zero groups)")
    return Tile(level, index, width)


def level_width(size: int, level: int) -> int:
    """Number of hashes at tile level ``level`` of a tree of ``size`` leaves (complete
    Merkle nodes at node level ``8·level``)."""
    return size >> (TILE_HEIGHT * level)


def tiles_for_size(size: int, level: int | None, since: int = 0) -> Iterator[Tile]:
    """The tiles of one level (``None``: entry bundles) of the tree of ``size`` leaves
    that the tree of ``since`` leaves did not have: the full tiles completed in between,
    then the right-edge partial tile of ``size`` (if any, and if it differs from the one
    of ``since``).  ``0 <= since <= size``."""
    if not 0 <= since <= size:
        raise ValueError(f"invalid tile sizes {since} -> {size}")
    count = level_width(size, level or 0)
    old = level_width(since, level or 0)
    for index in range(old // TILE_WIDTH, count // TILE_WIDTH):
        yield Tile(level, index, TILE_WIDTH)
    width = count % TILE_WIDTH
    if width and count != old:
        yield Tile(level, count // TILE_WIDTH, width)


def tree_levels(size: int) -> range:
    """The tile levels a tree of ``size`` leaves has tiles at (empty for size 0)."""
    top = 0
    while level_width(size, top + 1):
        top += 1
    return range(top + 1) if size else range(0)


def covered(tile: Tile, size: int) -> bool:
    """True when the tree of ``size`` leaves holds every hash (entry) of ``tile``."""
    return (tile.first_node + tile.width) <= level_width(size, tile.level or 0)


def split_tile(data: bytes) -> list[bytes]:
    """The hashes of a tile's bytes.  Raises ValueError unless the length is a positive
    multiple of 32 bytes, at most 8,192."""
    if not data or len(data) % HASH_SIZE or len(data) > FULL_TILE_BYTES:
        raise ValueError(f"a tile is 1..{TILE_WIDTH} hashes of {HASH_SIZE} bytes, "
                         f"got {len(data)} bytes")
    return [data[i:i + HASH_SIZE] for i in range(0, len(data), HASH_SIZE)]
