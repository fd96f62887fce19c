"""The verifying reader client reads C2SP tlog-tiles (docs/reader.md#reading-from-tiles):
from the files of ``ledger tiles write`` (a directory, and the same directory served by a
real static web server), and from the routes of a real ``ledger serve``, on SQLite and
PostgreSQL.  It proves entries from their bundle records, advances its trusted state with
a consistency proof computed from tiles when the tree grows, and refuses a tile altered on
disk, a tile of the wrong size, a missing tile, an altered bundle record and tiles of a
rewritten history signed with the ledger key."""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from ledger.cli.main import cli
from ledger.client import (
    AccessDenied,
    AsyncLedgerReader,
    EntryUnverified,
    Forked,
    LedgerReader,
    TileRejected,
)
from ledger.core.tiles import split_tile
from tests.api.server import start_server, stop_process
from tests.ops.test_tiles import ORIGIN, grow, make


def _jwks(tmp: Path) -> dict:
    return json.loads((tmp / "keys" / "jwks.json").read_text())


@pytest.fixture
def published(db_url, tmp_path):
    """A ledger checkpointed at 300 (its tiles written), then grown to 600 (written again)."""
    L, ring = make(db_url, tmp_path, (300,))
    out = tmp_path / "tiles"
    L.write_tiles(out)
    yield L, ring, out
    L.close()


def _static_server(root: Path):
    proc = subprocess.Popen([sys.executable, "-u", "-m", "http.server", "--bind", "127.0.0.1",
                             "--directory", str(root), "0"], stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL)
    assert proc.stdout is not None
    line = proc.stdout.readline().decode()
    port = re.search(r"port (\d+)", line)
    assert port, line
    return proc, f"http://127.0.0.1:{port.group(1)}"


def test_reads_and_advances_from_tiles_served_statically(published, tmp_path):
    L, ring, out = published
    proc, url = _static_server(out)
    try:
        with LedgerReader(url, None, tmp_path / "state.json", keys=_jwks(tmp_path),
                          tiles=True) as reader:
            got = reader.get(17)
            row = next(iter(L.iter_entries(17, 18)))
            assert (got.layer, got.tree_size, got.values_checked) == ("tiles", 300, True)
            assert got.entry_hash == "sha256:" + bytes(row.entry_hash).hex()
            assert got.entry["seq"] == 17 and got.entry["envelope"] == bytes(row.envelope).decode()
            assert got.root_hash == L.latest_checkpoint().root_hash
            grow(L, ring, 600)
            L.write_tiles(out)
            got = reader.get(599)  # beyond the trusted size: consistency 300 -> 600 from tiles
            assert got.tree_size == 600 and reader.state.tree_size == 600
            assert reader.get(0).tree_size == 600
        state = json.loads((tmp_path / "state.json").read_text())
        assert state["tree_size"] == 600 and state["ledger_id"] == L.meta.ledger_id
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        assert proc.stdout is not None
        proc.stdout.close()


