"""Payload codecs (ledger.store.codec, migration 0009): what is stored compressed, that every
reader gets the exact bytes back, that a changed stored stream is an audit finding, and that
the migration moves an existing ledger both ways without changing a hash."""

from __future__ import annotations

import hashlib
import json
import random
import subprocess
import sys
import zlib
from pathlib import Path

import pytest
from alembic import command
from hypothesis import given
from hypothesis import strategies as st
from sqlalchemy import inspect, text

from ledger import Ledger
from ledger.crypto.keys import Keyring
from ledger.demo.samples import bench_submission
from ledger.ops.audit import AuditOptions
from ledger.store import codec
from ledger.store import entries as repo
from ledger.store.db import (
    alembic_config,
    connect,
    current_revision,
    make_engine,
    write_connection,
)
from tests import tamper as T

ROOT = Path(__file__).resolve().parents[2]
# (payload bytes, a codec-1 stream of them): decoding is the format; what a given zlib
# writes when encoding may differ between zlib builds, and any stream that decodes is valid.
VECTORS = [
    (b'{"agent_message":"Claim verified","status":"VERIFIED"}', "23549060cf6400"),
    (b'{"expression": "2 + 2", "calculated": 4, "claimed": 4}',
     "abc692078c94c03d3ee4f6116ad3a81600"),
    (b"Is 7 * 6 equal to 42?", "03ca9b2b682920c99818d90300"),
]


def mix(n: int) -> list[dict]:
    rng = random.Random(3)
    return [bench_submission(i, rng) for i in range(n)]


def rows(url: str) -> dict[int, tuple[int, bytes | None, bytes]]:
    with T.connect(url) as conn:
        return {pid: (how, None if salt is None else bytes(salt), bytes(data))
                for pid, how, salt, data in conn.execute(text(
                    "SELECT pid, codec, salt, data FROM payloads ORDER BY pid")).all()}


def verdicts(report: dict) -> tuple[int, int, list]:
    c = report.summary
    return c.rows, c.verified, [(f.seq, f.code) for f in report.findings]


