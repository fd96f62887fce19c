"""``ledger spool status|drain`` as a subprocess against a real server: never exit 0
when an item was dropped, corruption is one ``spool_corrupt`` line naming the segment
and the offset (no traceback), and ``--salvage`` delivers every readable record."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ledger.client import Spool, framing
from tests.api.server import ROOT
from tests.client.conftest import result_keys
from tests.client.server import LedgerServer
from tests.client.submissions import mixed


def _spool(directory: Path, tag: str, n: int) -> tuple[Path, list[framing.Record]]:
    with Spool(directory) as sp:
        sp.put_many([(json.dumps({**mixed(i, tag), "idempotency_key": f"{tag}-{i}"}).encode(),
                      f"{tag}-{i}") for i in range(n)])
    seg = next(directory.glob("*.seg"))
    return seg, framing.scan(seg.read_bytes()).records


def _ledger(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ledger", *args], capture_output=True,
                          text=True, timeout=120, cwd=ROOT, check=False)


def _drain(server: LedgerServer, directory: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return _ledger("spool", "drain", str(directory), "--url", server.url, "--token",
                   server.token(), "--format", "json", *extra)


def test_drain_after_a_torn_tail_delivers_the_rest_and_exits_1(server: LedgerServer,
                                                              tmp_path: Path) -> None:
    seg, records = _spool(tmp_path / "sp", "torn", 3)
    seg.write_bytes(seg.read_bytes()[:records[-1].offset + 7])
    got = _drain(server, tmp_path / "sp")
    assert got.returncode == 1, got.stderr  # was 0: only `spool status` told
    report = json.loads(got.stdout)
    assert (report["appended"], report["remaining"]) == (2, 0)
    assert report["dropped"][0]["offset"] == records[-1].offset
    assert f"dropped 7 bytes of {seg.name} at byte {records[-1].offset}" in got.stderr


def test_drain_of_a_corrupt_spool_exits_1_and_salvage_delivers_every_readable_record(
        server: LedgerServer, tmp_path: Path) -> None:
    seg, records = _spool(tmp_path / "sp", "mid", 10)
    data = bytearray(seg.read_bytes())
    data[records[2].offset + framing.HEAD.size + 4] ^= 0x10
    seg.write_bytes(bytes(data))
    for args in (("spool", "status", str(tmp_path / "sp")), None):
        got = _ledger(*args) if args else _drain(server, tmp_path / "sp")
        assert got.returncode == 1
        assert f"spool_corrupt: spool segment {seg.name} is corrupt at byte " \
               f"{records[2].offset}" in got.stderr and "Traceback" not in got.stderr
    assert "mid-3" not in result_keys(server.db_url)  # nothing was sent
    got = _drain(server, tmp_path / "sp", "--salvage")
    assert got.returncode == 1, got.stderr
    report = json.loads(got.stdout)
    assert (report["appended"], report["remaining"]) == (9, 0)
    stored = result_keys(server.db_url)
    assert [f"mid-{i}" in stored for i in range(10)] == [i != 2 for i in range(10)]
    kept = tmp_path / "sp" / report["dropped"][0]["kept_in"]
    assert kept.read_bytes() == bytes(data[records[2].offset:records[3].offset])
    assert _drain(server, tmp_path / "sp").returncode == 0  # repaired: a clean open


@pytest.mark.parametrize("body", [
    {"key": "x", "t": 1, "body": "{}"}, {"id": 50, "t": 1, "body": "{}"},
    {"id": "abc", "key": "x", "t": 1, "body": "{}"}, {"id": 50, "key": "x", "t": "x", "body": "{}"},
    {"id": 50, "key": "x", "t": 1, "body": {"a": 1}}, None,
], ids=["no-id", "no-key", "id-text", "t-text", "body-object", "done-no-id"])
def test_malformed_records_are_spool_corrupt_in_status_and_drain(
        tmp_path: Path, body: dict[str, object] | None) -> None:
    """The spool is judged before anything is sent: no server needed (port 9: discard)."""
    seg, records = _spool(tmp_path / "sp", "bad", 2)
    kind = framing.KIND_APPEND if body is not None else framing.KIND_DONE
    rec = framing.encode(kind, body if body is not None else {"outcome": "appended"})
    data = seg.read_bytes()
    seg.write_bytes(data[:records[1].offset] + rec + data[records[1].offset:])
    drain = _ledger("spool", "drain", str(tmp_path / "sp"), "--url", "http://127.0.0.1:9",
                    "--token", "t", "--timeout", "1")
    for got in (_ledger("spool", "status", str(tmp_path / "sp")), drain):
        assert got.returncode == 1
        assert "Traceback" not in got.stderr
        assert f"spool_corrupt: spool segment {seg.name} is corrupt at byte " \
               f"{records[1].offset}: record" in got.stderr
