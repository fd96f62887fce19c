"""The durable spool: submissions the ledger could not take yet, kept on disk in order.

A spool is a directory of append-only segment files (``0000000001.seg``, ...; framing in
:mod:`ledger.client.framing`), a ``lock`` file and, for items the ledger refused while
draining, ``rejected.jsonl``.  Guarantees:

* **durable**: :meth:`Spool.put` returns only after the record is written and
  ``fsync``'d (and, for a new segment, the directory too);
* **in order**: :meth:`Spool.peek` gives pending items oldest first;
* **at most once in the ledger**: every item carries the idempotency key it was first
  sent with; replaying it can only replay the entry, never add a second one;
* **crash-safe**: on open, a torn last record of the newest segment (a crash mid-write)
  is detected by its length and checksum and cut off; every earlier record survives.  A
  bad record anywhere else is corruption and raises :class:`SpoolCorrupt` naming the
  segment and the offset, and nothing is changed; ``salvage=True`` then sets the bad
  bytes aside (``<segment>.damaged-<offset>``) and keeps every readable record, before
  and after them, saying so in :attr:`Spool.dropped`;
* **its own files only**: segments, ``lock`` and ``rejected.jsonl`` are opened with
  ``O_NOFOLLOW`` and must be regular files of this user, writable by nobody else, with
  no other hard link (the spool creates them 0600); anything else raises
  :class:`SpoolCorrupt` (a planted link would otherwise be truncated and written through);
* **one JSON object per item**: :meth:`Spool.put_many` refuses a body that is not one
  UTF-8 JSON object (``ClientUsage``) before writing anything;
* **bounded**: at most ``max_records`` pending items and ``max_bytes`` of them; one more
  raises :class:`SpoolFull`, which says how full it is and how to drain it;
* **one process at a time**: the directory is locked (``flock``) while open.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import stat
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Self

from ledger.client import framing
from ledger.client.errors import ClientUsage, SpoolCorrupt, SpoolError, SpoolFull, SpoolLocked
from ledger.client.protocol import body_problem

DEFAULT_MAX_RECORDS = 100_000
DEFAULT_MAX_BYTES = 256 * 1024 * 1024
DEFAULT_SEGMENT_BYTES = 16 * 1024 * 1024
REJECTED_FILE = "rejected.jsonl"


@dataclass(frozen=True)
class SpoolItem:
    """A pending submission: its spool id, idempotency key, time spooled and exact body."""

    id: int
    key: str
    spooled_at_us: int
    body: bytes


@dataclass
class SpoolStatus:
    """What a spool holds (``ledger spool status``)."""

    directory: str
    pending: int = 0
    pending_bytes: int = 0
    segments: int = 0
    max_records: int = DEFAULT_MAX_RECORDS
    max_bytes: int = DEFAULT_MAX_BYTES
    oldest_spooled_at_us: int | None = None
    rejected: int = 0
    dropped: list[dict[str, Any]] = field(default_factory=list)  # torn tails, salvaged bytes

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class _Pending:
    segment: int
    offset: int
    size: int
    key: str
    spooled_at_us: int


def _segment_name(n: int) -> str:
    return f"{n:010d}.seg"


def _segments(directory: Path) -> list[int]:
    return sorted(int(p.stem) for p in directory.glob("*.seg") if p.stem.isdigit())


def open_own(path: Path, flags: int, mode: int = 0o600) -> int:
    """``os.open`` for a spool file: never through a symbolic link, and only a regular
    file of this user that group and others cannot write, with one link.  Raises SpoolCorrupt
    naming the file and the rule (the descriptor is closed)."""
    try:
        fd = os.open(path, flags | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, mode)
    except OSError as exc:
        if exc.errno == errno.ELOOP or os.path.islink(path):
            raise SpoolCorrupt(f"spool file {path} is a symbolic link; the spool never "
                               "creates links and does not follow them") from None
        if exc.errno == errno.ENXIO:
            raise SpoolCorrupt(f"spool file {path} is not a regular file") from None
        raise SpoolError(f"cannot open spool file {path}: {exc.strerror}") from exc
    st = os.fstat(fd)
    problem = None
    if not stat.S_ISREG(st.st_mode):
        problem = "is not a regular file"
    elif st.st_uid != os.geteuid():
        problem = f"is owned by uid {st.st_uid}, not by this user (uid {os.geteuid()})"
    elif st.st_mode & 0o022:
        problem = (f"has mode {stat.S_IMODE(st.st_mode):04o}, writable by group or others; "
                   "the spool creates its files 0600")
    elif st.st_nlink != 1:
        problem = f"has {st.st_nlink} hard links; the spool's files have one"
    if problem is not None:
        os.close(fd)
        raise SpoolCorrupt(f"spool file {path} {problem}: not a file this spool created",
                           detail={"file": path.name})
    return fd


def _read_own(path: Path) -> bytes:
    fd = open_own(path, os.O_RDONLY)
    with os.fdopen(fd, "rb") as fh:
        return fh.read()


def _write_new(path: Path, data: bytes) -> None:
    """Write ``data`` to a fresh file ``path`` (0600, replacing nothing), durably."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())


