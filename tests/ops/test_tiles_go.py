"""A third-party client verifies our tiles: Go's golang.org/x/mod/sumdb/tlog
(``TileHashReader`` over a tile reader, ``ProveRecord``/``CheckRecord``,
``ProveTree``/``CheckTree``, the checkpoint opened with ``sumdb/note``) reads the files of
``ledger tiles write`` and the routes of ``ledger serve``, on SQLite and PostgreSQL; one
altered tile on disk makes it refuse.  The routes' cache headers, roles and bad paths are
checked against the same real server.

Runs when ``go`` and the x/mod sources (Debian: golang-go golang-golang-x-mod-dev, which
``scripts/ensure-tools`` installs) are present; skipped with the reason otherwise.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import httpx
import pytest

from ledger.crypto.cosign import log_vkey
from tests.api.server import start_server, stop_process
from tests.crypto.test_go_note import GOPATH
from tests.ops.test_tiles import ORIGIN, grow, make

SOURCE = Path(__file__).parent / "go" / "tilecheck.go"


def _go_missing() -> str | None:
    if shutil.which("go") is None:
        return "Go is not installed (scripts/ensure-tools installs golang-go)"
    if not (GOPATH / "src/golang.org/x/mod/sumdb/tlog").is_dir():
        return f"golang.org/x/mod is not under {GOPATH} (golang-golang-x-mod-dev)"
    return None


pytestmark = pytest.mark.skipif(_go_missing() is not None, reason=_go_missing() or "")


@pytest.fixture(scope="module")
def checker(tmp_path_factory):
    out = tmp_path_factory.mktemp("go") / "tilecheck"
    env = {**os.environ, "GOPATH": str(GOPATH), "GO111MODULE": "off", "GOFLAGS": "",
           "GOCACHE": str(out.parent / "cache")}
    subprocess.run(["go", "build", "-o", str(out), str(SOURCE)], check=True, env=env,
                   capture_output=True, timeout=300)
    return out


def _vkey(ring) -> str:
    name, key = ring.signers(ORIGIN)[0]
    return log_vkey(name, key)


def _check(checker, base, vkey, index, entry_hex, old_size, old_root_hex, token=None):
    env = {**os.environ, "TILES_TOKEN": token or ""}
    return subprocess.run([str(checker), str(base), vkey, str(index), entry_hex,
                           str(old_size), old_root_hex], capture_output=True, text=True,
                          timeout=60, env=env, check=False)


@pytest.fixture
def published(db_url, tmp_path):
    """A ledger checkpointed at 300 then 600, its tiles written at each size."""
    L, ring = make(db_url, tmp_path, (300,))
    out = tmp_path / "tiles"
    L.write_tiles(out)
    old_root = L.latest_checkpoint().root_hash.hex()
    grow(L, ring, 600)
    L.write_tiles(out)
    entry = next(iter(L.iter_entries(300, 301))).entry_hash.hex()
    yield L, ring, out, (300, entry, 300, old_root)
    L.close()


def test_go_verifies_inclusion_and_consistency_from_the_files(checker, published):
    L, ring, out, args = published
    res = _check(checker, out, _vkey(ring), *args)
    assert res.returncode == 0, res.stderr
    assert res.stdout.split("\n")[:2] == ["record ok", "tree ok"]
    wrong = _check(checker, out, _vkey(ring), args[0] + 1, *args[1:])  # another leaf
    assert wrong.returncode == 1 and "check record" in wrong.stderr


def test_go_refuses_a_tile_altered_on_disk(checker, published):
    L, ring, out, args = published
    tile = out / "tile/0/001"  # holds leaf 300
    data = bytearray(tile.read_bytes())
    data[32 * 50] ^= 1  # another leaf's hash in the same tile
    tile.write_bytes(bytes(data))
    res = _check(checker, out, _vkey(ring), *args)
    assert res.returncode == 1 and "record ok" not in res.stdout
    assert "invalid transparency proof" in res.stderr or "inconsistent" in res.stderr, \
        res.stderr


def test_go_verifies_from_ledger_serve_and_the_routes_keep_the_rules(checker, published,
                                                                      db_url, tmp_path):
    from tests.api.server import Server

    L, ring, out, args = published
    proc, url = start_server(db_url, tmp_path / "keys", tmp_path / "serve.log")
    try:
        srv = Server("x", db_url, tmp_path / "keys", ORIGIN, proc, url, tmp_path / "serve.log")
        agent, auditor = srv.token("agent", "t-agent"), srv.token("auditor", "t-auditor")
        res = _check(checker, url, _vkey(ring), *args, token=agent)
        assert res.returncode == 0, res.stderr
        with httpx.Client(base_url=url, timeout=30,
                          headers={"Authorization": f"Bearer {agent}"}) as c:
            full = c.get("/tile/0/001")
            assert full.status_code == 200 and full.content == (out / "tile/0/001").read_bytes()
            assert full.headers["cache-control"] == "public, max-age=31536000, immutable"
            assert full.headers["content-type"] == "application/octet-stream"
            part = c.get("/tile/0/002.p/88")
            assert part.content == (out / "tile/0/002.p/88").read_bytes()
            assert part.headers["cache-control"] == "no-cache"
            assert c.get("/tile/0/001.p/44").content == full.content[:44 * 32]
            cp = c.get("/checkpoint")
            assert cp.text == (out / "checkpoint").read_text()
            assert cp.headers["cache-control"] == "no-cache"
            assert cp.headers["content-type"] == "text/plain; charset=utf-8"
            for path, field in (("/tile/01/000", "L"), ("/tile/0/1234", "N"),
                                ("/tile/0/x000/001", "N"), ("/tile/0/000.p/256", "W"),
                                ("/tile/0/000.p/0", "W"), ("/tile/x/000", "L")):
                bad = c.get(path)
                assert bad.status_code == 400, (path, bad.text)
                assert (bad.json()["code"], bad.json()["field"]) == ("bad_tile_path", field)
            beyond = c.get("/tile/0/002")  # the tree has 600 leaves: not full yet
            assert beyond.status_code == 404 and beyond.json()["code"] == "tile_not_found"
            assert c.get("/tile/0/002.p/89").status_code == 404
            assert c.get("/tile/entries/000").status_code == 403  # payloads: auditors only
        bundle = httpx.get(url + "/tile/entries/002.p/88", timeout=30,
                           headers={"Authorization": f"Bearer {auditor}"})
        assert bundle.content == (out / "tile/entries/002.p/88").read_bytes()
        assert bundle.headers["cache-control"] == "no-cache"
        assert httpx.get(url + "/tile/0/000", timeout=30).status_code == 401
    finally:
        stop_process(proc)
