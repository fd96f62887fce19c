"""Values of the wrong storage class written behind the ledger's back (SQLite only:
PostgreSQL's column types refuse them).

SQLite keeps whatever a superuser writes: TEXT in a BLOB column, a BLOB in a string column,
TEXT that is not UTF-8 (which ``sqlite3`` cannot even read back as ``str``).  The audit must
hash what is stored, report the row that holds such a value and go on with the rest -- never
stop with a driver error.
"""

from __future__ import annotations

import pytest
from sqlalchemy import text

from ledger import Ledger
from ledger.core.entry import SLOTS
from ledger.ops.audit import AuditOptions, run_audit
from ledger.ops.samples import realistic
from tests import tamper as T

N = 12
NOT_UTF8 = "CAST(X'FFFE41' AS TEXT)"  # TEXT whose bytes are not UTF-8
RESULT, PREIMAGE, QUERY = SLOTS["result"], SLOTS["preimage"], SLOTS["query"]

CASES = {
    # (table, column, new value as SQL, the slot of a payload row) -> the findings at the row
    "payload data: TEXT, not UTF-8": ("payloads", "data", NOT_UTF8, RESULT,
                                      {"payload_digest_mismatch"}),
    "payload salt: TEXT, not UTF-8": ("payloads", "salt", NOT_UTF8, PREIMAGE,
                                      {"payload_digest_mismatch"}),
    "payload data: the same bytes as UTF-8 TEXT": ("payloads", "data", "CAST(data AS TEXT)",
                                                   QUERY, set()),
    "envelope: TEXT, not UTF-8": ("entries", "envelope", NOT_UTF8, None,
                                  {"envelope_hash_mismatch", "envelope_unreadable"}),
    "engine: TEXT, not UTF-8": ("entries", "engine", NOT_UTF8, None, {"column_mismatch"}),
    "engine: its bytes as a BLOB": ("entries", "engine", "CAST(engine AS BLOB)", None,
                                    {"column_mismatch"}),
    "kind: TEXT, not UTF-8": ("entries", "kind", NOT_UTF8, None, {"foreign_envelope"}),
}


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("workers", [1, 2])
def test_a_value_of_the_wrong_storage_class_is_reported_and_the_audit_goes_on(
        sqlite_url: str, case: str, workers: int) -> None:
    table, column, value, slot, expected = CASES[case]
    with Ledger.init(sqlite_url) as L:
        assert all(r.ok for r in L.append_many(realistic(N)))
    with T.unlocked(sqlite_url) as conn:
        # a verified row with a query: it has every payload the cases change
        seq = conn.execute(text(f"SELECT MIN(pid / 8) FROM payloads WHERE pid % 8 = {QUERY} "
                                f"AND pid / 8 IN (SELECT pid / 8 FROM payloads "
                                f"WHERE pid % 8 = {PREIMAGE})")).scalar()
        assert seq is not None
        where = f"seq = {seq}" if slot is None else f"pid = {seq * 8 + slot}"
        assert conn.execute(text(f"UPDATE {table} SET {column} = {value} WHERE {where}")
                            ).rowcount == 1
        if slot is not None:  # the tampered payload is really stored (not a missing slot)
            assert conn.execute(text(f"SELECT typeof({column}) FROM payloads WHERE {where}")
                                ).scalar() == "text"
    with Ledger.open(sqlite_url) as L:
        report = run_audit(L, AuditOptions(workers=workers))
    got = {f["code"] for f in report["findings"]}
    assert {f["seq"] for f in report["findings"]} <= {seq}
    assert got == expected
    summary = report["summary"]
    assert summary["rows"] == N
    assert summary["verified"] == N - (1 if expected else 0)
    assert report["outcome"] == ("failed" if expected else "passed")
