"""The demo job: a SQLite ledger with a realistic mix of results, narrated."""

from __future__ import annotations

import json
import shutil
import sqlite3
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

from ledger.core.entry import SLOTS
from ledger.core.note import parse_checkpoint_body, parse_note
from ledger.crypto.keys import Keyring, load_public_keys
from ledger.crypto.tokens import new_es256_key
from ledger.demo.anchors import anchored_demo
from ledger.demo.samples import attested, realistic, rejected_examples
from ledger.demo.tour import write_tour_inputs
from ledger.facade import Ledger
from ledger.ops.audit import AuditOptions
from ledger.ops.custody import Ask, write_report
from ledger.ops.export import ExportOptions
from ledger.report import write_html
from ledger.store.layout import pid
from ledger.verify.export import summary_line as export_line
from ledger.verify.export import verify_export
from ledger.verify.proof import verify_bundle

ISSUER = "did:qwed:node:demo"
DATA_SUBJECT = "user-4711@example.org"


def run_demo(directory: Path) -> Iterator[str]:
    url = f"sqlite:///{directory / 'ledger.db'}"
    ledger = Ledger.init(url, origin="demo.ledger.local/results")
    try:
        yield f"ledger {ledger.meta.ledger_id} ({ledger.meta.origin}) at {url}"
        subs = realistic(60)
        for i, s in enumerate(subs[:6]):
            s["idempotency_key"] = f"demo-{i}"
        for s in [s for s in subs[6:] if "query" in s][:4]:  # one person's requests: the
            s["subject"] = DATA_SUBJECT  # data-subject request erases their queries, evidence
        results = ledger.append_many(subs, producer="demo")
        by_status = Counter(s["result"]["status"] for s in subs)
        by_engine = Counter(s["engine"] for s in subs)
        yield (f"appended {sum(r.ok for r in results)} results in one batch: "
               + ", ".join(f"{k} {v}" for k, v in sorted(by_status.items()))
               + " | engines: " + ", ".join(f"{k} {v}" for k, v in sorted(by_engine.items())))
        replay = ledger.append(subs[0], producer="demo")
        yield (f"retry with idempotency key demo-0 returned the same entry: seq {replay.seq}"
               f" (replayed={replay.replayed})")
        conflict = ledger.append({**subs[1], "idempotency_key": "demo-0"}, producer="demo")
        yield f"same key, other content: rejected ({conflict.error['code']})"  # type: ignore[index]
        for why, bad in rejected_examples():
            res = ledger.append(bad, producer="demo")
            err = res.error or {}
            yield f"rejected ({why}): {err.get('code')} [{err.get('field')}] — quarantined"
        yield from _attestations(ledger)
        head = ledger.head()
        yield f"head: size {head['size']}, hash {head['head_hash']}"
        entry = ledger.get(1)
        yield (f"entry 1: {entry['engine']} {entry['status']} proof_ref {entry['proof_ref']} "
               f"preimage {entry['payloads']['preimage']['text'][:60]!r}")
        yield f"inspect it: {ledger_command()} --db {url} show 1 --format json"
        report = ledger.audit(AuditOptions(record=True, producer="demo", command="ledger demo",
                                           actor="demo"))
        yield f"{report.summary_line()} — recorded as entry {report.recorded_seq}"
        ring = Keyring.load(directory / "ledger-keys")
        if not ring.active(ledger.meta.origin):
            ring.generate(ledger.meta.origin, ledger.clock.now_us())
        yield from _checkpoint_and_proof(ledger, ring, directory)
        yield from _export(ledger, ring, directory)
        yield from _tampered_copy(directory)
        yield from _truncated_copy(directory, ring)
        yield from anchored_demo(ledger, ring, directory)
        yield from _data_subject_request(ledger, ring, directory)
        yield from _html_report_and_console(ledger, ring, directory, url)
        yield from write_tour_inputs(directory / "tour", ledger.clock.now_us() // 1_000_000)
        yield "walk the README's tour from there: cd into it and run the tour's lines"
    finally:
        ledger.close()


def _checkpoint_and_proof(ledger: Ledger, ring: Keyring, directory: Path) -> Iterator[str]:
    note = ledger.checkpoint(ring)
    (directory / "checkpoint.txt").write_text(note, encoding="utf-8")
    cp = parse_checkpoint_body(parse_note(note).text)
    yield (f"signed checkpoint: size {cp.size}, root {cp.root_hash.hex()[:16]}… "
           f"-> {directory / 'checkpoint.txt'} (keep it outside the database)")
    bundle = ledger.prove(1, note)
    path = directory / "proof-1.json"
    path.write_text(json.dumps(bundle, indent=1), encoding="utf-8")
    verified = verify_bundle(path.read_bytes(), load_public_keys(ring.path / "jwks.json"))
    yield (f"inclusion proof of entry 1 verified offline ({len(bundle['inclusion_path'])} "
           f"hashes, signed by {', '.join(verified.signers)}): ledger verify-proof {path} "
           f"--key {ring.path / 'jwks.json'}")


def _export(ledger: Ledger, ring: Keyring, directory: Path) -> Iterator[str]:
    out = directory / "export"
    shutil.rmtree(out, ignore_errors=True)
    m = ledger.export(out, ExportOptions(keys=ring.path))
    yield (f"exported {m['counts']['entries']} entries and {m['counts']['key_events']} key "
           f"event(s) to {out} (checkpoint size {m['checkpoint']['size']}, signed manifest)")
    yield export_line(verify_export(out, ring.path / "jwks.json")) + \
        f" — offline: ledger verify-export {out} --jwks {ring.path / 'jwks.json'}"


def _truncated_copy(directory: Path, ring: Keyring) -> Iterator[str]:
    """Delete the newest entries and move the head back: the chain alone cannot tell."""
    dst = _copy_db(directory, "truncated.db")
    with sqlite3.connect(dst) as c:
        c.execute("DROP TRIGGER entries_no_delete")
        size = c.execute("SELECT size FROM head").fetchone()[0]
        c.execute("DELETE FROM entries WHERE seq >= ?", (size - 3,))
        last = c.execute("SELECT entry_hash, recorded_at FROM entries WHERE seq = ?",
                         (size - 4,)).fetchone()
        c.execute("UPDATE head SET size = ?, head_hash = ?, last_recorded_at = ?",
                  (size - 3, last[0], last[1]))
        c.execute("UPDATE tenant_heads SET size = ?, head_hash = ? WHERE tenant = 'default'",
                  (size - 3, last[0]))
    with Ledger.open(f"sqlite:///{dst}") as t:
        plain = t.audit(AuditOptions())
        kept = t.audit(AuditOptions(checkpoints=(str(directory / "checkpoint.txt"),),
                                         keys=(str(ring.path / "jwks.json"),)))
    yield f"truncated copy {dst.name}: the newest 3 entries deleted and the head moved back"
    yield f"  without the checkpoint: {plain.summary_line()}"
    yield f"  with the kept checkpoint: {kept.summary_line()}"
    for f in kept.findings:
        yield f"  {f.line()}"


def _attestations(ledger: Ledger) -> Iterator[str]:
    key, jwk = new_es256_key()
    kid = f"{ISSUER}#signing-key-v1"
    jwk["kid"] = kid
    events = ledger.trust_issuer(ISSUER, {"keys": [jwk]}, reason="demo issuer",
                                 producer="demo")
    yield f"trusted issuer {ISSUER} (key_event entry {events[0].seq})"
    iat = ledger.clock.now_us() // 1_000_000 - 60
    res = ledger.append_many([attested(i, key, ISSUER, kid, iat) for i in range(5)],
                             producer="demo")
    seqs = [r.seq for r in res if r.ok and r.seq is not None]  # (an ok result has a seq)
    verdicts = {ledger.get(s)["attestation_verdict"] for s in seqs}
    yield f"appended {len(seqs)} attested results (ES256, verdict {', '.join(verdicts)})"
    forged = attested(99, new_es256_key()[0], ISSUER, kid, iat)
    bad = ledger.append(forged, producer="demo")
    yield f"attestation signed by an unknown key under the same kid: rejected " \
          f"({(bad.error or {}).get('code')})"


def _copy_db(directory: Path, name: str) -> Path:
    """A copy of the demo ledger file (its WAL folded in first)."""
    src, dst = directory / "ledger.db", directory / name
    with sqlite3.connect(src) as c:
        c.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    shutil.copyfile(src, dst)
    return dst


def _tampered_copy(directory: Path) -> Iterator[str]:
    dst = _copy_db(directory, "tampered.db")
    with Ledger.open(f"sqlite:///{dst}") as t:
        evidence = t.get(0)["payloads"]["preimage"]["text"]
    with sqlite3.connect(dst) as c:  # what a database superuser could do
        for trigger in ("entries_no_update", "payloads_no_update"):
            c.execute(f"DROP TRIGGER {trigger}")
        c.execute("UPDATE entries SET status = 'VERIFIED' WHERE seq = 3")
        # entry 0's evidence, written back as plain bytes (codec 0)
        c.execute("UPDATE payloads SET codec = 0, data = ? WHERE pid = ?",
                  (evidence.replace('"converged": true', '"converged": false').encode(),
                   pid(0, SLOTS["preimage"])))
    yield f"tampered copy {dst.name}: raw SQL changed entry 3's status and entry 0's evidence"
    with Ledger.open(f"sqlite:///{dst}") as t:
        report = t.audit(AuditOptions())
    yield report.summary_line()
    for f in report.findings:
        yield f"  {f.line()}"


def _data_subject_request(ledger: Ledger, ring: Keyring, directory: Path) -> Iterator[str]:
    """Erase one subject's queries and evidence; show what still verifies, and that a
    payload cannot be deleted behind the ledger's back unnoticed."""
    ask = Ask("GDPR Art. 17 erasure request", "DSR-2026-0001", "dpo@demo.example")
    out = ledger.redact(ask, subject=DATA_SUBJECT, payloads=["query", "evidence"],
                        keyring=ring)
    erased = sum(len(t.erase) for t in out.targets)
    yield (f"data-subject request for {DATA_SUBJECT}: erased {erased} payloads (queries and "
           f"evidence) of {len(out.targets)} entries in redaction entry "
           f"{', '.join(map(str, out.redaction_seqs))}")
    report = ledger.erasure_report(out, ask, ring)
    write_report(directory / "erasure-report.json", report)
    yield (f"signed erasure report -> {directory / 'erasure-report.json'} (checkpoint size "
           f"{report['checkpoint']['size']})")
    audit = ledger.audit(AuditOptions(checkpoints=(str(directory / "checkpoint.txt"),),
                                      keys=(str(ring.path / "jwks.json"),)))
    yield f"  {audit.summary_line()} — and the checkpoint signed before the erasure still verifies"
    victim = 2  # an entry nobody asked to erase
    try:
        with sqlite3.connect(directory / "ledger.db") as c:
            c.execute("DELETE FROM payloads WHERE pid = ?", (pid(victim),))
        yield "  raw DELETE of a payload without a redaction: not refused (unexpected)"
    except sqlite3.DatabaseError as exc:
        yield f"  raw DELETE of a payload without a redaction: refused by the database ({exc})"
    dst = _copy_db(directory, "erased-by-superuser.db")
    with sqlite3.connect(dst) as c:  # a superuser turns the guard off
        c.execute("DROP TRIGGER payloads_no_delete")
        c.execute("DELETE FROM payloads WHERE pid = ?", (pid(victim),))
    with Ledger.open(f"sqlite:///{dst}") as t:
        after = t.audit(AuditOptions())
    yield f"copy {dst.name}: a superuser dropped the trigger and deleted entry {victim}'s result"
    yield f"  {after.summary_line()}"
    for f in after.findings:
        yield f"  {f.line()}"


def _html_report_and_console(ledger: Ledger, ring: Keyring, directory: Path, url: str,
                             ) -> Iterator[str]:
    """A checkpoint of the final ledger, an audit of it written as a self-contained HTML
    report, and how to look at the ledger in the web console."""
    note = directory / "checkpoint-final.txt"
    note.write_text(ledger.checkpoint(ring), encoding="utf-8")
    audit = ledger.audit(AuditOptions(checkpoints=(str(note),),
                                      keys=(str(ring.path / "jwks.json"),)))
    out = directory / "report.html"
    write_html(out, ledger.report_data(audit, title="Demo ledger: audit report",
                                       command="ledger audit"))
    yield f"HTML audit report -> {out} (one self-contained file: open it in a browser, or " \
          "print it to PDF)"
    keys = ring.path
    cmd = ledger_command()
    yield "look at this ledger in the web console (these lines run as they are in a shell):"
    yield f"  {cmd} --db {url} serve --keys {keys} --port 8080 &"
    yield (f"  TOKEN=$({cmd} --db {url} token issue --role auditor --subject you "
           f"--keys {keys})")
    yield '  echo "http://127.0.0.1:8080/console/#token=$TOKEN"   # open this URL in a ' \
          "browser (roles: auditor, developer, agent)"


def ledger_command() -> str:
    """How to run ``ledger`` from here without an activated virtual environment: the
    console script installed beside this interpreter (``.venv/bin/ledger``), relative to the
    working directory when it is below it; plain ``ledger`` when there is none."""
    exe = Path(sys.executable).with_name("ledger")
    if not exe.exists():
        return "ledger"
    try:
        return str(exe.relative_to(Path.cwd()))
    except ValueError:
        return str(exe)
