"""Stored Merkle tree, signed checkpoints, and the checkpoint check (SQLite and PostgreSQL).

The tamper tests show what only a checkpoint catches: a rewritten tail with a
recomputed valid chain, and a truncated ledger with its head moved back, both
pass a full chain recomputation.
"""

from __future__ import annotations

import pytest
from sqlalchemy import text

from ledger import Ledger
from ledger.clock import FixedClock
from ledger.core.merkle import MemoryTree
from ledger.core.note import parse_checkpoint_body, parse_note
from ledger.crypto.keys import Keyring, known_keys
from ledger.crypto.note_sign import verify_note
from ledger.demo.samples import realistic
from ledger.errors import UsageError
from ledger.ops.checkpoint import (
    CheckpointError,
    TreeIntegrityError,
    check_against_checkpoint,
    consistency_proof,
    inclusion_proof,
    latest_checkpoint,
    make_checkpoint,
    sync_tree,
    tree_root,
)
from ledger.ops.checkpoint import tree as tree_ops
from ledger.store.tree import TreeStore
from tests import merkle_tamper as tamper
from tests.chaincheck import recompute_chain

ORIGIN = "ledger.example/log"
T0 = 1_790_000_000_000_000


@pytest.fixture
def ledger(db_url):
    with Ledger.init(db_url, origin=ORIGIN, clock=FixedClock(T0, 1000)) as L:
        yield L


@pytest.fixture
def keyring(tmp_path):
    ring = Keyring.load(tmp_path / "keys")
    ring.generate(ORIGIN, T0)
    return ring


def _append(ledger, n, start=0):
    subs = realistic(n, start=start)
    for i in range(0, n, 40):
        ledger.append_many(subs[i:i + 40])


def _entry_hashes(ledger):
    return [bytes(r.entry_hash) for r in ledger.iter_entries()]


def _keys(ring):
    return known_keys(ring.public_keys(), ORIGIN)


def test_sync_is_incremental_and_roots_match_memory_tree(ledger, monkeypatch):
    reads, inserted = [], []
    orig_iter, orig_insert = TreeStore.iter_entry_links, TreeStore.insert_nodes

    def spy_iter(self, start, end, page):
        reads.append((start, end))
        yield from orig_iter(self, start, end, page)

    def spy_insert(self, nodes):
        inserted.extend(n for n, _ in nodes)
        orig_insert(self, nodes)

    monkeypatch.setattr(TreeStore, "iter_entry_links", spy_iter)
    monkeypatch.setattr(TreeStore, "insert_nodes", spy_insert)
    _append(ledger, 100)
    assert sync_tree(ledger.engine) == 100
    assert reads == [(0, 100)] and len(inserted) == 2 * 100 - (100).bit_count()
    _append(ledger, 37, start=100)
    reads.clear(), inserted.clear()
    assert sync_tree(ledger.engine) == 137
    assert reads == [(100, 137)]                      # only the new entries were read
    assert len(inserted) == len(set(inserted)) == 2 * 37 - (137).bit_count() + (100).bit_count()
    assert all(idx << level >= 100 or (idx + 1) << level > 100 for level, idx in inserted)
    reads.clear()
    assert sync_tree(ledger.engine) == 137 and reads == []  # current: nothing read
    mem = MemoryTree(_entry_hashes(ledger))
    assert tamper.count(ledger.engine.url.render_as_string(hide_password=False),
                        "merkle_nodes") == len(mem.nodes)
    for size in (0, 1, 2, 3, 64, 99, 100, 101, 128, 136, 137):
        assert tree_root(ledger, size) == mem.root(size)
    for index, size in [(0, 1), (6, 13), (99, 100), (100, 137), (136, 137), (64, 128)]:
        assert inclusion_proof(ledger, index, size) == mem.inclusion_proof(index, size)
    for size1, size2 in [(0, 5), (1, 2), (6, 13), (100, 137), (64, 137), (137, 137)]:
        assert consistency_proof(ledger, size1, size2) == mem.consistency_proof(size1, size2)


def test_sync_in_chunks_gives_the_same_tree(ledger, monkeypatch):
    monkeypatch.setattr(tree_ops, "SYNC_CHUNK", 7)
    monkeypatch.setattr(tree_ops, "SYNC_PAGE", 3)
    _append(ledger, 50)
    assert sync_tree(ledger.engine) == 50
    assert tree_root(ledger, 50) == MemoryTree(_entry_hashes(ledger)).root()


def test_proofs_sync_on_demand(ledger):
    _append(ledger, 10)
    mem = MemoryTree(_entry_hashes(ledger))
    assert inclusion_proof(ledger, 3, 10) == mem.inclusion_proof(3, 10)  # no explicit sync
    with pytest.raises(Exception, match="larger than the ledger"):
        inclusion_proof(ledger, 3, 11)
    with pytest.raises(Exception, match="not in a tree of size"):
        inclusion_proof(ledger, 10, 10)