# -- the codec itself ---------------------------------------------------------------
def test_the_dictionary_is_the_pinned_one_and_its_script_rebuilds_it():
    data = (ROOT / "ledger" / "store" / "payload_dict_1.bin").read_bytes()
    assert hashlib.sha256(data).hexdigest() == codec.DICT1_SHA256 == hashlib.sha256(
        codec.dictionary()).hexdigest()
    out = subprocess.run([sys.executable, str(ROOT / "scripts" / "gen-payload-dict"), "--check"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr


@pytest.mark.parametrize(("data", "stream"), VECTORS)
def test_worked_vectors_decode_with_only_zlib_and_the_dictionary(data, stream):
    raw = bytes.fromhex(stream)
    assert codec.decode(codec.DEFLATE_D1, raw) == data
    # what an independent reader does (docs/storage.md#payload-codecs)
    d = zlib.decompressobj(-15, zdict=(ROOT / "ledger/store/payload_dict_1.bin").read_bytes())
    assert d.decompress(raw) == data and d.eof


@given(st.binary(max_size=3000), st.integers(0, 2**40), st.booleans())
def test_every_payload_comes_back_exactly_and_is_never_stored_longer(data, seq_slot, salted):
    pid = seq_slot
    salt = b"s" * 32 if salted else None
    how, stored = codec.encode(pid, salt, data)
    assert codec.decode(how, stored) == data
    assert len(stored) <= len(data)
    if salt is None or pid % 8 == codec.SUBJECT_SLOT or len(data) < codec.MIN_SIZE:
        assert (how, stored) == (codec.RAW, data)  # documents, subjects, short: as they are


@given(st.binary(max_size=400))
def test_a_stream_that_does_not_decode_comes_back_as_stored(junk):
    good = codec.deflate(b'{"status":"VERIFIED","x":' + b"1" * 200 + b"}")
    for stored in (junk, good[:-1], good + b"\x00", good[: len(good) // 2]):
        got = codec.decode(codec.DEFLATE_D1, stored)
        assert got == stored or zlib.decompressobj(-15, zdict=codec.dictionary()) \
            .decompress(stored) == got  # only a complete stream decodes
    assert codec.decode(7, good) == good  # an unknown codec: the stored bytes


# -- in the ledger -----------------------------------------------------------------
def test_result_payloads_are_stored_compressed_and_read_back_exactly(ledger, db_url):
    subs = mix(40)
    assert all(r.ok for r in ledger.append_many(subs))
    ledger.append(bench_submission(40, random.Random(9)))  # the single-append path too
    stored = rows(db_url)
    by_slot: dict[int, set[int]] = {}
    for pid, (how, _salt, _data) in stored.items():
        by_slot.setdefault(pid % 8, set()).add(how)
    assert by_slot[5] == {codec.RAW}  # the subject: found by its bytes
    for slot in (0, 1):  # result, preimage
        assert by_slot[slot] == {codec.DEFLATE_D1}, slot
    for slot in (3, 4):  # query and meta: under MIN_SIZE in this mix
        assert by_slot[slot] == {codec.RAW}, slot
    raw_total = 0
    with connect(ledger.engine) as conn:
        for seq in range(41):
            for slot, p in repo.get_payloads(conn, seq).items():
                how, _salt, data = stored[seq * 8 + slot]
                assert codec.decode(how, data) == p.data
                raw_total += len(p.data)
        pages = [x for page in repo.iter_entry_pages(conn, 0, 41) for x in page]
    assert sum(len(d) for _h, _s, d in stored.values()) < raw_total / 2
    for entry, slots in pages:  # the audit's read gets the very bytes get_payloads does
        with connect(ledger.engine) as conn:
            assert {k: tuple(v) for k, v in repo.get_payloads(conn, entry.seq).items()} == \
                {k: tuple(v) for k, v in slots.items()}
    evidence = json.dumps(subs[7]["evidence"], sort_keys=True)
    assert ledger.get(7)["payloads"]["preimage"]["text"] == evidence
    assert verdicts(ledger.audit(AuditOptions())) == (41, 41, [])


@pytest.mark.parametrize("change", ["flip a byte", "truncate", "unknown codec",
                                    "codec 1 -> 0"])
def test_a_changed_stored_stream_is_a_finding(ledger, db_url, change):
    ledger.append_many(mix(4))
    pid = 2 * 8 + 1  # seq 2, the evidence
    how, _salt, data = rows(db_url)[pid]
    assert how == codec.DEFLATE_D1
    new = {"flip a byte": (how, data[:3] + bytes([data[3] ^ 0x40]) + data[4:]),
           "truncate": (how, data[:-2]),
           "unknown codec": (9, data),
           "codec 1 -> 0": (codec.RAW, data)}[change]
    with T.unlocked(db_url) as conn:
        conn.execute(text("UPDATE payloads SET codec = :c, data = :d WHERE pid = :p"),
                     {"c": new[0], "d": new[1], "p": pid})
    got = verdicts(ledger.audit(AuditOptions()))
    assert got[2] == [(2, "payload_digest_mismatch")], got
    assert got[1] == 3


def test_plain_bytes_stored_as_codec_0_are_the_same_payload(ledger, db_url):
    """Only the bytes matter, not how they are stored: a row rewritten as plain bytes
    (what a restore by hand might do) still verifies."""
    ledger.append_many(mix(3))
    for pid, how in ((1 * 8 + 0, codec.RAW), (2 * 8 + 1, codec.DEFLATE_D1)):
        was, _salt, data = rows(db_url)[pid]
        with T.unlocked(db_url) as conn:  # codec 1 holding plain bytes: they come back
            conn.execute(text("UPDATE payloads SET codec = :c, data = :d WHERE pid = :p"),
                         {"c": how, "d": codec.decode(was, data), "p": pid})
    assert verdicts(ledger.audit(AuditOptions())) == (3, 3, [])


# -- migration 0009 ----------------------------------------------------------------
def _hashes(url: str) -> list[tuple[int, bytes, bytes]]:
    with T.connect(url) as conn:
        return [(s, bytes(e), bytes(h)) for s, e, h in conn.execute(text(
            "SELECT seq, envelope, entry_hash FROM entries ORDER BY seq")).all()]


def _plain(url: str) -> dict[int, bytes]:
    return {pid: codec.decode(how, data) for pid, (how, _s, data) in rows(url).items()}


def test_migration_0009_moves_a_ledger_both_ways_without_changing_a_hash(db_url, tmp_path):
    ring = Keyring.load(tmp_path / "keys")
    ring.generate("test.example/codec", 1_767_225_600_000_000)
    with Ledger.init(db_url, origin="test.example/codec") as L:
        assert all(r.ok for r in L.append_many(mix(30)))
        L.checkpoint(ring)
        signed = L.latest_checkpoint()
    hashes, plain = _hashes(db_url), _plain(db_url)
    engine = make_engine(db_url)
    try:
        with write_connection(engine) as conn:  # the layout of revision 0008: no codec
            command.downgrade(alembic_config(conn), "0008")
            conn.commit()
        assert current_revision(engine) == "0008"
        cols = {c["name"] for c in inspect(engine).get_columns("payloads")}
        assert cols == {"pid", "salt", "data"}
        with T.connect(db_url) as conn:
            at_0008 = {pid: bytes(d) for pid, d in conn.execute(text(
                "SELECT pid, data FROM payloads")).all()}
        assert at_0008 == plain  # every row is its plain bytes again
        with Ledger.init(db_url) as L:  # `ledger db upgrade` / init: to the head, 0012
            assert current_revision(engine) == "0013"
            assert _hashes(db_url) == hashes and _plain(db_url) == plain
            assert {how for how, _s, _d in rows(db_url).values()} == {0, 1}
            assert L.latest_checkpoint() == signed
            assert verdicts(L.audit(AuditOptions())) == (30, 30, [])
    finally:
        engine.dispose()


def test_ledger_payload_codec_none_writes_plain_rows_and_both_kinds_read(ledger, db_url,
                                                                         monkeypatch):
    ledger.append_many(mix(2))  # codec 1
    monkeypatch.setattr(codec, "_WRITE", [codec.RAW])  # LEDGER_PAYLOAD_CODEC=none
    ledger.append_many(mix(2))
    got = {pid // 8: how for pid, (how, _s, _d) in rows(db_url).items() if pid % 8 == 0}
    assert got == {0: 1, 1: 1, 2: 0, 3: 0}
    assert verdicts(ledger.audit(AuditOptions())) == (4, 4, [])


@pytest.mark.parametrize(("value", "want"), [("", 1), ("deflate", 1), (" NONE ", 0)])
def test_the_codec_setting_is_read_from_the_environment(monkeypatch, value, want):
    monkeypatch.setattr(codec, "_WRITE", [])
    monkeypatch.setenv("LEDGER_PAYLOAD_CODEC", value)
    assert codec.write_codec() == want


def test_a_bad_codec_setting_names_the_variable(monkeypatch):
    from ledger.errors import UsageError

    monkeypatch.setattr(codec, "_WRITE", [])
    monkeypatch.setenv("LEDGER_PAYLOAD_CODEC", "zstd")
    with pytest.raises(UsageError) as err:
        codec.write_codec()
    assert err.value.field == "LEDGER_PAYLOAD_CODEC" and "deflate" in str(err.value)


def test_a_stream_that_would_decode_past_the_bound_does_not_decode(monkeypatch):
    """A stream written behind the ledger's back to exhaust a reader's memory (a small row
    that inflates to gigabytes) is read as its stored bytes, as any undecodable stream."""
    bomb = codec.deflate(b"\x00" * 200_000)
    assert len(bomb) < 2_000  # 100 times smaller than what it decodes to
    monkeypatch.setattr(codec, "MAX_DECODED", 100_000)
    assert codec.decode(codec.DEFLATE_D1, bomb) == bomb
    monkeypatch.setattr(codec, "MAX_DECODED", 200_000)  # exactly the bound: it decodes
    assert codec.decode(codec.DEFLATE_D1, bomb) == b"\x00" * 200_000


def test_a_bad_codec_setting_stops_the_cli_before_anything_is_written(tmp_path):
    db_url = f"sqlite:///{tmp_path / 'l.db'}"
    env = {**__import__("os").environ, "LEDGER_PAYLOAD_CODEC": "lz4"}
    out = subprocess.run([sys.executable, "-m", "ledger", "--db", db_url, "init"],
                         capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 2, out.stderr
    assert "LEDGER_PAYLOAD_CODEC" in out.stderr and "Traceback" not in out.stderr
    assert not (tmp_path / "l.db").exists()


def test_migration_0009_keeps_redactions_as_they_were(db_url, tmp_path):
    """Erased rows stay erased through the rewrite both ways: the audit abstains on the same
    payloads, citing the same redaction, before and after."""
    from ledger.ops.custody import Ask
    from tests.keyrings import ledger_keyring

    with Ledger.init(db_url, origin="test.example/codec") as L:
        subs = mix(6)
        assert all(r.ok for r in L.append_many(subs))
        L.redact(Ask("erasure test"), seqs=[2, 4], payloads=["evidence", "query"],
                 keyring=ledger_keyring(L, tmp_path / "keys"))

        def seen() -> tuple:
            rep = L.audit(AuditOptions())
            return (rep.summary, sorted((a.seq, a.check, a.reason,
                                            a.to_json().get("redaction_seq"))
                                           for a in rep.abstentions), rep.findings)
        before = seen()
    assert before[2] == () and len(before[1]) >= 4
    erased = "SELECT pid FROM payloads WHERE pid IN (17, 19, 33, 35)"  # seqs 2, 4: 1 and 3
    engine = make_engine(db_url)
    try:
        with write_connection(engine) as conn:
            command.downgrade(alembic_config(conn), "0008")
            conn.commit()
        with T.connect(db_url) as conn:  # at 0008: the erased rows did not come back
            assert conn.execute(text(erased)).all() == []
        with Ledger.init(db_url) as L:  # up to the head again
            rep = L.audit(AuditOptions())
            assert (rep.summary, sorted(
                (a.seq, a.check, a.reason, a.to_json().get("redaction_seq"))
                for a in rep.abstentions), rep.findings) == before
    finally:
        engine.dispose()
    with T.connect(db_url) as conn:
        assert conn.execute(text(erased)).all() == []
