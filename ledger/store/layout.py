"""The payload table's layout, stated once: the payloads of the entry at ``seq`` are the
rows keyed ``pid = seq * SLOT_COUNT + slot`` (docs/storage.md), so one entry's payloads are
the primary keys ``[seq * SLOT_COUNT, (seq + 1) * SLOT_COUNT)`` and a range of entries is one
range of the primary key.

Every computation of a pid, of its seq or slot, and every SQL fragment that does the same in
the database is built here, in Python (:func:`pid`, :func:`seq_of`, :func:`slot_of`,
:func:`pid_range`), as SQLAlchemy expressions (:func:`pid_col`, :func:`seq_col`) or as SQL
text (:func:`pid_sql`, :func:`seq_sql`, :func:`slot_sql`, :data:`SUBJECT_WHERE`);
``tests/test_layers.py`` fails when the arithmetic is written out anywhere else in the
package.  The SQL text is what it was when written by hand (``seq * 8``, ``pid % 8 = 5``),
so the statements, the partial index's predicate and the stored bytes are unchanged.

The layout lives in the store because it is the payload table's key: nothing above the
store sees a pid, and the store does not import ``core``.  Which payload goes to which slot
is the format's (``ledger.core.entry.SLOTS``); the two slots the store's own statements name
are repeated below and pinned to it by ``tests/store/test_layout.py``.
"""

from __future__ import annotations

from typing import Any

SLOT_COUNT = 8  # slots per entry; a slot is 0 .. SLOT_COUNT - 1
SUBJECT_SLOT = 5  # ledger.core.entry.SLOTS["subject"]
META_SLOT = 4  # ledger.core.entry.SLOTS["meta"]
# The largest seq whose payload rows all have a pid that fits a signed 64-bit key.
MAX_SEQ = (2**63 - 1) // SLOT_COUNT - 1


def pid(seq: int, slot: int = 0) -> int:
    """The primary key of the payload row of ``seq``'s ``slot``."""
    return seq * SLOT_COUNT + slot


def seq_of(pid: int) -> int:
    """The seq of the entry whose payload row is ``pid``."""
    return pid // SLOT_COUNT


def slot_of(pid: int) -> int:
    """The slot of the payload row ``pid``."""
    return pid % SLOT_COUNT


def split(pid: int) -> tuple[int, int]:
    """``(seq, slot)`` of the payload row ``pid``."""
    return divmod(pid, SLOT_COUNT)


def pid_range(start: int, end: int) -> tuple[int, int]:
    """``[lo, hi)``: the pids of the payload rows of the entries ``start <= seq < end``."""
    return start * SLOT_COUNT, end * SLOT_COUNT


def entry_pids(seq: int) -> range:
    """Every pid the entry at ``seq`` may have, in slot order."""
    return range(seq * SLOT_COUNT, (seq + 1) * SLOT_COUNT)


# -- SQLAlchemy expressions ---------------------------------------------------------
def pid_col(seq: Any, slot: int | None = None) -> Any:
    """The pid of ``seq``'s ``slot`` as an SQL expression (``seq`` a column); no ``slot``:
    the entry's first pid (slot 0, written without the ``+ 0``)."""
    return seq * SLOT_COUNT if slot is None else seq * SLOT_COUNT + slot


def seq_col(pid: Any) -> Any:
    """The seq of the payload row ``pid`` (a column) as an SQL expression."""
    return pid // SLOT_COUNT


# -- SQL text -----------------------------------------------------------------------
def pid_sql(seq: str, slot: int | str | None = None) -> str:
    """SQL text of the pid of ``seq``'s ``slot`` (``seq`` and ``slot`` SQL expressions); no
    ``slot``: the entry's first pid (slot 0)."""
    return f"{seq} * {SLOT_COUNT}" if slot is None else f"{seq} * {SLOT_COUNT} + {slot}"


def seq_sql(pid: str) -> str:
    """SQL text of the seq of the payload row ``pid`` (integer division on both engines)."""
    return f"{pid} / {SLOT_COUNT}"


def slot_sql(pid: str) -> str:
    """SQL text of the slot of the payload row ``pid``."""
    return f"{pid} % {SLOT_COUNT}"


def is_slot_sql(pid: str, slot: int) -> str:
    """SQL text: the payload row ``pid`` is in ``slot``."""
    return f"{slot_sql(pid)} = {slot}"


# The predicate of the partial index ix_payloads_subject.  A planner uses a partial index
# only when the query states its predicate with the same constants, so the queries state it
# from here too.
SUBJECT_WHERE = is_slot_sql("pid", SUBJECT_SLOT)
