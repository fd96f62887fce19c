"""The log asks two real witness processes and a real TSA (SQLite and PostgreSQL)."""

from __future__ import annotations

import socket
import threading
import time

from ledger import Ledger
from ledger.core.cosignature import parse_vkey
from ledger.core.note import parse_checkpoint_body, parse_note
from ledger.crypto.cosign import check_cosignatures
from ledger.crypto.keys import known_keys
from ledger.crypto.note_sign import verify_note
from ledger.crypto.timestamp import load_tsa_trust
from ledger.demo.samples import realistic
from ledger.ops.checkpoint import (
    AnchorConfig,
    WitnessEndpoint,
    latest_cosigned_note,
    make_anchored_checkpoint,
    make_checkpoint,
    timestamps_of,
)
from ledger.store.anchors import last_cosigned_size
from ledger.witness.local_tsa import POLICY
from tests.witness.conftest import ORIGIN


def _config(witnesses, tsa=None, timeout=5.0):
    return AnchorConfig(tuple(WitnessEndpoint(parse_vkey(w.vkey), w.url) for w in witnesses),
                        tsa.url if tsa else None,
                        load_tsa_trust(tsa.ca_file, POLICY) if tsa else None, timeout)


def _keys(witnesses):
    return [parse_vkey(w.vkey) for w in witnesses]


def test_two_witnesses_and_a_tsa(ledger, keyring, witnesses, tsa):
    ledger.append_many(realistic(10))
    report = make_anchored_checkpoint(ledger.ctx, keyring, _config(witnesses, tsa))
    assert sorted(report.cosigned) == ["witness.example/w1", "witness.example/w2"]
    assert report.failed == {} and report.timestamp is not None and report.size == 10
    verify_note(report.note, known_keys(keyring.public_keys(), ORIGIN))  # still a log note
    assert set(check_cosignatures(report.note, _keys(witnesses)).valid) == {
        "witness.example/w1", "witness.example/w2"}
    assert latest_cosigned_note(ledger.ctx) == report.note
    [token] = timestamps_of(ledger.ctx, 10)
    assert token["tsa"] == tsa.url and token["nonce"]
    ledger.append_many(realistic(5, start=10))
    again = make_anchored_checkpoint(ledger.ctx, keyring, _config(witnesses, tsa))
    assert len(again.cosigned) == 2 and again.size == 15  # with a proof from 10


def test_an_unreachable_witness_is_reported_and_retried_next_time(ledger, keyring, witnesses):
    w1, w2 = witnesses
    ledger.append_many(realistic(4))
    assert len(make_anchored_checkpoint(ledger.ctx, keyring, _config(witnesses)).cosigned) == 2
    w2.stop()
    ledger.append_many(realistic(4, start=4))
    report = make_anchored_checkpoint(ledger.ctx, keyring, _config(witnesses, timeout=2))
    assert report.cosigned == [w1.name] and set(report.failed) == {w2.name}
    assert last_cosigned_size(ledger.engine, w2.name) == 4
    ledger.append_many(realistic(4, start=8))  # appends go on
    w2.start()
    report = make_anchored_checkpoint(ledger.ctx, keyring, _config(witnesses))
    assert sorted(report.cosigned) == [w1.name, w2.name]  # w2 with a proof 4 -> 12
    assert last_cosigned_size(ledger.engine, w2.name) == 12


def test_a_slow_witness_is_bounded_by_the_timeout(ledger, keyring, witnesses):
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)  # accepts connections, never answers
    try:
        slow = WitnessEndpoint(parse_vkey(witnesses[0].vkey),
                               f"http://127.0.0.1:{silent.getsockname()[1]}")
        ledger.append_many(realistic(3))
        started = time.monotonic()
        report = make_anchored_checkpoint(ledger.ctx, keyring, AnchorConfig((slow,), timeout_s=0.5))
        assert time.monotonic() - started < 5
        assert set(report.failed) == {witnesses[0].name} and report.cosigned == []
    finally:
        silent.close()


def test_appends_are_not_blocked_while_witnesses_are_asked(ledger, keyring, witnesses):
    ledger.append_many(realistic(3))
    done = threading.Event()
    result = {}

    def anchor():
        result["r"] = make_anchored_checkpoint(ledger.ctx, keyring, _config(witnesses))
        done.set()

    t = threading.Thread(target=anchor)
    t.start()
    ledger.append_many(realistic(3, start=3))
    t.join(30)
    assert done.is_set() and len(result["r"].cosigned) == 2


def test_a_rewritten_history_is_refused_by_both_witnesses(ledger, keyring, witnesses,
                                                          tmp_path):
    ledger.append_many(realistic(6))
    assert len(make_anchored_checkpoint(ledger.ctx, keyring, _config(witnesses)).cosigned) == 2
    with Ledger.init(f"sqlite:///{tmp_path / 'rewritten.db'}", origin=ORIGIN) as fork:
        fork.append_many(realistic(8, start=50))
        report = make_anchored_checkpoint(fork.ctx, keyring, _config(witnesses))
    assert report.cosigned == [] and set(report.failed) == {w.name for w in witnesses}
    assert all("422" in why for why in report.failed.values())
    cp = parse_checkpoint_body(parse_note(report.note).text)
    assert cp.size == 8 and check_cosignatures(report.note, _keys(witnesses)).valid == {}


def test_a_witness_ahead_of_the_log_is_a_conflict(ledger, keyring, witnesses, tmp_path):
    ledger.append_many(realistic(6))
    make_anchored_checkpoint(ledger.ctx, keyring, _config(witnesses))
    with Ledger.init(f"sqlite:///{tmp_path / 'behind.db'}", origin=ORIGIN) as old:
        old.append_many(realistic(3))
        make_checkpoint(old.ctx, keyring)
        report = make_anchored_checkpoint(old.ctx, keyring, _config(witnesses))
    assert all("larger tree" in why for why in report.failed.values())


def test_another_root_at_the_size_a_witness_holds_is_reported(ledger, keyring, witnesses,
                                                             tmp_path):
    ledger.append_many(realistic(6))
    assert len(make_anchored_checkpoint(ledger.ctx, keyring, _config(witnesses)).cosigned) == 2
    with Ledger.init(f"sqlite:///{tmp_path / 'same-size.db'}", origin=ORIGIN) as fork:
        fork.append_many(realistic(6, start=50))  # the same size, another history
        report = make_anchored_checkpoint(fork.ctx, keyring, _config(witnesses))
    assert report.cosigned == [] and set(report.failed) == {w.name for w in witnesses}
    assert all("422" in why and "another root" in why for why in report.failed.values())
