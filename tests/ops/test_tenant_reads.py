"""Reads of a ledger with tenants (docs/reads.md, docs/format-checkpoint.md).

Both engines.  Every read path that re-checks an entry's hash and its link -- ``Ledger.get``,
``Ledger.query`` (a whole page, and one-entry windows whose successor is read), the checked
headers of reports, and the inclusion proof bundle -- shows the entries of every tenant as
proven in a ledger whose tenants interleave: an entry's hash is its tenant's link, and the
entry it must link on with is the next entry of its own tenant.  The same entry with its
``tenant`` or its ``tseq`` changed by raw SQL is flagged, and so is the entry its tenant's
chain no longer carries on from.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ledger.core.entry import body_hash, entry_hash, genesis_hash
from ledger.core.readcheck import ENTRY_HASH_MISMATCH, HASH_NOT_COMMITTED, check_entry
from ledger.core.tenant import tenant_entry_hash, tenant_genesis
from ledger.crypto.keys import Keyring
from ledger.demo.samples import math_verified
from ledger.errors import ProofError
from ledger.facade import Ledger
from ledger.ops.verified import checked_headers
from ledger.store.db import connect
from ledger.store.entries import EntryRow
from ledger.verify.proof import verify_inclusion_bundle
from tests import tamper

# seq:    0        1       2        3       4       5       6        7       8       9
PLAN = ["default", "acme", "default", "acme", "beta", "acme", "default", "beta", "acme",
        "default"]
ACME = [1, 3, 5, 8]
ORIGIN = "test.example/tenant-reads"


def sub(tag: str) -> dict[str, Any]:
    s = math_verified(random.Random(tag).randrange(10**6), random.Random(tag))
    s["subject"] = tag
    return s


@pytest.fixture
def mixed(db_url: str, tmp_path: Path) -> Iterator[tuple[Ledger, Keyring]]:
    """A ledger of three interleaved tenants (:data:`PLAN`), checkpointed."""
    Ledger.init(db_url, origin=ORIGIN).close()
    ring = Keyring.load(tmp_path / "keys")
    ring.generate(ORIGIN, 1_790_000_000_000_000)
    with Ledger.open(db_url) as ledger:
        for i, t in enumerate(PLAN):
            got = ledger.append(sub(f"{t}-{i}"), tenant=t)
            assert got.seq == i
        ledger.checkpoint(ring)
        yield ledger, ring


def verdicts(ledger: Ledger, **kw: Any) -> dict[int, dict[str, Any]]:
    page = ledger.query(layer="auditor", limit=100, **kw)
    return {r["seq"]: r for r in page.rows}


def headers(ledger: Ledger) -> dict[int, Any]:
    with connect(ledger.engine) as conn:
        return {c.seq: c for c in checked_headers(conn, ledger.meta.ledger_id, 0, None)}


def every_read(ledger: Ledger, seq: int) -> list[tuple[str, bool, list[str], Any]]:
    """(path, verified, codes, tenant served) of entry ``seq`` over every Python read."""
    got = ledger.get(seq)
    out = [("get", got["integrity"]["verified"], got["integrity"]["codes"], got["tenant"])]
    row = verdicts(ledger)[seq]
    out.append(("query", row["integrity"]["verified"], row["integrity"]["codes"],
                row["tenant"]))
    one = verdicts(ledger, start=seq, end=seq + 1)[seq]
    out.append(("query-one", one["integrity"]["verified"], one["integrity"]["codes"],
                one["tenant"]))
    h = headers(ledger)[seq]
    out.append(("headers", h.integrity.verified, h.integrity.codes, h.tenant))
    return out


def test_every_entry_of_every_tenant_reads_proven(mixed: tuple[Ledger, Keyring]) -> None:
    ledger, _ = mixed
    for seq, tenant in enumerate(PLAN):
        for path, ok, codes, served in every_read(ledger, seq):
            assert (path, ok, codes, served) == (path, True, [], tenant), seq
    got = ledger.get(ACME[1])
    assert (got["tenant"], got["tseq"]) == ("acme", 1)
    assert ledger.get(0)["tseq"] is None  # the default tenant's tseq is not hashed
    # developers see the tenant too; agents do not
    dev = ledger.query(layer="developer", limit=100).rows
    assert [r["tenant"] for r in dev] == PLAN
    assert "tenant" not in ledger.query(layer="agent", limit=1).rows[0]


def test_a_page_filtered_to_one_tenant_links_within_it(mixed: tuple[Ledger, Keyring]) -> None:
    """Non-adjacent rows (a filter): each links to the next entry of its tenant, read."""
    ledger, _ = mixed
    rows = ledger.query(layer="auditor", subject=[f"acme-{s}" for s in ACME],
                        limit=100).rows
    assert [(r["seq"], r["integrity"]["verified"]) for r in rows] == [(s, True) for s in ACME]


@pytest.mark.parametrize("change", [{"tenant": "beta"}, {"tenant": "default"},
                                    {"tseq": 7}, {"tenant": "acme", "tseq": None}])
def test_a_tenant_entry_rewritten_by_sql_is_flagged(mixed: tuple[Ledger, Keyring],
                                                    db_url: str, change: dict[str, Any]) -> None:
    ledger, _ = mixed
    seq = ACME[1]
    with tamper.unlocked(db_url) as conn:
        tamper.update_entry(conn, seq, **change)
    for path, ok, codes, served in every_read(ledger, seq):
        assert not ok and ENTRY_HASH_MISMATCH in codes, (path, codes)
        assert served is None, path  # a tenant the hash does not bind is not served
    if "tenant" in change and change["tenant"] != "acme":
        # the tenant's previous entry: its chain no longer carries on from it
        for path, ok, codes, _ in every_read(ledger, ACME[0]):
            assert not ok and codes == [HASH_NOT_COMMITTED], (path, codes)
    if change.get("tenant") == "default":
        # the entry the default chain now seems to carry on from (2): it does not
        for path, ok, codes, _ in every_read(ledger, 2):
            assert not ok and codes == [HASH_NOT_COMMITTED], (path, codes)
    # the other entries are untouched
    for seq in (0, 4, 6, 9):
        assert all(ok for _, ok, _, _ in every_read(ledger, seq)), seq


def test_a_default_entry_moved_to_a_tenant_is_flagged(mixed: tuple[Ledger, Keyring],
                                                      db_url: str) -> None:
    ledger, _ = mixed
    with tamper.unlocked(db_url) as conn:
        tamper.update_entry(conn, 2, tenant="acme", tseq=1)
    for path, ok, codes, _ in every_read(ledger, 2):
        assert not ok and ENTRY_HASH_MISMATCH in codes, (path, codes)
    for path, ok, codes, _ in every_read(ledger, 0):
        assert not ok and codes == [HASH_NOT_COMMITTED], (path, codes)


def test_a_rewritten_last_entry_of_a_tenant_fails_its_head(mixed: tuple[Ledger, Keyring],
                                                            db_url: str) -> None:
    """beta's last entry (7) is not the ledger's last: it links to beta's recorded head."""
    ledger, _ = mixed
    ok = {s: v["integrity"]["verified"] for s, v in verdicts(ledger).items()}
    assert ok[7]
    with tamper.unlocked(db_url) as conn:
        row = conn.exec_driver_sql("SELECT prev_hash, tseq, recorded_at, body_hash "
                                   "FROM entries WHERE seq = 7").one()
        forged = tenant_entry_hash("beta", bytes(row[0]), 7, row[1], row[2] + 1,
                                   bytes(row[3]))
        tamper.update_entry(conn, 7, recorded_at=row[2] + 1, entry_hash=forged)
    for path, good, codes, _ in every_read(ledger, 7):
        assert not good and codes == [HASH_NOT_COMMITTED], (path, codes)