def test_checkpoint_is_signed_stored_and_verifies(ledger, keyring):
    _append(ledger, 21)
    note = make_checkpoint(ledger, keyring)
    assert verify_note(note, _keys(keyring)) == [ORIGIN]
    cp = parse_checkpoint_body(parse_note(note).text)
    assert (cp.origin, cp.size, cp.root_hash) == (ORIGIN, 21,
                                                  MemoryTree(_entry_hashes(ledger)).root())
    row = latest_checkpoint(ledger)
    assert (row.size, row.root_hash, row.note, row.created_at) == (21, cp.root_hash, note,
                                                                   row.created_at)
    assert make_checkpoint(ledger, keyring) == note      # same size: same note, no new row
    url = ledger.engine.url.render_as_string(hide_password=False)
    assert tamper.count(url, "checkpoints") == 1
    _append(ledger, 5, start=21)
    make_checkpoint(ledger, keyring)
    assert latest_checkpoint(ledger).size == 26 and tamper.count(url, "checkpoints") == 2


def test_empty_ledger_checkpoint(ledger, keyring):
    cp = parse_checkpoint_body(parse_note(make_checkpoint(ledger, keyring)).text)
    assert cp.size == 0 and cp.root_hash == MemoryTree().root()


def test_rotation_signs_with_every_active_key(ledger, keyring, tmp_path):
    _append(ledger, 8)
    old_only = known_keys(keyring.public_keys(), ORIGIN)
    keyring.generate(ORIGIN, T0 + 1)
    note = make_checkpoint(ledger, keyring)
    lines = [s for s in note.split("\n") if s.startswith("\u2014 ")]
    assert len(lines) == 2                                   # two signature lines
    assert verify_note(note, old_only) == [ORIGIN]           # a verifier that knows only the old
    new_only = known_keys(keyring.public_keys()[1:], ORIGIN)  # ... or only the new key
    assert verify_note(note, new_only) == [ORIGIN]
    keyring.retire(keyring.jwks[0]["kid"], T0 + 2)
    _append(ledger, 1, start=8)
    later = make_checkpoint(ledger, keyring)
    assert len([s for s in later.split("\n") if s.startswith("\u2014 ")]) == 1
    with pytest.raises(Exception, match="no signature from a known key"):
        verify_note(later, old_only)
    assert check_against_checkpoint(ledger, note, _keys(keyring)) == []


def test_checkpoint_without_a_key_is_a_usage_error(ledger, tmp_path):
    with pytest.raises(Exception) as err:
        make_checkpoint(ledger, Keyring.load(tmp_path / "empty"))
    assert err.value.code == "no_signing_key" and err.value.exit_code == 2


def _url(ledger):
    return ledger.engine.url.render_as_string(hide_password=False)


def test_refuses_to_sign_a_tree_inconsistent_with_the_last_checkpoint(ledger, keyring):
    _append(ledger, 30)
    make_checkpoint(ledger, keyring)
    # The attacker rewrites entries AND the stored tree, so a sync rebuilds it from the lie.
    tamper.rewrite_tail(_url(ledger), 20)
    tamper.wipe_tree(_url(ledger))
    assert recompute_chain(_url(ledger)) == 30
    with pytest.raises(CheckpointError) as err:
        make_checkpoint(ledger, keyring)
    assert err.value.code == "checkpoint_inconsistent" and err.value.exit_code == 1
    assert tamper.count(_url(ledger), "checkpoints") == 1


def test_refuses_to_extend_a_stored_tree_the_entries_no_longer_link_to(ledger, keyring):
    _append(ledger, 30)
    make_checkpoint(ledger, keyring)
    tamper.rewrite_tail(_url(ledger), 25)  # tree left alone, then business as usual
    _append(ledger, 3, start=30)
    with pytest.raises(TreeIntegrityError) as err:
        make_checkpoint(ledger, keyring)
    assert err.value.code == "tree_link_broken"


def test_refuses_to_sign_a_truncated_ledger(ledger, keyring):
    _append(ledger, 30)
    make_checkpoint(ledger, keyring)
    tamper.truncate(_url(ledger), 24)
    with pytest.raises(TreeIntegrityError) as err:
        make_checkpoint(ledger, keyring)
    assert err.value.code == "ledger_shrank"
    tamper.wipe_tree(_url(ledger))  # even with the tree rebuilt, the checkpoint row says 30
    with pytest.raises(CheckpointError) as err:
        make_checkpoint(ledger, keyring)
    assert err.value.code == "checkpoint_truncated"


# -- the auditor's check against a checkpoint kept outside the database ----------------------