def test_reads_a_tile_directory_and_the_cli_reads_it_too(published, tmp_path):
    L, ring, out = published
    grow(L, ring, 70_000 if "sqlite" in str(L.engine.url) else 600)  # sqlite: level-2 tiles
    L.write_tiles(out)
    size = L.latest_checkpoint().size
    with LedgerReader(str(out), None, tmp_path / "s.json", keys=_jwks(tmp_path),
                      tiles=True) as reader:
        for seq in (0, 255, 256, size // 2, size - 1):
            assert reader.get(seq).tree_size == size
    res = CliRunner().invoke(cli, ["get", "5", "--url", str(out), "--tiles", "--state",
                                   str(tmp_path / "cli.json"), "--key",
                                   str(tmp_path / "keys" / "jwks.json")])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["layer"] == "tiles" and doc["verified"]["tree_size"] == size

    async def read() -> int:
        async with AsyncLedgerReader(f"file://{out}", None, tmp_path / "a.json",
                                     keys=_jwks(tmp_path), tiles=True) as r:
            return (await r.get(size - 2)).tree_size

    assert asyncio.run(read()) == size


def _flip(path: Path, offset: int) -> None:
    data = bytearray(path.read_bytes())
    data[offset] ^= 1
    path.write_bytes(bytes(data))


def test_an_altered_tile_on_disk_is_refused(published, tmp_path):
    L, ring, out = published
    grow(L, ring, 600)
    L.write_tiles(out)
    state = tmp_path / "state.json"
    with LedgerReader(str(out), None, state, keys=_jwks(tmp_path), tiles=True) as reader:
        reader.refresh()
        _flip(out / "tile/0/001", 32 * 50)  # a hash no proof of leaf 300 uses
        with pytest.raises(TileRejected) as exc:
            reader.get(300)
        assert exc.value.code == "tile_hash_mismatch" and exc.value.detail["tile"] == "tile/0/001"
        assert reader.get(5).tree_size == 600  # the other full tile still checks
        _flip(out / "tile/0/002.p/88", 0)  # the right edge: must reproduce the root
        with pytest.raises(TileRejected) as exc:
            reader.get(5)
        assert exc.value.code == "tile_hash_mismatch"
        assert "tile/0/002.p/88" in exc.value.detail["tiles"]
    res = CliRunner().invoke(cli, ["get", "300", "--url", str(out), "--tiles", "--state",
                                   str(state)])
    assert res.exit_code == 1 and "tile_hash_mismatch" in res.output


def test_a_tile_of_the_wrong_size_or_missing_is_refused(published, tmp_path):
    L, ring, out = published
    with LedgerReader(str(out), None, tmp_path / "s.json", keys=_jwks(tmp_path),
                      tiles=True) as reader:
        reader.refresh()
        tile = out / "tile/0/001.p/44"
        tile.write_bytes(tile.read_bytes()[:-32])  # one hash short
        with pytest.raises(TileRejected) as exc:
            reader.get(3)
        assert exc.value.code == "tile_size_mismatch" and exc.value.field == "tile"
        tile.unlink()
        with pytest.raises(TileRejected) as exc:
            reader.get(3)
        assert exc.value.code == "tile_missing"


def test_an_altered_bundle_record_is_refused(published, tmp_path):
    L, ring, out = published
    bundle = out / "tile/entries/000"
    lines = bundle.read_bytes().split(b"\n")
    rec = json.loads(lines[7])
    rec["recorded_at_us"] += 1  # the entry hash no longer follows
    lines[7] = json.dumps(rec, sort_keys=True, separators=(",", ":")).encode()
    bundle.write_bytes(b"\n".join(lines))
    with LedgerReader(str(out), None, tmp_path / "s.json", keys=_jwks(tmp_path),
                      tiles=True) as reader:
        with pytest.raises(EntryUnverified) as exc:
            reader.get(7)
        assert exc.value.code == "entry_hash_mismatch"
        assert reader.get(8).seq == 8
        rec = json.loads(lines[9])
        name = next(n for n, p in rec["payloads"].items() if p["data_b64"])
        rec["payloads"][name]["data_b64"] = "AAAA"
        lines[9] = json.dumps(rec, sort_keys=True, separators=(",", ":")).encode()
        bundle.write_bytes(b"\n".join(lines))
        with pytest.raises(EntryUnverified) as exc:
            reader.get(9)
        assert exc.value.code == "payload_digest_mismatch"
        lines[10] = lines[11]  # the record of another seq
        bundle.write_bytes(b"\n".join(lines))
        with pytest.raises(TileRejected) as exc:
            reader.get(10)
        assert exc.value.code == "bundle_malformed"


def test_tiles_of_a_rewritten_history_are_refused(published, tmp_path, db_url):
    L, ring, out = published
    with LedgerReader(str(out), None, tmp_path / "s.json", keys=_jwks(tmp_path),
                      tiles=True) as reader:
        reader.refresh()
        assert reader.state.tree_size == 300
        # the same key signs a second history of the same origin, 600 entries long
        other = tmp_path / "other"
        other.mkdir()
        from ledger import Ledger
        from ledger.demo.samples import realistic

        url = f"sqlite:///{other / 'l.db'}"
        with Ledger.init(url, origin=ORIGIN) as B:
            B.append_many(realistic(600, seed=99))
            B.checkpoint(ring)
            B.write_tiles(other / "tiles")
        fork = LedgerReader(str(other / "tiles"), None, tmp_path / "s.json", tiles=True)
        with fork, pytest.raises(Forked) as exc:
            fork.refresh()
        assert exc.value.code == "consistency_invalid"
        assert json.loads((tmp_path / "s.json").read_text())["tree_size"] == 300


def test_reads_tiles_from_ledger_serve(published, tmp_path, db_url):
    from tests.api.server import Server

    L, ring, out = published
    grow(L, ring, 600)
    proc, url = start_server(db_url, tmp_path / "keys", tmp_path / "serve.log")
    try:
        srv = Server("x", db_url, tmp_path / "keys", ORIGIN, proc, url, tmp_path / "serve.log")
        auditor = srv.token("auditor", "t-auditor")
        with LedgerReader(url, auditor, tmp_path / "s.json", keys=_jwks(tmp_path),
                          tiles=True) as reader:
            got = reader.get(300)
            assert got.tree_size == 600 and got.entry["seq"] == 300
            served = (out.parent / "tiles-again")
            L.write_tiles(served)
            lines = (served / "tile/entries/001").read_bytes().split(b"\n")
            assert json.loads(lines[300 - 256]) == got.entry  # the same record
        agent = srv.token("agent", "t-agent")  # bundles carry payloads: auditors only
        with LedgerReader(url, agent, tmp_path / "a.json", keys=_jwks(tmp_path),
                          tiles=True) as reader, pytest.raises(AccessDenied) as denied:
            reader.get(3)
        assert denied.value.code == "forbidden_bundle"
        with LedgerReader(url, None, tmp_path / "n.json", keys=_jwks(tmp_path),
                          tiles=True) as reader, pytest.raises(AccessDenied):
            reader.refresh()
    finally:
        stop_process(proc)


def test_split_tile_and_the_proofs_agree_with_the_database(published, tmp_path):
    """The inclusion path the client computes from tiles is the server's proof."""
    from ledger.client.reader_tiles import TreeTiles, inclusion_path_from_tiles
    from ledger.ops.checkpoint import inclusion_proof

    L, ring, out = published
    cp = L.latest_checkpoint()
    tree = TreeTiles(cp.size, cp.root_hash)
    flow = inclusion_path_from_tiles(tree, 123)
    reply = None
    while True:
        try:
            step = flow.send(reply)
        except StopIteration as stop:
            path = stop.value
            break
        reply = (200, (out / step.path).read_bytes())
    assert path == inclusion_proof(L.ctx, 123, cp.size)
    assert split_tile((out / "tile/0/000").read_bytes())[123] == \
        tree.verified[(0, 0)][123]


def test_a_missing_tile_directory_is_a_usage_error(tmp_path):
    res = CliRunner().invoke(cli, ["get", "0", "--url", str(tmp_path / "nope"), "--tiles",
                                   "--state", str(tmp_path / "s.json"), "--trust-on-first-use"])
    assert res.exit_code == 2 and "tiles_not_found" in res.output