def corrupt_error(name: str, result: framing.Scan) -> SpoolCorrupt:
    """The SpoolCorrupt for a segment with damage that is no torn tail."""
    first = result.damage[0]
    after = sum(1 for r in result.records if r.offset >= first.end)
    return SpoolCorrupt(
        f"spool segment {name} is corrupt at byte {first.offset}: {first.problem}"
        f" ({len(result.damage)} bad stretch(es), {after} readable record(s) after the "
        "first); nothing was changed: `ledger spool drain --salvage` sets the bad bytes "
        "aside and delivers every readable record",
        detail={"segment": name, "offset": first.offset,
                "damage": [{"offset": d.offset, "bytes": d.end - d.offset,
                            "reason": d.problem} for d in result.damage]})


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class Spool:
    """An open spool directory (created if absent).  Thread-safe.

    Raises SpoolLocked (another process has it open) or SpoolCorrupt (damage other
    than a torn tail, unless ``salvage``; a file the spool did not create).
    """

    def __init__(self, directory: str | os.PathLike[str], *,
                 max_records: int = DEFAULT_MAX_RECORDS, max_bytes: int = DEFAULT_MAX_BYTES,
                 segment_bytes: int = DEFAULT_SEGMENT_BYTES, fsync: bool = True,
                 salvage: bool = False) -> None:
        self.dir = Path(directory)
        self.max_records, self.max_bytes = max_records, max_bytes
        self.segment_bytes, self.fsync = segment_bytes, fsync
        self._mutex = threading.Lock()
        self._fd = self._lock_fd = -1
        self.dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        self._lock_fd = open_own(self.dir / "lock", os.O_RDWR | os.O_CREAT)
        try:
            fcntl.flock(self._lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(self._lock_fd)
            self._lock_fd = -1
            raise SpoolLocked(f"spool {self.dir} is open in another process") from None
        try:
            self._recover(salvage)
        except BaseException:
            self.close()
            raise

    # -- opening ------------------------------------------------------------
    def _recover(self, salvage: bool) -> None:
        self._pending: OrderedDict[int, _Pending] = OrderedDict()
        self._per_segment: dict[int, int] = {}
        self.pending_bytes, self.next_id = 0, 1
        self.dropped: list[dict[str, Any]] = []
        numbers = _segments(self.dir)
        scans = []
        for i, n in enumerate(numbers):  # everything is read and judged before any repair
            path = self.dir / _segment_name(n)
            data = _read_own(path)
            result = framing.scan(data)
            if result.damage and not (i == len(numbers) - 1 and result.torn_tail) \
                    and not salvage:
                raise corrupt_error(path.name, result)
            scans.append((n, path, data, result))
        for n, path, data, result in scans:
            if result.torn_tail and n == numbers[-1]:
                self._cut_tail(path, result)
            elif result.damage:
                result = self._salvage(path, data, result)
            self._per_segment[n] = 0
            for rec in result.records:
                self._apply(n, rec)
        self._open_segment(numbers[-1] if numbers else 1, fresh=False)

    def _cut_tail(self, path: Path, result: framing.Scan) -> None:
        fd = open_own(path, os.O_RDWR)
        try:
            os.ftruncate(fd, result.good_end)
            if result.good_end == 0:
                os.pwrite(fd, framing.SEGMENT_MAGIC, 0)
            os.fsync(fd)
        finally:
            os.close(fd)
        self.dropped.append({"segment": path.name, "offset": result.good_end,
                             "bytes": result.size - result.good_end,
                             "reason": result.problem})

    def _salvage(self, path: Path, data: bytes, result: framing.Scan) -> framing.Scan:
        """Set each bad stretch aside in ``<segment>.damaged-<offset>`` and rewrite the
        segment with every readable record (in order), atomically; the new scan."""
        for d in result.damage:
            kept = f"{path.name}.damaged-{d.offset}"
            (self.dir / kept).unlink(missing_ok=True)
            _write_new(self.dir / kept, data[d.offset:d.end])
            self.dropped.append({"segment": path.name, "offset": d.offset,
                                 "bytes": d.end - d.offset, "reason": d.problem,
                                 "kept_in": kept})
        good = framing.SEGMENT_MAGIC + b"".join(data[r.offset:r.offset + r.size]
                                                for r in result.records)
        tmp = self.dir / f".{path.name}.salvage"
        tmp.unlink(missing_ok=True)
        _write_new(tmp, good)
        os.replace(tmp, path)
        _fsync_dir(self.dir)
        return framing.scan(good)

    def _apply(self, segment: int, rec: framing.Record) -> None:
        rid = int(rec.body["id"])
        self.next_id = max(self.next_id, rid + 1)
        if rec.kind == framing.KIND_APPEND:
            self._pending[rid] = _Pending(segment, rec.offset, rec.size, rec.body["key"],
                                          int(rec.body["t"]))
            self._per_segment[segment] = self._per_segment.get(segment, 0) + 1
            self.pending_bytes += rec.size
        else:
            gone = self._pending.pop(rid, None)
            if gone is not None:
                self._per_segment[gone.segment] -= 1
                self.pending_bytes -= gone.size

    def _open_segment(self, n: int, *, fresh: bool) -> None:
        path = self.dir / _segment_name(n)
        fd = open_own(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)  # the old one stays if refused
        if self._fd >= 0:
            os.close(self._fd)
        self._fd = fd
        self.active = n
        self._per_segment.setdefault(n, 0)
        self._size = os.fstat(self._fd).st_size
        if self._size == 0:
            self._write(framing.SEGMENT_MAGIC)
            if self.next_id > 1:  # ids never repeat, even once older segments are gone
                self._write(framing.encode(framing.KIND_DONE, {"id": self.next_id - 1,
                                                                "outcome": "mark"}))
            if self.fsync:
                os.fsync(self._fd)
                _fsync_dir(self.dir)
        elif fresh:
            raise SpoolError(f"segment {path.name} already exists")

    # -- writing --------------------------------------------------------------
    def _write(self, data: bytes) -> int:
        """Append ``data`` to the active segment; returns its offset.  A failed write
        (disk full) is cut back off, so no half record stays in the middle."""
        offset = self._size
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(self._fd, view):]
        except OSError as exc:
            os.ftruncate(self._fd, offset)
            raise SpoolError(f"cannot write to spool {self.dir}: {exc}") from exc
        self._size = offset + len(data)
        return offset

    def _sync(self) -> None:
        if self.fsync:
            os.fsync(self._fd)

    def put(self, body: bytes, key: str) -> SpoolItem:
        """Store one submission body (with its idempotency key) durably."""
        return self.put_many([(body, key)])[0]

    def put_many(self, items: list[tuple[bytes, str]]) -> list[SpoolItem]:
        """Store several bodies, all or none, with one ``fsync``.  Raises SpoolFull."""
        for i, (body, key) in enumerate(items):
            problem = body_problem(body)
            if problem is not None:
                raise ClientUsage(f"spool item {i}: {problem}; nothing was spooled",
                                  field="body")
            if not isinstance(key, str) or not key:
                raise ClientUsage(f"spool item {i}: the idempotency key must be a non-empty "
                                  "string; nothing was spooled", field="key")
        with self._mutex:
            now = time.time_ns() // 1000
            records: list[tuple[int, str, bytes]] = []
            for body, key in items:
                rid = self.next_id + len(records)
                records.append((rid, key, framing.encode(framing.KIND_APPEND, {
                    "id": rid, "key": key, "t": now, "body": body.decode("utf-8")})))
            size = sum(len(r[2]) for r in records)
            if len(self._pending) + len(records) > self.max_records \
                    or self.pending_bytes + size > self.max_bytes:
                raise SpoolFull(
                    f"spool {self.dir} is full: {len(self._pending)} items, "
                    f"{self.pending_bytes} bytes pending (limits {self.max_records} items, "
                    f"{self.max_bytes} bytes); drain it (`ledger spool drain`) or raise "
                    "the limits", detail={"pending": len(self._pending),
                                          "pending_bytes": self.pending_bytes})
            if self._size >= self.segment_bytes:
                self._open_segment(self.active + 1, fresh=True)
            start = self._size
            self._write(b"".join(r[2] for r in records))
            self._sync()
            out, offset = [], start
            for (rid, key, data), (body, _) in zip(records, items, strict=True):
                self._pending[rid] = _Pending(self.active, offset, len(data), key, now)
                self._per_segment[self.active] += 1
                self.pending_bytes += len(data)
                offset += len(data)
                out.append(SpoolItem(rid, key, now, body))
            self.next_id += len(records)
            return out

    # -- reading and acknowledging -------------------------------------------
    def __len__(self) -> int:
        return len(self._pending)

    def peek(self, n: int) -> list[SpoolItem]:
        """The ``n`` oldest pending items, in the order they were spooled."""
        with self._mutex:
            out: list[SpoolItem] = []
            files: dict[int, Any] = {}
            try:
                for rid, p in self._pending.items():
                    if len(out) >= n:
                        break
                    if p.segment not in files:
                        files[p.segment] = os.fdopen(  # closed below
                            open_own(self.dir / _segment_name(p.segment), os.O_RDONLY), "rb")
                    fh = files[p.segment]
                    fh.seek(p.offset)
                    try:
                        body = framing.decode_one(fh.read(p.size))
                    except ValueError as exc:
                        raise SpoolCorrupt(f"spool item {rid} changed on disk: {exc}") from None
                    out.append(SpoolItem(rid, p.key, p.spooled_at_us,
                                         body["body"].encode("utf-8")))
            finally:
                for fh in files.values():
                    fh.close()
            return out

    def done(self, outcomes: list[tuple[SpoolItem, dict[str, Any]]]) -> None:
        """Mark items finished (appended, replayed, or rejected by the ledger), with one
        ``fsync``.  Rejected ones are also written to ``rejected.jsonl`` first."""
        with self._mutex:
            rejected = [(item, o) for item, o in outcomes if o.get("outcome") == "rejected"]
            if rejected:
                self._log_rejected(rejected)
            data = b"".join(framing.encode(framing.KIND_DONE, {"id": item.id, **o})
                            for item, o in outcomes)
            if self._size >= self.segment_bytes:
                self._open_segment(self.active + 1, fresh=True)
            self._write(data)
            self._sync()
            for item, _ in outcomes:
                gone = self._pending.pop(item.id, None)
                if gone is not None:
                    self._per_segment[gone.segment] -= 1
                    self.pending_bytes -= gone.size
            self._compact()

    def _log_rejected(self, rejected: list[tuple[SpoolItem, dict[str, Any]]]) -> None:
        lines = "".join(json.dumps({"id": item.id, "key": item.key, "error": o.get("error"),
                                    "body": item.body.decode("utf-8")}, ensure_ascii=False)
                        + "\n" for item, o in rejected)
        fd = open_own(self.dir / REJECTED_FILE, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(lines)
            fh.flush()
            if self.fsync:
                os.fsync(fh.fileno())

    def _compact(self) -> None:
        """Delete the oldest segments with nothing pending; start afresh when empty."""
        if not self._pending and self._size > len(framing.SEGMENT_MAGIC):
            self._open_segment(self.active + 1, fresh=True)
        removed = False
        for n in sorted(self._per_segment):
            if n == self.active or self._per_segment[n] > 0:
                break
            (self.dir / _segment_name(n)).unlink(missing_ok=True)
            del self._per_segment[n]
            removed = True
        if removed and self.fsync:
            _fsync_dir(self.dir)

    def status(self) -> SpoolStatus:
        """Counts and limits of this open spool."""
        with self._mutex:
            first = next(iter(self._pending.values()), None)
            return SpoolStatus(str(self.dir), len(self._pending), self.pending_bytes,
                               len(self._per_segment), self.max_records, self.max_bytes,
                               first.spooled_at_us if first else None,
                               _count_lines(self.dir / REJECTED_FILE), list(self.dropped))

    def close(self) -> None:
        """Close the files and release the directory lock."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
        if self._lock_fd >= 0:
            os.close(self._lock_fd)
            self._lock_fd = -1

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _count_lines(path: Path) -> int:
    if not os.path.lexists(path):
        return 0
    with os.fdopen(open_own(path, os.O_RDONLY), "rb") as fh:
        return sum(1 for _ in fh)


def inspect(directory: str | os.PathLike[str]) -> SpoolStatus:
    """A read-only look at a spool (no lock taken, nothing repaired): pending items
    and bytes, segments, and any torn tail that opening the spool would cut off."""
    d = Path(directory)
    if not d.is_dir():
        raise SpoolError(f"no spool at {d}")
    pending: dict[int, tuple[int, int]] = {}
    status = SpoolStatus(str(d))
    numbers = _segments(d)
    for i, n in enumerate(numbers):
        result = framing.scan(_read_own(d / _segment_name(n)))
        if result.damage:
            if i != len(numbers) - 1 or not result.torn_tail:
                raise corrupt_error(_segment_name(n), result)
            status.dropped.append({"segment": _segment_name(n), "offset": result.good_end,
                                   "reason": result.problem})
        for rec in result.records:
            if rec.kind == framing.KIND_APPEND:
                pending[int(rec.body["id"])] = (rec.size, int(rec.body["t"]))
            else:
                pending.pop(int(rec.body["id"]), None)
    status.segments, status.pending = len(numbers), len(pending)
    status.pending_bytes = sum(s for s, _ in pending.values())
    status.oldest_spooled_at_us = min((t for _, t in pending.values()), default=None)
    status.rejected = _count_lines(d / REJECTED_FILE)
    return status
