"""Tenants: a chain per tenant under the one global tree (docs/tenants.md).

Both engines: appends of several tenants (interleaved, and concurrent from threads), the
audit of each tenant's chain, and every tamper an auditor relies on catching -- an entry
deleted, moved to another tenant, duplicated, a tenant head rolled back -- done with raw
SQL behind the ledger's back.
"""

from __future__ import annotations

import json
import random
import threading
from typing import Any

import pytest
from sqlalchemy import text

from ledger.core.entry import body_hash
from ledger.core.note import parse_checkpoint_body, parse_note
from ledger.core.tenant import (
    DEFAULT_TENANT,
    TenantHead,
    extension_line,
    heads_root,
    parse_extension,
    sorted_heads,
    tenant_entry_hash,
    tenant_genesis,
)
from ledger.crypto.keys import Keyring
from ledger.demo.samples import math_verified
from ledger.errors import UsageError
from ledger.facade import Ledger
from ledger.ops.audit import AuditOptions
from tests import tamper


def sub(tag: str) -> dict[str, Any]:
    s = math_verified(random.Random(tag).randrange(10**6), random.Random(tag))
    s["subject"] = tag
    return s


def findings(report: Any) -> list[dict[str, Any]]:
    got = report["findings"] if isinstance(report, dict) else report.to_json()["findings"]
    return list(got)


def codes(report: Any) -> set[str]:
    return {f["code"] for f in findings(report)}


def chain(conn: Any, tenant: str) -> list[Any]:
    return conn.execute(text("SELECT seq, tseq, prev_hash, entry_hash FROM entries "
                             "WHERE tenant = :t ORDER BY seq"), {"t": tenant}).all()


def fill(ledger: Ledger, plan: list[str]) -> list[Any]:
    return [ledger.append(sub(f"{t}-{i}"), tenant=t) for i, t in enumerate(plan)]


PLAN = ["default", "acme", "acme", "globex", "default", "acme", "globex", "globex", "acme"]


def test_tenants_chain_separately_and_audit_clean(db_url):
    with Ledger.init(db_url) as ledger:
        got = fill(ledger, PLAN)
        assert [r.seq for r in got] == list(range(len(PLAN)))
        assert [(r.tenant, r.tseq) for r in got] == [
            ("default", 0), ("acme", 0), ("acme", 1), ("globex", 0), ("default", 1),
            ("acme", 2), ("globex", 1), ("globex", 2), ("acme", 3)]
        lid = ledger.meta.ledger_id
        with ledger.engine.connect() as conn:
            for tenant in ("default", "acme", "globex"):
                rows = chain(conn, tenant)
                prev = tenant_genesis(lid, tenant)
                for i, r in enumerate(rows):
                    assert r.tseq == i and bytes(r.prev_hash) == prev
                    prev = bytes(r.entry_hash)
            heads = {r.tenant: (r.size, bytes(r.head_hash)) for r in conn.execute(
                text("SELECT tenant, size, head_hash FROM tenant_heads"))}
        assert heads == {"default": (2, bytes.fromhex(got[4].entry_hash[7:])),
                         "acme": (4, bytes.fromhex(got[8].entry_hash[7:])),
                         "globex": (3, bytes.fromhex(got[7].entry_hash[7:]))}
        report = ledger.audit()
        assert findings(report) == []
        # the receipt of the default tenant stays what it was before tenants
        assert got[0].to_dict().keys() == {"ok", "seq", "entry_hash", "recorded_at"}


def test_a_bad_tenant_id_is_refused_and_nothing_is_written(db_url):
    with Ledger.init(db_url) as ledger:
        for bad in ("", "Acme", "-x", "a" * 64, "a b", "é", "a/b"):
            with pytest.raises(UsageError) as err:
                ledger.append_many([sub("x")], tenant=bad)
            assert err.value.field == "tenant"
        with ledger.engine.connect() as conn:
            assert conn.execute(text("SELECT count(*) FROM entries")).scalar() == 0