def test_clean_ledger_extends_its_checkpoints(ledger, keyring):
    _append(ledger, 40)
    note = make_checkpoint(ledger, keyring)
    assert check_against_checkpoint(ledger, note, _keys(keyring)) == []
    _append(ledger, 23, start=40)
    assert check_against_checkpoint(ledger, note, _keys(keyring)) == []
    make_checkpoint(ledger, keyring)
    assert check_against_checkpoint(ledger, note) == []


@pytest.mark.parametrize("first", [0, 17, 31])
def test_rewritten_tail_is_caught_only_by_the_checkpoint(ledger, keyring, first):
    _append(ledger, 32)
    kept = make_checkpoint(ledger, keyring)          # the auditor keeps this note
    tamper.rewrite_tail(_url(ledger), first)
    assert recompute_chain(_url(ledger)) == 32        # the chain alone does not catch it
    [finding] = check_against_checkpoint(ledger, kept, _keys(keyring))
    assert finding["class"] == "rewritten" and finding["code"] == "checkpoint_inconsistent"
    assert finding["seq"] == first and finding["range"] == [first, first + 1]
    assert finding["expected"]["root"] != finding["actual"]["root"]
    assert finding["expected"]["size"] == 32


def test_rewrite_that_also_rebuilt_the_tree_is_still_caught(ledger, keyring):
    _append(ledger, 32)
    kept = make_checkpoint(ledger, keyring)
    tamper.rewrite_tail(_url(ledger), 20)
    tamper.wipe_tree(_url(ledger))
    sync_tree(ledger.engine)                         # stored tree now matches the lie
    [finding] = check_against_checkpoint(ledger, kept, _keys(keyring))
    assert finding["class"] == "rewritten"
    assert finding["seq"] == 31                      # no trustworthy nodes: size - 1


def test_truncated_ledger_is_caught_only_by_the_checkpoint(ledger, keyring):
    _append(ledger, 30)
    kept = make_checkpoint(ledger, keyring)
    tamper.truncate(_url(ledger), 26)
    assert recompute_chain(_url(ledger)) == 26        # a clean, shorter chain
    [finding] = check_against_checkpoint(ledger, kept, _keys(keyring))
    assert (finding["class"], finding["code"], finding["seq"]) == \
        ("truncated", "checkpoint_truncated", 26)
    assert finding["expected"]["size"] == 30 and finding["actual"]["size"] == 26


def test_truncated_and_regrown_ledger_is_caught(ledger, keyring):
    _append(ledger, 30)
    kept = make_checkpoint(ledger, keyring)
    tamper.truncate(_url(ledger), 20)
    tamper.wipe_tree(_url(ledger))
    _append(ledger, 15, start=500)                   # size 35 > 30 again, other history
    assert recompute_chain(_url(ledger)) == 35
    [finding] = check_against_checkpoint(ledger, kept, _keys(keyring))
    assert finding["class"] == "rewritten" and finding["seq"] == 29


@pytest.mark.parametrize("node", [(3, 0), (2, 3)])
def test_stored_tree_forked_from_the_checkpoint(ledger, keyring, node):
    _append(ledger, 12)
    kept = make_checkpoint(ledger, keyring)
    _append(ledger, 4, start=12)
    sync_tree(ledger.engine)
    with tamper.connection(_url(ledger)) as conn, tamper.unguarded(conn, "merkle_nodes"):
        conn.execute(text("UPDATE merkle_nodes SET hash = :h WHERE level = :l AND idx = :i"),
                     {"h": b"\x07" * 32, "l": node[0], "i": node[1]})
    [finding] = check_against_checkpoint(ledger, kept, _keys(keyring))
    assert (finding["class"], finding["code"]) == ("forked", "stored_tree_inconsistent")


def test_unusable_checkpoints_are_findings_not_errors(ledger, keyring, tmp_path):
    _append(ledger, 5)
    note = make_checkpoint(ledger, keyring)
    other = Keyring.load(tmp_path / "other")
    other.generate(ORIGIN, T0)
    [f] = check_against_checkpoint(ledger, note, _keys(other))
    assert (f["code"], f["class"]) == ("checkpoint_unverified", "signature_invalid")
    [f] = check_against_checkpoint(ledger, "garbage", None)
    assert f["code"] == "checkpoint_unverified"
    foreign = Keyring.load(tmp_path / "foreign")
    foreign.generate("someone.else/log", T0)
    body = "someone.else/log\n5\n" + note.split("\n")[2] + "\n"
    from ledger.crypto.note_sign import sign_note
    name, key = foreign.signers("someone.else/log")[0]
    [f] = check_against_checkpoint(ledger, body + "\n" + sign_note(body, name, key), None)
    assert f["code"] == "checkpoint_origin_mismatch"


