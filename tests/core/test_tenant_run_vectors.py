"""The recorded runs of one tenant (tests/vectors/tenant_runs.json,
scripts/gen-vectors-tenant-runs) recomputed from docs/format.md §10.2, §10.4 and §11 with
hashlib and json only -- what an independent verifier does -- and compared with the file
and with what docs/format.md §10.6 prints."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
V = json.loads((ROOT / "tests" / "vectors" / "tenant_runs.json").read_text(encoding="utf-8"))
BASE = json.loads((ROOT / "tests" / "vectors" / "tenants.json").read_text(encoding="utf-8"))
DOC = (ROOT / "docs" / "format.md").read_text(encoding="utf-8")
BEGIN = "<!-- BEGIN GENERATED tenant-runs (scripts/gen-vectors-tenant-runs --markdown) -->\n"
END = "<!-- END GENERATED tenant-runs -->"
AUDIT_RUN_3 = {"format", "tenant", "range", "summary", "findings", "abstentions", "redacted",
               "outcome", "head_hash", "report_digest", "finished_at"}
REVERIFY_RUN_2 = {"format", "tenant", "run_id", "resumed", "range", "filters", "limits",
                  "summary", "by_engine", "reexecutors", "workers", "worker_restarts",
                  "outcome", "head_hash", "outcomes_digest", "started_at", "finished_at"}
REVERIFY_COPIED = ("run_id", "resumed", "range", "filters", "summary", "by_engine",
                   "reexecutors", "workers", "worker_restarts", "outcome", "started_at",
                   "finished_at", "tenant")


def sha(b: bytes) -> str:
    return hashlib.sha256(b).hexdigest()


def canonical(obj: Any) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode()


def tenant_link(tenant: str, prev: str, seq: int, tseq: int, t: int, body: str) -> str:
    tb = tenant.encode("ascii")
    return sha(b"ledger.entry.tenant.v1\x00" + bytes.fromhex(prev) + seq.to_bytes(8, "big")
               + tseq.to_bytes(8, "big") + t.to_bytes(8, "big") + bytes([len(tb)]) + tb
               + bytes.fromhex(body))


def check_entry(e: dict[str, Any], doc: dict[str, Any], fields: dict[str, Any]) -> None:
    data = e["document"].encode("ascii")
    assert canonical(json.loads(data)) == data and json.loads(data) == doc
    assert e["document_digest"] == "sha256:" + sha(data)
    envelope = {"v": 1, "ledger": V["ledger_id"], "kind": e["kind"], **fields,
                "payloads": {"report": "sha256:" + sha(data)}}
    assert canonical(envelope) == e["envelope"].encode("ascii")
    assert e["body_hash"] == sha(b"ledger.envelope.v1\x00" + e["envelope"].encode("ascii"))
    assert e["entry_hash"] == tenant_link(e["tenant"], e["prev_hash"], e["seq"], e["tseq"],
                                          e["recorded_at_us"], e["body_hash"])


def test_the_tenant_audit_run_entry() -> None:
    acme = [e for e in BASE["entries"] if e["tenant"] == "acme"]
    report, a = V["audit_report"], V["audit_run"]
    assert report["tenant"] == "acme" and report["range"] == {"start": 0, "end": 7}
    assert canonical(report).decode() == V["audit_report_serialized"]
    doc = {"format": "ledger-audit-run/3", "tenant": report["tenant"],
           "range": report["range"], "summary": report["summary"],
           "findings": len(report["findings"]), "abstentions": len(report["abstentions"]),
           "redacted": sum(x["reason"] == "redacted" for x in report["abstentions"]),
           "outcome": report["outcome"], "head_hash": "sha256:" + acme[-1]["entry_hash"],
           "report_digest": "sha256:" + sha(canonical(report)),
           "finished_at": report["finished_at"]}
    assert set(doc) == AUDIT_RUN_3
    assert (a["seq"], a["tseq"], a["prev_hash"]) == (7, len(acme), acme[-1]["entry_hash"])
    check_entry(a, doc, {"outcome": "passed", "producer": "audit-cron"})


def test_the_tenant_reverify_run_entry() -> None:
    report, r, a = V["reverify_report"], V["reverify_run"], V["audit_run"]
    assert report["range"]["end"] == 8 and report["tenant"] == "acme"
    doc = {k: report[k] for k in REVERIFY_COPIED}
    lim = report["limits"]
    doc.update(format="ledger-reverify-run/2", head_hash="sha256:" + a["entry_hash"],
               limits={"time_limit_ms": round(lim["time_limit_s"] * 1000),
                       "memory_mb": lim["memory_mb"], "hash_seed": lim["hash_seed"]},
               outcomes_digest="sha256:" + sha(canonical(report["outcomes"])))
    assert set(doc) == REVERIFY_RUN_2
    assert (r["seq"], r["tseq"], r["prev_hash"]) == (8, a["tseq"] + 1, a["entry_hash"])
    check_entry(r, doc, {"outcome": "not_reexecutable", "producer": "audit-cron"})


def test_the_file_and_the_doc_show_the_generated_vectors() -> None:
    gen = ROOT / "scripts" / "gen-vectors-tenant-runs"
    check = subprocess.run([sys.executable, str(gen), "--check"], capture_output=True,
                           text=True)
    assert check.returncode == 0, check.stdout + check.stderr
    md = subprocess.run([sys.executable, str(gen), "--markdown"], capture_output=True,
                        text=True, check=True).stdout
    assert DOC[DOC.index(BEGIN) + len(BEGIN):DOC.index(END)] == md
