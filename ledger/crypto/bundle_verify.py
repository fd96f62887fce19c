"""Offline verification of an export bundle (format ``ledger-export/1``, docs/export.md);
no database.

The manifest JWT and the checkpoint note are checked against the verifier's trusted keys
(:mod:`ledger.crypto.bundle_sign`); the rows go through the per-row audit checks
(:mod:`ledger.crypto.bundle_walk`), each run of them proven against the checkpoint by
its interval's inclusion proof (:mod:`ledger.crypto.bundle_proof`); then the manifest's
file digests and counts are compared with what was read.  Every finding names the
bundle file and, where there is one, the seq; the report is that of ``ledger audit``.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from pathlib import Path
from typing import Any

from ledger.core.audit import DELETED, PAYLOAD_MODIFIED, SIGNATURE_INVALID, TRUNCATED, outcome
from ledger.core.bundle import (
    CHECKPOINT,
    ENTRIES,
    EXPORT_FORMAT,
    JWKS,
    KEY_EVENTS,
    LISTED_FILES,
    MANIFEST,
    MANIFEST_JWT,
    dump_line,
    unique_keys,
)
from ledger.core.note import Checkpoint
from ledger.core.policy import Policy
from ledger.crypto.bundle_proof import ProofCursor
from ledger.crypto.bundle_sign import check_jwt, check_note
from ledger.crypto.bundle_walk import RowWalk
from ledger.crypto.keys import PublicKeyRef, load_public_keys
from ledger.crypto.trust import TrustStore, check_attestation
from ledger.errors import LedgerError, UsageError

REPORT_FORMAT = "ledger-export-verification/1"
MAX_SMALL_FILE = 16 * 1024 * 1024


class Verifier:
    """One verification of one bundle directory; :meth:`run` returns the report."""

    def __init__(self, directory: str | Path, trusted: list[PublicKeyRef] | None,
                 policy: Policy, check_attestations: bool = True) -> None:
        self.dir, self.trusted, self.policy = Path(directory), trusted, policy
        self.check_attestations = check_attestations
        self.findings: list[dict[str, Any]] = []
        self.abstentions: list[dict[str, Any]] = []
        self.hashers: dict[str, Any] = {}
        self.signatures: dict[str, str] = {}
        self.checkpoint: Checkpoint | None = None
        self.manifest: dict[str, Any] = {}
        self.tally: Counter = Counter()
        self.events: Counter = Counter()
        self.counts: dict[str, Counter] = {"by_status": Counter(), "by_kind": Counter()}
        self.store = TrustStore()

    # -- bookkeeping ------------------------------------------------------------------
    def finding(self, code: str, cls: str, message: str, file: str, seq: int | None = None,
                expected: Any = None, actual: Any = None, pair: str | None = None) -> None:
        """``pair``: the other file of a disagreement (an entries file and proofs.jsonl);
        the finding is moved to whichever of the two no longer has its signed digest."""
        f = {"code": code, "seq": seq, "class": cls, "message": message,
             "expected": expected, "actual": actual, "file": file}
        if pair is not None:
            f["_pair"] = pair
        self.findings.append(f)

    def abstain(self, check: str, reason: str, message: str, file: str,
                seq: int | None = None) -> None:
        self.abstentions.append({"seq": seq, "check": check, "reason": reason,
                                 "message": message, "file": file})

    def hasher(self, name: str) -> Any:
        self.hashers[name] = h = hashlib.sha256()
        self.hashers[name + ":size"] = 0
        return h

    def _small(self, name: str) -> bytes | None:
        path = self.dir / name
        if not path.is_file():
            self.finding("file_missing", DELETED, f"{name} is missing", name)
            return None
        with open(path, "rb") as fh:
            data = fh.read(MAX_SMALL_FILE + 1)
        if len(data) > MAX_SMALL_FILE:
            self.finding("file_too_large", PAYLOAD_MODIFIED, f"{name} is too large", name)
            return None
        self.hasher(name).update(data)
        return data

    # -- the run ----------------------------------------------------------------------
    def run(self) -> dict[str, Any]:
        if not self.dir.is_dir():
            raise UsageError(f"{self.dir} is not a directory", code="no_bundle", field="dir")
        bundle_keys = self._bundle_keys()
        keys = self.trusted if self.trusted is not None else bundle_keys
        self._manifest(keys)
        self._checkpoint(keys)
        cursor = ProofCursor(self)
        rows = RowWalk(self)
        rows.walk(KEY_EVENTS, cursor, self.events, None)
        judge = self._judge() if self.check_attestations else None
        rows.walk(ENTRIES, cursor, self.tally, judge)
        cursor.drain()
        rows.check_csv()
        self._file_digests()
        self._counts()
        return self._report()

    def _bundle_keys(self) -> list[PublicKeyRef]:
        if self._small(JWKS) is None:
            return []
        try:
            return load_public_keys(self.dir / JWKS)
        except (LedgerError, ValueError) as exc:  # keys.py lets binascii.Error through
            self.finding("jwks_malformed", PAYLOAD_MODIFIED, str(exc), JWKS)
            return []

    def _manifest(self, keys: list[PublicKeyRef]) -> None:
        token, body = self._small(MANIFEST_JWT), self._small(MANIFEST)
        claims = None
        if token is not None:
            disp, code, msg, claims = check_jwt(token, keys, self.trusted is not None)
            self._signature("manifest", disp, code, msg, MANIFEST_JWT)
        if body is None:
            return
        digest = "sha256:" + hashlib.sha256(body).hexdigest()
        if claims is not None and claims.get("manifest_sha256") != digest:
            self.finding("manifest_digest_mismatch", PAYLOAD_MODIFIED, "manifest.json does "
                         "not hash to the signed manifest_sha256", MANIFEST,
                         expected=claims.get("manifest_sha256"), actual=digest)
        try:
            doc = json.loads(body, object_pairs_hook=unique_keys)
            if not isinstance(doc, dict) or doc.get("format") != EXPORT_FORMAT:
                raise ValueError(f"format is not {EXPORT_FORMAT}")
            if body != dump_line(doc):
                raise ValueError("not in canonical form")
            for key in ("ledger_id", "origin", "range", "counts", "checkpoint", "files",
                        "filters"):
                if key not in doc:
                    raise ValueError(f"{key} is missing")
        except (ValueError, RecursionError) as exc:
            self.finding("manifest_malformed", PAYLOAD_MODIFIED, str(exc), MANIFEST)
            return
        self.manifest = doc
        if claims is not None and (claims.get("sub"), claims.get("iss")) != (
                doc["ledger_id"], doc["origin"]):
            self.finding("manifest_claims_mismatch", PAYLOAD_MODIFIED, "the JWT's sub/iss are "
                         "not the manifest's ledger_id/origin", MANIFEST_JWT)

    def _signature(self, what: str, disp: str, code: str, msg: str, file: str) -> None:
        self.signatures[what] = disp
        if disp == "failed":
            self.finding(code, SIGNATURE_INVALID, msg, file)
        elif disp == "abstained":
            self.abstain(f"{what}_signature", code, msg, file)

    def _checkpoint(self, keys: list[PublicKeyRef]) -> None:
        data = self._small(CHECKPOINT)
        if data is None:
            return
        disp, code, msg, cp = check_note(data, keys, self.trusted is not None)
        self._signature("checkpoint", disp, code, msg, CHECKPOINT)
        self.checkpoint = cp
        want = self.manifest.get("checkpoint") or {}
        if cp is not None and (want.get("size"), want.get("root_hash"), self.manifest.get(
                "origin")) != (cp.size, cp.root_hash.hex(), cp.origin):
            self.finding("checkpoint_manifest_mismatch", PAYLOAD_MODIFIED, "checkpoint.txt "
                         "is not the checkpoint the manifest names (origin, size, root)",
                         CHECKPOINT, expected=want, actual={"size": cp.size,
                                                            "root_hash": cp.root_hash.hex()})

    def _judge(self) -> Any:
        store = self.store

        def judge(token: str, row: Any, env: dict[str, Any], query: str | None):
            r = check_attestation(token, store=store, seq=row.seq,
                                  recorded_at_us=row.recorded_at,
                                  proof_ref=env.get("proof_ref"), query=query,
                                  admission=env.get("admission"))
            return r.disposition, r.code, r.message
        return judge

    # -- the manifest's claims --------------------------------------------------------
    def _file_digests(self) -> None:
        self._check_digests()
        bad = {f["file"] for f in self.findings if f["code"] in ("file_digest_mismatch",
                                                                  "file_missing")}
        for f in self.findings:
            other = f.pop("_pair", None)
            if other is not None and (f["file"] in bad) != (other in bad):
                f["file"] = f["file"] if f["file"] in bad else other

    def _check_digests(self) -> None:
        listed = self.manifest.get("files") or {}
        if self.manifest and set(listed) != set(LISTED_FILES):
            self.finding("manifest_malformed", PAYLOAD_MODIFIED, f"files lists {sorted(listed)}"
                         f", expected {sorted(LISTED_FILES)}", MANIFEST)
        for name, want in listed.items():
            h = self.hashers.get(name)
            if h is None or not isinstance(want, dict):
                continue
            size = (self.dir / name).stat().st_size
            got = "sha256:" + h.hexdigest()
            if (want.get("sha256"), want.get("bytes")) != (got, size):
                cls = TRUNCATED if isinstance(want.get("bytes"), int) and size < want[
                    "bytes"] else PAYLOAD_MODIFIED
                self.finding("file_digest_mismatch", cls, f"{name} is not the file the "
                             "manifest signs", name, None, want, {"sha256": got, "bytes": size})

    def _counts(self) -> None:
        want = self.manifest.get("counts")
        if not isinstance(want, dict):
            return
        got = {"entries": self.tally["rows"], "key_events": self.events["rows"],
               "by_status": dict(self.counts["by_status"]),
               "by_kind": dict(self.counts["by_kind"])}
        for key, value in got.items():
            if want.get(key) != value:
                self.finding("count_mismatch", DELETED, f"the manifest counts {key} "
                             f"{want.get(key)}, the bundle has {value}",
                             KEY_EVENTS if key == "key_events" else ENTRIES, None,
                             want.get(key), value)

    def _report(self) -> dict[str, Any]:
        m = self.manifest
        summary = {k: self.tally[k] for k in ("rows", "verified", "failed", "unverified")}
        summary["key_events"] = self.events["rows"]
        report = {
            "format": REPORT_FORMAT, "bundle": str(self.dir), "ledger_id": m.get("ledger_id"),
            "origin": m.get("origin"), "range": m.get("range"), "summary": summary,
            "signatures": self.signatures, "trusted_keys": self.trusted is not None,
            "attestations_checked": self.check_attestations,
            "findings": sorted(self.findings, key=lambda f: (f["seq"] is not None,
                                                             f["seq"] or 0)),
            "abstentions": self.abstentions,
        }
        report["outcome"] = outcome(report)
        return report