def test_checkpoints_made_while_appending_stay_consistent(ledger, keyring):
    import threading

    errors: list[BaseException] = []

    def appender():
        try:
            for k in range(12):
                _append(ledger, 7, start=1000 + 7 * k)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    t = threading.Thread(target=appender)
    t.start()
    notes = []
    while t.is_alive():
        notes.append(make_checkpoint(ledger, keyring))
    t.join()
    notes.append(make_checkpoint(ledger, keyring))
    assert not errors
    mem = MemoryTree(_entry_hashes(ledger))
    assert mem.size == 84 and tree_root(ledger, 84) == mem.root()
    for note in notes:
        cp = parse_checkpoint_body(parse_note(note).text)
        assert cp.root_hash == mem.root(cp.size)
        assert check_against_checkpoint(ledger, note, _keys(keyring)) == []


def _set_node(ledger, level, idx, value=b"\xee" * 32):
    with tamper.connection(_url(ledger)) as conn, tamper.unguarded(conn, "merkle_nodes"):
        conn.execute(text("UPDATE merkle_nodes SET hash = :h WHERE level = :l AND idx = :i"),
                     {"h": value, "l": level, "i": idx})


def _codes(findings):
    return [(f["code"], f["seq"]) for f in findings]


def test_a_row_deleted_below_the_checkpoint_is_an_entries_gap(ledger, keyring):
    _append(ledger, 12)
    kept = make_checkpoint(ledger, keyring)
    with tamper.connection(_url(ledger)) as conn, tamper.unguarded(conn, "entries"):
        conn.execute(text("DELETE FROM entries WHERE seq = 3"))
    found = _codes(check_against_checkpoint(ledger, kept, _keys(keyring)))
    assert found[0] == ("entries_gap", 3)
    assert found[-1][0] == "checkpoint_truncated"  # 11 rows left of the 12 committed to


def test_a_stored_tree_larger_than_the_ledger_is_a_finding(ledger, keyring):
    _append(ledger, 10)
    kept = make_checkpoint(ledger, keyring)
    _append(ledger, 10, start=10)
    assert sync_tree(ledger.engine) == 20
    tamper.truncate(_url(ledger), 15)
    [finding] = check_against_checkpoint(ledger, kept, _keys(keyring))
    assert (finding["code"], finding["class"], finding["seq"]) == (
        "tree_larger_than_ledger", "truncated", 15)


def test_a_stored_tree_short_of_the_checkpoint_is_not_checked(ledger, keyring):
    _append(ledger, 10)
    kept = make_checkpoint(ledger, keyring)
    tamper.wipe_tree(_url(ledger))  # the next sync rebuilds it: nothing served from it yet
    assert check_against_checkpoint(ledger, kept, _keys(keyring)) == []


def test_a_stored_tree_whose_root_is_not_the_entries_is_inconsistent(ledger, keyring):
    _append(ledger, 10)
    kept = make_checkpoint(ledger, keyring)
    _append(ledger, 10, start=10)
    assert sync_tree(ledger.engine) == 20
    _set_node(ledger, 2, 4)  # leaves 16..19, past the checkpoint: its own root still holds
    [finding] = check_against_checkpoint(ledger, kept, _keys(keyring))
    assert (finding["code"], finding["class"], finding["seq"]) == (
        "stored_tree_inconsistent", "forked", 9)
    assert "is not the root of the entries" in finding["message"]


def test_untrustworthy_stored_nodes_widen_the_range_of_a_rewrite(ledger, keyring):
    _append(ledger, 16)
    kept = make_checkpoint(ledger, keyring)
    tamper.rewrite_tail(_url(ledger), 4)
    _set_node(ledger, 3, 0)  # the left half no longer hashes up to the stored root
    [finding] = check_against_checkpoint(ledger, kept, _keys(keyring))
    assert finding["code"] == "checkpoint_inconsistent"
    assert finding["seq"] == 0 and finding["range"] == [0, 16]


@pytest.mark.parametrize("rewrite", [lambda note: "not a note",
                                     lambda note: note.replace("\n10\n", "\n9\n", 1)],
                         ids=["malformed", "other size"])
def test_a_stored_checkpoint_that_does_not_match_its_row_stops_signing(ledger, keyring, rewrite):
    _append(ledger, 10)
    note = make_checkpoint(ledger, keyring)
    _append(ledger, 2, start=10)
    with tamper.connection(_url(ledger)) as conn, tamper.unguarded(conn, "checkpoints"):
        conn.execute(text("UPDATE checkpoints SET note = :n"), {"n": rewrite(note)})
    with pytest.raises(CheckpointError) as caught:
        make_checkpoint(ledger, keyring)
    assert caught.value.code == "checkpoint_corrupt"


def test_a_consistency_proof_backwards_is_a_usage_error(ledger):
    _append(ledger, 8)
    with pytest.raises(UsageError) as caught:
        consistency_proof(ledger, 8, 4)
    assert (caught.value.code, caught.value.field) == ("size_out_of_range", "size")