def test_a_deleted_entry_leaves_its_tenant_predecessor_unchecked(
        mixed: tuple[Ledger, Keyring], db_url: str) -> None:
    """As for the single chain: the entry whose successor is missing is not flagged by the
    read (the audit reports the gap), and nothing else is."""
    ledger, _ = mixed
    with tamper.unlocked(db_url) as conn:
        conn.exec_driver_sql("DELETE FROM payloads WHERE pid >= 24 AND pid < 32")
        conn.exec_driver_sql("DELETE FROM entries WHERE seq = 3")
    for seq in (0, 1, 2, 4, 5):
        assert all(ok for _, ok, _, _ in every_read(ledger, seq)), seq


def test_the_proof_bundle_of_a_tenant_entry(mixed: tuple[Ledger, Keyring], db_url: str,
                                            ) -> None:
    ledger, ring = mixed
    refs = ring.public_keys()
    default = ledger.prove(2)
    assert set(default["entry"]) == {"envelope", "recorded_at_us", "prev_hash", "body_hash",
                                     "entry_hash", "payloads"}
    assert verify_inclusion_bundle(default, refs).tenant == "default"
    bundle = ledger.prove(ACME[2])
    assert (bundle["entry"]["tenant"], bundle["entry"]["tseq"]) == ("acme", 2)
    got = verify_inclusion_bundle(json.dumps(bundle), refs)
    assert (got.seq, got.tenant, got.tseq) == (ACME[2], "acme", 2)
    for key, value, code in (("tenant", "beta", "entry_hash_mismatch"),
                             ("tseq", 3, "entry_hash_mismatch"),
                             ("tenant", "default", "proof_malformed"),
                             ("tenant", "Acme", "proof_malformed"),
                             ("tseq", -1, "proof_malformed")):
        b = json.loads(json.dumps(bundle))
        b["entry"][key] = value
        with pytest.raises(ProofError) as exc:
            verify_inclusion_bundle(b, refs)
        assert exc.value.code == code, (key, value)
    for key in ("tenant", "tseq"):
        b = json.loads(json.dumps(bundle))
        del b["entry"][key]
        with pytest.raises(ProofError) as exc:
            verify_inclusion_bundle(b, refs)
        assert exc.value.code in ("proof_malformed", "entry_hash_mismatch"), key
    # the bundle of a tampered row: the verifier recomputes the tenant link
    with tamper.unlocked(db_url) as conn:
        tamper.update_entry(conn, ACME[2], tenant="beta")
    with pytest.raises(ProofError) as exc:
        verify_inclusion_bundle(ledger.prove(ACME[2]), refs)
    assert exc.value.code == "entry_hash_mismatch"


