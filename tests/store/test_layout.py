"""The payload table's layout (``ledger.store.layout``): its Python and SQL forms agree with
each other, with the format's slots and with what the migrations created."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import literal, select, text

from ledger.core.entry import PAYLOAD_MAP, SLOTS
from ledger.store import layout
from ledger.store.db import connect, make_engine

MIGRATIONS = Path(__file__).resolve().parents[2] / "migrations" / "versions"
PIDS = [0, 1, 5, 7, 8, 13, 4095, 4101, layout.pid(layout.MAX_SEQ, layout.SLOT_COUNT - 1)]


def test_the_store_slots_are_the_formats() -> None:
    assert layout.SUBJECT_SLOT == SLOTS["subject"]
    assert layout.META_SLOT == SLOTS["meta"]
    slots = {s for by_name in PAYLOAD_MAP.values() for s in by_name.values()} | set(SLOTS.values())
    assert all(0 <= s < layout.SLOT_COUNT for s in slots)


def test_pid_and_its_inverse() -> None:
    for p in PIDS:
        seq, slot = layout.split(p)
        assert (layout.seq_of(p), layout.slot_of(p)) == (seq, slot)
        assert layout.pid(seq, slot) == p
        assert p in layout.entry_pids(seq)
        lo, hi = layout.pid_range(seq, seq + 1)
        assert list(layout.entry_pids(seq)) == list(range(lo, hi))
    assert layout.pid(layout.MAX_SEQ, layout.SLOT_COUNT - 1) <= 2**63 - 1
    assert layout.pid_range(3, 5) == (layout.pid(3), layout.pid(5))


def test_the_sql_text_is_what_was_written_by_hand() -> None:
    """The statements and the partial index keep their text (a planner matches a partial
    index's predicate textually): the predicate is the one migration 0008 created."""
    assert layout.pid_sql("e.seq") == "e.seq * 8"
    assert layout.pid_sql("g.size", "v.s") == "g.size * 8 + v.s"
    assert layout.SUBJECT_WHERE == "pid % 8 = 5"
    assert f'sa.text("{layout.SUBJECT_WHERE}")' in \
        (MIGRATIONS / "0008_payloads_by_entry.py").read_text(encoding="utf-8")


def test_the_sql_forms_compute_what_python_does(db_url: str) -> None:
    engine = make_engine(db_url)
    try:
        with connect(engine) as conn:
            for p in PIDS:
                seq, slot = layout.split(p)
                got = conn.execute(text(
                    f"SELECT {layout.seq_sql(':p')}, {layout.slot_sql(':p')}, "
                    f"{layout.pid_sql(':s', ':k')}, {layout.pid_sql(':s')}, "
                    f"CASE WHEN {layout.is_slot_sql(':p', slot)} THEN 1 ELSE 0 END"),
                    {"p": p, "s": seq, "k": slot}).one()
                assert tuple(got) == (seq, slot, p, layout.pid(seq), 1)
                col = literal(seq)
                assert conn.execute(select(layout.pid_col(col, slot),
                                           layout.seq_col(literal(p)))).one() == (p, seq)
    finally:
        engine.dispose()
