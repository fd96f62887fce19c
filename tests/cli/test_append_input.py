"""``ledger append`` input: JSON Lines streamed with bounded memory, an over-long line
refused naming it, a JSON array read whole up to its limit; small inputs read exactly as
``documents`` reads them."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ledger.cli.input import Oversized, read_documents
from ledger.core.jsonseq import documents
from ledger.core.submission import MAX_SUBMISSION_BYTES
from ledger.errors import SubmissionTooLarge
from ledger.facade import Ledger

ROOT = Path(__file__).resolve().parents[2]


def sub(i: int) -> bytes:
    return json.dumps({"engine": "logic", "subject": f"s-{i}",
                       "result": {"status": "BLOCKED", "agent_message": f"m {i}"}}).encode()


def read(data: bytes, **kw) -> list:
    return list(read_documents(io.BufferedReader(io.BytesIO(data)), **kw))  # type: ignore[arg-type]


SMALL = [
    b"", b"\n\n", sub(1), sub(1) + b"\n" + sub(2) + b"\n", b"\n\n" + sub(1) + b"\r\n" + sub(2),
    b"[" + sub(1) + b", " + sub(2) + b"]", b"[\n " + sub(1) + b",\n " + sub(2) + b"\n]\n",
    b"[1]\n[2]\n", b"[" + sub(1) + b",]", b"[" + sub(1) + b"]\n\n\n",
    json.dumps(json.loads(sub(3)), indent=2).encode(), b'{"a": 1} {"b": 2}',
    b"not json\n{\"x\": \n", b'"text"\n1\n', b"[" + sub(1) + b"] trailing",
]


@pytest.mark.parametrize("data", SMALL)
def test_small_inputs_are_read_as_before(data):
    assert read(data) == list(documents(data))


def test_an_over_long_line_stands_for_itself_and_is_skipped():
    long_line = b'{"engine": "' + b"x" * (3 * MAX_SUBMISSION_BYTES) + b'"}'
    got = read(sub(1) + b"\n\n" + long_line + b"\n" + sub(2) + b"\n")
    assert got[0] == sub(1) and got[2] == sub(2)
    assert isinstance(got[1], Oversized) and got[1].line == 3
    assert got[1].prefix == long_line[:MAX_SUBMISSION_BYTES + 1]


def test_a_json_array_over_its_limit_is_refused_but_json_lines_are_not():
    array = b"[\n" + b",\n".join(sub(i) for i in range(50)) + b"\n]"
    assert len(read(array, max_whole=len(array))) == 50
    with pytest.raises(SubmissionTooLarge, match="JSON Lines"):
        read(array, max_whole=len(array) - 1)
    lines = b"\n".join(sub(i) for i in range(50))
    assert read(lines, max_whole=100) == [sub(i) for i in range(50)]


class _Measured(subprocess.Popen):
    """Popen that reaps its child with wait4, keeping the child's peak RSS."""

    def _try_wait(self, wait_flags):  # type: ignore[override]
        pid, sts, usage = os.wait4(self.pid, wait_flags)
        if pid:
            self.peak_kib = usage.ru_maxrss
        return pid, sts


def append_measured(db_url: str, path: Path) -> tuple[int, list[str], str, int]:
    proc = _Measured([sys.executable, "-m", "ledger", "--db", db_url, "append", str(path)],
                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT)
    out, err = proc.communicate(timeout=300)
    return proc.returncode, out.decode().splitlines(), err.decode(), proc.peak_kib


def test_a_large_json_lines_input_is_streamed_with_bounded_memory(sqlite_url, tmp_path):
    Ledger.init(sqlite_url).close()
    small = tmp_path / "small.jsonl"
    small.write_bytes(b"\n".join(sub(i) for i in range(20)) + b"\n")
    rc, lines, err, base_kib = append_measured(sqlite_url, small)
    assert rc == 0 and len(lines) == 20, err
    big = tmp_path / "big.jsonl"
    chunk = b'{"engine": "' + b"y" * (4 * 1024 * 1024) + b'"}\n'  # 4 MiB lines: too large
    with big.open("wb") as fh:
        for i in range(40):  # 160 MiB in all
            fh.write(sub(100 + i) + b"\n")
            fh.write(chunk)
    rc, lines, err, peak_kib = append_measured(sqlite_url, big)
    assert rc == 2 and "Traceback" not in err, err
    results = [json.loads(x) for x in lines]
    assert len(results) == 80
    assert [r["ok"] for r in results] == [True, False] * 40
    assert results[1]["error"]["code"] == "too_large"
    assert results[1]["error"]["message"].startswith("line 2 holds more than 1048576 bytes")
    assert results[79]["error"]["message"].startswith("line 80 ")
    # reading the file whole would add at least its 160 MiB
    assert peak_kib - base_kib < 48 * 1024, (base_kib, peak_kib)