def test_tenants_append_concurrently(db_url):
    """Four threads, two per tenant, appending at once: every entry stored once, each
    tenant's chain gapless in tseq and linked, the audit clean."""
    n = 15
    with Ledger.init(db_url) as ledger:
        errors: list[BaseException] = []

        def work(tenant: str, k: int) -> None:
            try:
                for i in range(n):
                    assert ledger.append(sub(f"{tenant}-{k}-{i}"), tenant=tenant).ok
            except BaseException as exc:  # noqa: BLE001 - reported below
                errors.append(exc)

        threads = [threading.Thread(target=work, args=(t, k))
                   for t in ("north", "south") for k in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == []
        with ledger.engine.connect() as conn:
            for tenant in ("north", "south"):
                rows = chain(conn, tenant)
                assert [r.tseq for r in rows] == list(range(2 * n))
        assert findings(ledger.audit()) == []


# -- tampering ------------------------------------------------------------------------------

def test_a_tenant_entry_deleted_is_caught(db_url):
    with Ledger.init(db_url) as ledger:
        fill(ledger, PLAN)
    with tamper.unlocked(db_url) as conn:
        conn.execute(text("DELETE FROM payloads WHERE pid >= 16 AND pid < 24"))
        conn.execute(text("DELETE FROM entries WHERE seq = 2"))  # acme's tseq 1
    with Ledger.open(db_url) as ledger:
        got = findings(ledger.audit())
    # the hole is the gap's finding; acme's next entry links over it, which the gap explains
    assert [(f["code"], f["seq"]) for f in got] == [("seq_gap", 2)]


def test_a_tenant_entry_deleted_and_the_rest_renumbered_is_caught(db_url):
    """acme's tseq 1 deleted and acme's later entries re-linked over it (every hash of acme
    recomputed, tseq renumbered): no seq gap is left in acme's chain, but the global seq
    gap stays, and the tree of a checkpoint no longer matches."""
    with Ledger.init(db_url) as ledger:
        fill(ledger, PLAN)
        lid = ledger.meta.ledger_id
    with tamper.unlocked(db_url) as conn:
        conn.execute(text("DELETE FROM payloads WHERE pid >= 16 AND pid < 24"))
        conn.execute(text("DELETE FROM entries WHERE seq = 2"))
        prev, tseq = bytes(tamper.row(conn, 1).entry_hash), 1
        for r in chain(conn, "acme")[1:]:
            full = tamper.row(conn, r.seq)
            eh = tenant_entry_hash("acme", prev, r.seq, tseq, full.recorded_at,
                                   bytes(full.body_hash))
            conn.execute(text("UPDATE entries SET tseq = :t, prev_hash = :p, entry_hash = :e "
                              "WHERE seq = :s"), {"t": tseq, "p": prev, "e": eh, "s": r.seq})
            prev, tseq = eh, tseq + 1
        conn.execute(text("UPDATE tenant_heads SET size = :n, head_hash = :h "
                          "WHERE tenant = 'acme'"), {"n": tseq, "h": prev})
    assert lid
    with Ledger.open(db_url) as ledger:
        got = findings(ledger.audit())
    assert ("seq_gap", 2) in [(f["code"], f["seq"]) for f in got]


def test_a_tenant_entry_moved_to_another_tenant_is_caught(db_url):
    with Ledger.init(db_url) as ledger:
        fill(ledger, PLAN)
    for frm, to in (("acme", "globex"), ("acme", "default"), ("default", "acme")):
        seq = PLAN.index(frm)
        with tamper.unlocked(db_url) as conn:
            conn.execute(text("UPDATE entries SET tenant = :t WHERE seq = :s"),
                         {"t": to, "s": seq})
        with Ledger.open(db_url) as ledger:
            got = findings(ledger.audit())
        assert any(f["code"] == "entry_hash_mismatch" and f["seq"] == seq for f in got), got
        with tamper.unlocked(db_url) as conn:
            conn.execute(text("UPDATE entries SET tenant = :t WHERE seq = :s"),
                         {"t": frm, "s": seq})
    with Ledger.open(db_url) as ledger:
        assert findings(ledger.audit()) == []


def test_a_tenant_entry_moved_and_rehashed_is_caught(db_url):
    """Moved to another tenant with its hash recomputed for the new tenant (as if by the
    operator): the two chains no longer hold together."""
    with Ledger.init(db_url) as ledger:
        fill(ledger, PLAN)
        lid = ledger.meta.ledger_id
    seq = 5  # acme tseq 2 -> globex
    with tamper.unlocked(db_url) as conn:
        r = tamper.row(conn, seq)
        prev = bytes(chain(conn, "globex")[0].entry_hash)
        eh = tenant_entry_hash("globex", prev, seq, 1, r.recorded_at, bytes(r.body_hash))
        conn.execute(text("UPDATE entries SET tenant = 'globex', tseq = 1, prev_hash = :p, "
                          "entry_hash = :e WHERE seq = :s"), {"p": prev, "e": eh, "s": seq})
    assert lid
    with Ledger.open(db_url) as ledger:
        got = findings(ledger.audit())
    cs = {f["code"] for f in got}
    assert "tenant_seq_mismatch" in cs
    assert cs & {"hash_not_committed", "broken_link"}


def test_a_duplicated_tenant_entry_is_caught(db_url):
    """An acme entry copied to the end of the ledger, hashed as if appended there under
    the same tseq, the heads moved along: a fork of acme's chain."""
    with Ledger.init(db_url) as ledger:
        fill(ledger, PLAN)
    with tamper.unlocked(db_url) as conn:
        r = tamper.row(conn, 2)  # acme tseq 1
        seq = len(PLAN)
        eh = tenant_entry_hash("acme", bytes(r.prev_hash), seq, 1, r.recorded_at + 10**6,
                               body_hash(bytes(r.envelope)))
        cols = dict(r._mapping)
        cols.update(seq=seq, recorded_at=r.recorded_at + 10**6, entry_hash=eh,
                    idempotency_key=None)
        names = ", ".join(cols)
        conn.execute(text(f"INSERT INTO entries ({names}) VALUES "
                          f"({', '.join(':' + k for k in cols)})"), cols)
        conn.execute(text("UPDATE head SET size = :n, head_hash = :h"), {"n": seq + 1, "h": eh})
    with Ledger.open(db_url) as ledger:
        got = findings(ledger.audit())
    cs = {f["code"] for f in got}
    assert "tenant_seq_mismatch" in cs and cs & {"hash_not_committed", "broken_link"}, got
    assert "time_reversed" not in cs


def test_a_tenant_head_rolled_back_is_caught(db_url):
    with Ledger.init(db_url) as ledger:
        got = fill(ledger, PLAN)
    with tamper.connect(db_url) as conn:
        conn.execute(text("UPDATE tenant_heads SET size = 2, head_hash = :h "
                          "WHERE tenant = 'acme'"), {"h": bytes.fromhex(got[2].entry_hash[7:])})
    with Ledger.open(db_url) as ledger:
        got2 = findings(ledger.audit())
    assert [f["code"] for f in got2] == ["tenant_head_mismatch"]


def test_the_default_tenant_keeps_the_single_chain_format(db_url):
    """A ledger that only ever had the default tenant is the single-chain ledger: every
    entry links to the one before it with the v1 link."""
    with Ledger.init(db_url) as ledger:
        fill(ledger, ["default"] * 4)
        lid = ledger.meta.ledger_id
        with ledger.engine.connect() as conn:
            rows = chain(conn, DEFAULT_TENANT)
    prev = tenant_genesis(lid, DEFAULT_TENANT)
    for r in rows:
        assert bytes(r.prev_hash) == prev
        prev = bytes(r.entry_hash)
    assert [r.seq for r in rows] == [r.tseq for r in rows] == [0, 1, 2, 3]


# -- checkpoints ------------------------------------------------------------------------------

def _checkpoint(ledger: Ledger, tmp_path: Any) -> tuple[str, Any]:
    ring = Keyring.load(tmp_path / "keys")
    if not ring.active(ledger.meta.origin):
        ring.generate(ledger.meta.origin, ledger.clock.now_us())
    note = ledger.checkpoint(ring)
    path = tmp_path / f"cp-{len(list(tmp_path.glob('cp-*')))}.txt"
    path.write_text(note, encoding="utf-8")
    return note, path


def test_a_checkpoint_commits_to_every_tenant_head(db_url, tmp_path):
    with Ledger.init(db_url) as ledger:
        fill(ledger, ["default", "default"])
        note, _ = _checkpoint(ledger, tmp_path)
        cp = parse_checkpoint_body(parse_note(note).text)
        assert cp.extensions == ()  # the default tenant alone: the checkpoint of old
        got = fill(ledger, PLAN)
        note, path = _checkpoint(ledger, tmp_path)
        cp = parse_checkpoint_body(parse_note(note).text)
        heads = sorted_heads([
            TenantHead("default", 4, bytes.fromhex(got[4].entry_hash[7:])),
            TenantHead("acme", 4, bytes.fromhex(got[8].entry_hash[7:])),
            TenantHead("globex", 3, bytes.fromhex(got[7].entry_hash[7:]))])
        assert cp.extensions == (extension_line(heads),)
        assert parse_extension(cp.extensions) == (3, heads_root(heads))
        report = ledger.audit(AuditOptions(checkpoints=(str(path),)))
        assert findings(report) == []


def test_a_tenant_rolled_back_under_a_checkpoint_is_caught(db_url, tmp_path):
    """acme's last entry re-labelled as globex's, every hash recomputed so that each chain
    holds together and the heads follow: the plain audit cannot tell, the checkpoint can."""
    with Ledger.init(db_url) as ledger:
        fill(ledger, ["acme", "acme", "default"])
        lid = ledger.meta.ledger_id
        _, path = _checkpoint(ledger, tmp_path)
    with tamper.unlocked(db_url) as conn:
        r = tamper.row(conn, 1)
        eh = tenant_entry_hash("globex", tenant_genesis(lid, "globex"), 1, 0, r.recorded_at,
                               bytes(r.body_hash))
        conn.execute(text("UPDATE entries SET tenant = 'globex', tseq = 0, prev_hash = :p, "
                          "entry_hash = :e WHERE seq = 1"),
                     {"p": tenant_genesis(lid, "globex"), "e": eh})
        conn.execute(text("UPDATE tenant_heads SET size = 1, head_hash = :h "
                          "WHERE tenant = 'acme'"), {"h": bytes(tamper.row(conn, 0).entry_hash)})
        conn.execute(text("INSERT INTO tenant_heads (tenant, size, head_hash) "
                          "VALUES ('globex', 1, :h)"), {"h": eh})
    with Ledger.open(db_url) as ledger:
        assert findings(ledger.audit()) == []
        assert "checkpoint_inconsistent" in codes(
            ledger.audit(AuditOptions(checkpoints=(str(path),))))


def test_a_tenant_left_out_of_the_heads_is_caught(db_url, tmp_path):
    """The tenant_heads row of acme deleted before a checkpoint is signed: the checkpoint
    commits to heads without acme; the audit finds the row missing and, given the
    checkpoint, that its heads are not the entries'."""
    with Ledger.init(db_url) as ledger:
        fill(ledger, ["acme", "globex", "default"])
    with tamper.connect(db_url) as conn:
        conn.execute(text("DELETE FROM tenant_heads WHERE tenant = 'acme'"))
    with Ledger.open(db_url) as ledger:
        note, path = _checkpoint(ledger, tmp_path)
        assert parse_extension(parse_checkpoint_body(parse_note(note).text).extensions)[0] == 2
        assert [f["code"] for f in findings(ledger.audit())] == ["tenant_head_mismatch"]
        assert {"tenant_heads_mismatch", "tenant_head_mismatch"} == codes(
            ledger.audit(AuditOptions(checkpoints=(str(path),))))


# -- ledger audit --tenant ------------------------------------------------------------------------

def test_a_tenant_audit_reads_its_chain_only_and_passes(db_url, tmp_path):
    with Ledger.init(db_url) as ledger:
        fill(ledger, PLAN)
        _checkpoint(ledger, tmp_path)
        for tenant, n in (("acme", 4), ("globex", 3), ("default", 2), ("nobody", 0)):
            report = ledger.audit_tenant(tenant)
            assert findings(report) == [] and report.outcome == "passed", tenant
            assert report.tenant == tenant and report.summary.rows == n
            assert report.to_json()["tenant"] == tenant


def test_a_tenant_audit_catches_its_own_tampering_and_not_the_others(db_url, tmp_path):
    with Ledger.init(db_url) as ledger:
        fill(ledger, PLAN)
        _checkpoint(ledger, tmp_path)
    with tamper.unlocked(db_url) as conn:
        conn.execute(text("UPDATE entries SET recorded_at = recorded_at + 1 WHERE seq = 5"))
    with Ledger.open(db_url) as ledger:
        acme = {(f["code"], f["seq"]) for f in findings(ledger.audit_tenant("acme"))}
        assert ("entry_hash_mismatch", 5) in acme
        assert findings(ledger.audit_tenant("globex")) == []


def test_a_tenant_entry_rehashed_is_not_the_leaf_of_the_tree(db_url, tmp_path):
    """acme's last entry rewritten with a recomputed hash (and its head moved): its own chain
    holds, but the tree built before holds the old leaf."""
    with Ledger.init(db_url) as ledger:
        fill(ledger, PLAN)
        lid = ledger.meta.ledger_id
        _checkpoint(ledger, tmp_path)
    with tamper.unlocked(db_url) as conn:
        r = tamper.row(conn, 8)  # acme tseq 3
        eh = tenant_entry_hash("acme", bytes(r.prev_hash), 8, 3, r.recorded_at + 1,
                               bytes(r.body_hash))
        conn.execute(text("UPDATE entries SET recorded_at = :t, entry_hash = :e WHERE seq = 8"),
                     {"t": r.recorded_at + 1, "e": eh})
        conn.execute(text("UPDATE tenant_heads SET head_hash = :e WHERE tenant = 'acme'"),
                     {"e": eh})
    assert lid
    with Ledger.open(db_url) as ledger:
        got = {(f["code"], f["seq"]) for f in findings(ledger.audit_tenant("acme"))}
    assert ("tenant_not_in_tree", 8) in got and ("tenant_heads_mismatch", 8) in got


def test_ledger_audit_tenant_on_the_command_line(db_url, tmp_path):
    from click.testing import CliRunner

    from ledger.cli.main import cli

    with Ledger.init(db_url) as ledger:
        fill(ledger, PLAN)
    runner = CliRunner()
    ok = runner.invoke(cli, ["--db", db_url, "audit", "--tenant", "acme", "--json-report", "-"])
    assert ok.exit_code == 0, ok.output
    assert '"tenant": "acme"' in ok.output
    bad = runner.invoke(cli, ["--db", db_url, "audit", "--tenant", "Acme"])
    assert bad.exit_code == 2 and "tenant" in bad.output
    mixed = runner.invoke(cli, ["--db", db_url, "audit", "--tenant", "acme", "--from", "3"])
    assert mixed.exit_code == 2 and "--from" in mixed.output


def test_ledger_export_tenant_refuses_hostile_input(db_url, tmp_path):
    from click.testing import CliRunner

    from ledger.cli.main import cli

    with Ledger.init(db_url) as ledger:
        fill(ledger, PLAN)
        Keyring.load(tmp_path / "keys").generate(ledger.meta.origin, ledger.clock.now_us())
    runner = CliRunner()
    base = ["--db", db_url, "export", "--keys", str(tmp_path / "keys")]
    for args in (["--tenant", "Acme"], ["--tenant", "a" * 64], ["--tenant", "../x"]):
        got = runner.invoke(cli, [*base, "--out", str(tmp_path / "bad"), *args])
        assert got.exit_code == 2 and "tenant" in got.output, got.output
        assert "Traceback" not in got.output and not (tmp_path / "bad" / "manifest.json").exists()
    ok = runner.invoke(cli, [*base, "--out", str(tmp_path / "ok"), "--tenant", "acme"])
    assert ok.exit_code == 0, ok.output

    # an empty tenant: its absence proof, unless withheld
    for flag, has in (([], True), (["--no-absence-proof"], False)):
        out = tmp_path / f"empty-{has}"
        got = runner.invoke(cli, [*base, "--out", str(out), "--tenant", "zulu", *flag])
        assert got.exit_code == 0, got.output
        sec = json.loads((out / "manifest.json").read_text())["tenant"]
        assert ("absence" in sec) is has and sec["count"] == 0
