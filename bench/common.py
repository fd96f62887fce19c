"""Shared set-up for benchmarks: fresh databases, realistic submissions, tables."""

from __future__ import annotations

import json
import os
import random
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from ledger.demo.samples import bench_submission

PG_ADMIN_URL = os.environ.get("LEDGER_BENCH_PG", "postgresql://postgres@127.0.0.1:5432/test")


def submissions(n: int, seed: int = 1, start: int = 0) -> list[bytes]:
    rng = random.Random(seed)
    return [json.dumps(bench_submission(start + i, rng)).encode() for i in range(n)]


@contextmanager
def sqlite_url(tmp: Path) -> Iterator[str]:
    path = tmp / f"bench-{uuid.uuid4().hex[:8]}.db"
    yield f"sqlite:///{path}"
    for suffix in ("", "-wal", "-shm"):
        Path(str(path) + suffix).unlink(missing_ok=True)


@contextmanager
def pg_url() -> Iterator[str]:
    admin = create_engine(PG_ADMIN_URL.replace("postgresql://", "postgresql+psycopg://"),
                          isolation_level="AUTOCOMMIT")
    name = f"ledger_bench_{uuid.uuid4().hex[:8]}"
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    try:
        yield make_url(PG_ADMIN_URL).set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


def pg_available() -> bool:
    try:
        eng = create_engine(PG_ADMIN_URL.replace("postgresql://", "postgresql+psycopg://"))
        with eng.connect():
            pass
        eng.dispose()
        return True
    except Exception:  # noqa: BLE001
        return False


def available(backends: list[str]) -> Iterator[str]:
    """The requested backends that can run here (says which are skipped, and why)."""
    for kind in backends:
        if kind == "postgresql" and not pg_available():
            print("PostgreSQL not reachable: skipping its rows")
            continue
        yield kind


def rate(n: int, fn: Callable[[], Any]) -> float:
    t0 = time.perf_counter()
    fn()
    return n / (time.perf_counter() - t0)


def print_table(title: str, header: list[str], rows: list[list[Any]]) -> None:
    cells = [header] + [[_fmt(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    print(f"\n{title}")
    print("  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)))
    print("  ".join("-" * w for w in widths))
    for r in cells[1:]:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=False)))


def _fmt(c: Any) -> str:
    if isinstance(c, float):
        return f"{c:,.2f}" if c < 10 else f"{c:,.0f}"
    return str(c)
