"""Bytes per entry by table and index, on both engines, against the submission's bytes.

A fresh ledger gets ``n`` realistic submissions (``bench.common.submissions``, appended
in batches as ``ledger append`` does); then every table and index is measured:

* SQLite: ``dbstat`` (the pages each b-tree uses, after a WAL checkpoint);
* PostgreSQL: ``pg_relation_size`` of each table (main fork, plus its TOAST table and
  TOAST index) and of each index, after ``VACUUM ANALYZE``.

The ratio is the database's bytes over the submissions' bytes (target <= 2.0).
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from sqlalchemy import create_engine

from bench.common import available, pg_url, print_table, sqlite_url, submissions
from ledger import Ledger
from ledger.ops.append import validate_items
from ledger.store import codec
from ledger.store.db import normalize_url

FIXTURES = Path(__file__).resolve().parent.parent / "tests" / "data" / "qwed_fixtures.jsonl"


def fill(url: str, n: int, batch: int = 1000) -> int:
    """Append ``n`` realistic submissions; return their total bytes."""
    total = 0
    with Ledger.init(url) as L:
        for i in range(0, n, batch):
            subs = submissions(min(batch, n - i), seed=i, start=i)
            total += sum(len(s) for s in subs)
            res = L.append_many(subs)
            assert all(r.ok for r in res)
    return total


def sqlite_sizes(url: str) -> dict[str, int]:
    eng = create_engine(normalize_url(url))
    with eng.connect() as conn:
        conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
        rows = conn.exec_driver_sql(
            "SELECT name, SUM(pgsize) FROM dbstat GROUP BY name").all()
    eng.dispose()
    return {name: int(size) for name, size in rows}


def pg_sizes(url: str) -> dict[str, int]:
    eng = create_engine(normalize_url(url), isolation_level="AUTOCOMMIT")
    with eng.connect() as conn:
        conn.exec_driver_sql("VACUUM ANALYZE")
        rels = conn.exec_driver_sql(
            "SELECT c.relname, c.relkind, pg_relation_size(c.oid), "
            "COALESCE(pg_total_relation_size(c.reltoastrelid), 0) "
            "FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = current_schema() AND c.relkind IN ('r', 'i')").all()
    eng.dispose()
    out: dict[str, int] = {}
    for name, _kind, size, toast in rels:
        out[name] = int(size) + int(toast)  # a table's TOAST (and its index) counts as it
    return out


def measure(kind: str, url: str, n: int) -> tuple[int, dict[str, int]]:
    sub_bytes = fill(url, n)
    return sub_bytes, (sqlite_sizes(url) if kind == "sqlite" else pg_sizes(url))


def run(backends: list[str], scale: float = 1.0, label: str = "") -> list[list[Any]]:
    n = int(20_000 * scale)
    rows: list[list[Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        for kind in available(backends):
            ctx = sqlite_url(Path(tmp)) if kind == "sqlite" else pg_url()
            with ctx as url:
                sub_bytes, sizes = measure(kind, url, n)
            total = sum(sizes.values())
            for name, size in sorted(sizes.items(), key=lambda kv: -kv[1]):
                if size * 100 < total:  # under 1 % of the file: summed below
                    continue
                rows.append([kind, name, size / n, size / sub_bytes])
            small = sum(s for s in sizes.values() if s * 100 < total)
            rows.append([kind, "(the rest)", small / n, small / sub_bytes])
            rows.append([kind, f"TOTAL ({n} entries, submission {sub_bytes / n:,.0f} B)",
                         total / n, total / sub_bytes])
    print_table(f"storage footprint{label} (bytes per entry; ratio = bytes / submission bytes;"
                " target total <= 2.0)", ["backend", "table or index", "B/entry", "ratio"],
                rows)
    print_table("payload codec (stored bytes / payload bytes, v2 result payloads; "
                "docs/storage.md#payload-codecs)", ["corpus", "payloads", "bytes", "stored",
                                                    "ratio"], codec_rows(n))
    return rows


def codec_rows(n: int) -> list[list[Any]]:
    """What codec 1 keeps of the payload bytes: the benchmark's submissions, and the
    upstream producer's own sample results (which the dictionary was not made from)."""
    fixtures = []
    for line in FIXTURES.read_text(encoding="utf-8").splitlines():
        obj = json.loads(line)
        obj.pop("_expect", None)
        fixtures.append(json.dumps(obj).encode())
    out = []
    for name, subs in (("benchmark submissions", submissions(min(n, 2000))),
                       ("upstream sample results (tests/data/qwed_fixtures.jsonl)", fixtures)):
        prepared, _rejected = validate_items(subs, None, "00000000-0000-4000-8000-000000000000")
        count = raw = stored = 0
        for p in prepared:
            for slot, salt, data in p.payload_rows():
                count += 1
                raw += len(data)
                stored += len(codec.encode(slot, salt, data)[1])
        out.append([name, count, raw, stored, stored / raw])
    return out