def test_check_entry_takes_the_link_of_the_row_tenant() -> None:
    """The pure check: the tenant link for a tenant row, the v1 link for a default one."""
    lid = "00000000-0000-4000-8000-000000000001"
    env = json.dumps({"v": 1, "ledger": lid, "kind": "event"}).encode()
    body = body_hash(env)
    tprev = tenant_genesis(lid, "acme")
    th = tenant_entry_hash("acme", tprev, 4, 0, 10, body)
    cols = dict.fromkeys(("engine", "status", "constraint_id", "proof_ref", "subject",
                          "producer", "idempotency_key", "admission", "att_verdict",
                          "att_kid", "att_iss"))
    row = EntryRow(seq=4, kind="event", recorded_at=10, envelope=env, body_hash=body,
                   prev_hash=tprev, entry_hash=th, tenant="acme", tseq=0, **cols)
    c = check_entry(row, {}, lid, next_prev=th, slots=())
    assert ENTRY_HASH_MISMATCH not in c.integrity.codes and (c.tenant, c.tseq) == ("acme", 0)
    for bad in ({"tenant": "beta"}, {"tseq": 1}, {"tenant": "default"}, {"tseq": None},
                {"tenant": "NOT A TENANT"}):
        c = check_entry(row._replace(**bad), {}, lid, slots=())
        assert ENTRY_HASH_MISMATCH in c.integrity.codes and c.tenant is None, bad
    dh = entry_hash(genesis_hash(lid), 4, 10, body)
    drow = row._replace(prev_hash=genesis_hash(lid), entry_hash=dh, tenant="default", tseq=None)
    c = check_entry(drow, {}, lid, next_prev=b"\0" * 32, slots=())
    assert c.integrity.codes[:1] != [ENTRY_HASH_MISMATCH] and c.tenant == "default"
    assert HASH_NOT_COMMITTED in c.integrity.codes
