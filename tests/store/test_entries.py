"""Readers (SQLite and PostgreSQL): entries, pages with payloads, single values."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from sqlalchemy import text

from ledger import Ledger
from ledger.demo.samples import realistic
from ledger.store import db
from ledger.store import entries as repo
from tests import tamper as T


def test_readers_agree_with_what_was_appended(ledger):
    res = ledger.append_many(realistic(7))
    with db.connect(ledger.engine) as conn:
        assert repo.has_schema(conn)
        rows = list(repo.iter_entries(conn, 2, 6, batch=3))
        assert [r.seq for r in rows] == [2, 3, 4, 5]
        pages = list(repo.iter_entry_pages(conn, 0, 7, page=3))
        assert [len(p) for p in pages] == [3, 3, 1]
        for page in pages:
            for row, blobs in page:
                assert 0 in blobs  # slot 0: the result document
                assert repo.get_payloads(conn, row.seq) == blobs
        assert repo.max_seq(conn) == 6 and repo.max_seq(conn, "key_event") is None
        assert repo.entry_hash_at(conn, 6) == repo.read_head(conn).head_hash  # type: ignore
        assert repo.entry_hash_at(conn, 7) is None and repo.link_at(conn, 7) is None
        link = repo.link_at(conn, 3)
        assert link is not None and "sha256:" + link.entry_hash.hex() == res[3].entry_hash
        refs = repo.doc_refs(conn, "result", after=4)
        assert [r.seq for r in refs] == [5, 6]
        assert repo.get_entry(conn, 9) is None


def test_entry_row_fields_are_the_entries_columns_in_table_order():
    # EntryRow is spelled out (typed fields) rather than made from the table: the two must
    # not drift apart (the readers build rows positionally from SELECTs of ENTRY_COLUMNS)
    assert repo.EntryRow._fields == tuple(repo.ENTRY_COLUMNS)


def test_a_fresh_database_has_no_schema(db_url):
    engine = db.make_engine(db_url)
    try:
        with db.connect(engine) as conn:
            assert not repo.has_schema(conn)
    finally:
        engine.dispose()


def _with_rows_deleted(db_url: str, n: int, where: str) -> Ledger:
    """A ledger of ``n`` realistic entries, the rows ``where`` then deleted behind its back."""
    L = Ledger.init(db_url)
    L.append_many(realistic(n))
    with T.unlocked(db_url) as conn:
        conn.execute(text(f"DELETE FROM entries WHERE {where}"))
    return L


def test_pages_are_windows_of_seqs_and_skip_a_gap_of_any_width(db_url):
    with _with_rows_deleted(db_url, 20, "(seq >= 3 AND seq < 11) OR seq = 19") as L:
        with db.connect(L.engine) as conn:
            pages = [[row.seq for row, _ in p] for p in repo.iter_entry_pages(conn, 0, 20, 3)]
            # [0,3) [3,6) empty -> next stored row is 11: [11,14) [14,17) [17,20)
            assert pages == [[0, 1, 2], [11, 12, 13], [14, 15, 16], [17, 18]]
            assert [[r.seq for r, _ in p] for p in repo.iter_entry_pages(conn, 3, 11, 3)] == []
            tail = [[r.seq for r, _ in p] for p in repo.iter_entry_pages(conn, 16, 10**12, 3)]
            assert tail == [[16, 17, 18]]
            for row, blobs in (x for p in repo.iter_entry_pages(conn, 0, 20, 3) for x in p):
                assert blobs == repo.get_payloads(conn, row.seq)
            got = [r.seq for r in repo.iter_entries(conn, 0, None, batch=3)]
            assert got == [0, 1, 2, 11, 12, 13, 14, 15, 16, 17, 18]
            assert [r.seq for r in repo.iter_entries(conn, 2, 13, batch=4)] == [2, 11, 12]


# -- a page's entries are built one at a time (Page), as one dict of the page would give --
@given(seqs=st.lists(st.integers(0, 60), unique=True, max_size=12).map(sorted),
       pids=st.lists(st.integers(0, 8 * 61), unique=True, max_size=60).map(sorted),
       raw_salt=st.booleans())
def test_a_page_gives_each_entry_exactly_its_stored_payloads(seqs, pids, raw_salt):
    salt = bytearray(b"s" * 16) if raw_salt else b"s" * 16  # a driver may give a bytearray
    entries = [(seq, *["x"] * (len(repo.ENTRY_COLUMNS) - 1)) for seq in seqs]
    payloads = [(pid, None if pid % 3 == 0 else salt, b"d%d" % pid, 0) for pid in pids]
    page = repo.Page(entries, payloads)
    by_seq: dict[int, dict[int, tuple[bytes | None, bytes]]] = {}
    for pid, s_, data, _ in payloads:  # the model: every payload row under its entry
        by_seq.setdefault(pid // 8, {})[pid % 8] = (None if s_ is None else bytes(s_), data)
    got = list(page)
    assert [row for row, _ in got] == [repo.EntryRow(*t) for t in entries]
    assert [blobs for _, blobs in got] == [by_seq.get(seq, {}) for seq in seqs]
    assert all(type(s_) is bytes for _, b in got for s_, _ in b.values() if s_ is not None)
    assert len(page) == len(seqs)
    if seqs:
        assert page.next_seq == seqs[-1] + 1
    assert list(page) == got  # iterable again
