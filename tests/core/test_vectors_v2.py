"""The format v2 vectors (tests/vectors/entries_v2.json, scripts/gen-vectors-v2),
recomputed with hashlib and json only -- what an independent verifier does."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
V = json.loads((ROOT / "tests" / "vectors" / "entries_v2.json").read_text(encoding="utf-8"))
TAG = b"ledger.payload.v2\x00"


def h(b: bytes) -> bytes:
    return hashlib.sha256(b).digest()


def test_every_v2_byte_recomputes():
    assert bytes.fromhex(V["payload_tag_hex"]) == TAG
    prev = h(b"ledger.genesis.v1\x00" + V["ledger_id"].encode())
    assert prev.hex() == V["genesis_hash"]
    for e in V["entries"]:
        env = json.loads(e["envelope"])
        assert env["v"] == 2 and env["kind"] == e["kind"]
        assert json.dumps(env, sort_keys=True, separators=(",", ":"),
                          ensure_ascii=False).encode() == bytes.fromhex(e["envelope_hex"])
        for name, p in e["payloads"].items():
            if p is None:
                assert env["payloads"][name] is None
                continue
            data = bytes.fromhex(p["hex"])
            if e["kind"] == "result":  # the hiding commitment
                got = h(TAG + bytes.fromhex(p["salt_hex"]) + data)
            else:  # ledger-internal documents: a plain digest
                got = h(data)
            assert env["payloads"][name] == p["digest"] == "sha256:" + got.hex()
        if e["kind"] == "result":
            assert "subject" not in env
            if env["status"] == "VERIFIED":
                pre = bytes.fromhex(e["payloads"]["preimage"]["hex"])
                assert "sha256:" + h(pre).hex() == env["proof_ref"]
        body = h(b"ledger.envelope.v1\x00" + bytes.fromhex(e["envelope_hex"]))
        assert body.hex() == e["body_hash"] and e["prev_hash"] == prev.hex()
        link = b"ledger.entry.v1\x00" + prev + e["seq"].to_bytes(8, "big") + \
            e["recorded_at_us"].to_bytes(8, "big") + body
        assert link.hex() == e["link_preimage_hex"] and h(link).hex() == e["entry_hash"]
        prev = h(link)
    assert V["head"] == {"size": len(V["entries"]), "head_hash": prev.hex()}
    request = json.loads(bytes.fromhex(V["entries"][-1]["payloads"]["request"]["hex"]))
    assert request["format"] == "ledger-redaction/1"
    assert [(r["seq"], r["payload"], r["redaction_seq"]) for r in V["redaction_map"]] == [
        (t["seq"], n, 3) for t in request["targets"] for n in t["payloads"]]


def test_the_committed_vectors_are_what_the_generator_writes():
    got = subprocess.run([sys.executable, str(ROOT / "scripts" / "gen-vectors-v2"), "--check"],
                         capture_output=True, text=True, check=False)
    assert got.returncode == 0, got.stderr


def test_docs_format_md_shows_the_generated_v2_vectors():
    text = (ROOT / "docs" / "format.md").read_text(encoding="utf-8")
    begin = "<!-- BEGIN GENERATED v2 (scripts/gen-vectors-v2 --markdown) -->\n"
    block = text[text.index(begin) + len(begin):text.index("<!-- END GENERATED v2 -->")]
    got = subprocess.run([sys.executable, str(ROOT / "scripts" / "gen-vectors-v2"),
                          "--markdown"], capture_output=True, text=True, check=True)
    assert block == got.stdout
