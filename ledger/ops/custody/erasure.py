"""The erasure report a data protection officer files: what was erased, when, why, the
redaction seqs and the checkpoint signed right after, signed by the ledger key.

File format (``ledger-erasure-report/1``, JSON)::

    {"format": "ledger-erasure-report/1", "ledger_id", "origin", "erased_at" (RFC 3339),
     "reason", "reference", "requested_by", "keep_attestation", "override_minimum",
     "redaction_seqs": [N, ...],
     "entries": [{"seq", "payloads": [...], "already_erased": [...], "redaction_seq"}],
     "checkpoint": {"size", "root_hash": "sha256:<hex>", "note"},
     "signature": "<compact JWS>"}

``signature`` is an EdDSA JWS (``typ: ledger-erasure-report+jwt``) by the ledger's
active key whose claims are ``{"iss": origin, "iat", "report_digest"}``, the digest
being SHA-256 of the canonical JSON of the report without ``signature``.  It contains no
erased data and no subject text.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ledger.clock import format_us
from ledger.core.canonical import canonical_json
from ledger.core.digest import digest_text, hash_hex
from ledger.core.note import parse_checkpoint_body, parse_note
from ledger.crypto.keys import Keyring
from ledger.crypto.tokens import ledger_signer, verify_ledger_jwt
from ledger.errors import IntegrityError
from ledger.ops.checkpoint import make_checkpoint
from ledger.ops.context import LedgerContext
from ledger.ops.custody.redaction import Ask, RedactionOutcome

REPORT_FORMAT = "ledger-erasure-report/1"
REPORT_TYP = "ledger-erasure-report+jwt"


def erasure_report(ctx: LedgerContext, outcome: RedactionOutcome, ask: Ask, keyring: Keyring,
                   *, keep_attestation: bool = False, override_minimum: str | None = None,
                   ) -> dict[str, Any]:
    """Sign a checkpoint covering the redaction entries, then the report (see module
    docstring).  Raises KeyringError when the keyring has no active ledger key."""
    signer = ledger_signer(keyring, ctx.origin)
    note = make_checkpoint(ctx, keyring)
    cp = parse_checkpoint_body(parse_note(note).text)
    erased_at = outcome.erased_at_us if outcome.erased_at_us is not None else ctx.clock.now_us()
    report: dict[str, Any] = {
        "format": REPORT_FORMAT, "ledger_id": ctx.ledger_id, "origin": ctx.origin,
        "erased_at": format_us(erased_at), "reason": ask.reason, "reference": ask.reference,
        "requested_by": ask.requested_by, "keep_attestation": keep_attestation,
        "override_minimum": override_minimum, "redaction_seqs": list(outcome.redaction_seqs),
        "entries": [{k: v for k, v in line.items() if k != "dry_run"}
                    for line in outcome.lines()],
        "checkpoint": {"size": cp.size, "root_hash": hash_hex(cp.root_hash), "note": note},
    }
    claims = {"iss": ctx.origin, "iat": ctx.clock.now_us() // 1_000_000,
              "report_digest": digest_text(canonical_json(report))}
    return {**report, "signature": signer.sign_jwt(claims, REPORT_TYP)}


def write_report(path: str | Path, report: dict[str, Any]) -> None:
    Path(path).write_text(json.dumps(report, indent=1, ensure_ascii=False) + "\n",
                          encoding="utf-8")


def verify_report(report: dict[str, Any], jwks: dict[str, Any]) -> dict[str, Any]:
    """The signature's claims, when ``report`` is signed by a key of ``jwks`` and says
    exactly what was signed.  Raises IntegrityError (code ``erasure_report_invalid``)."""
    body = {k: v for k, v in report.items() if k != "signature"}
    token = report.get("signature")
    if report.get("format") != REPORT_FORMAT or not isinstance(token, str):
        raise IntegrityError("not a signed erasure report", code="erasure_report_invalid")
    claims = verify_ledger_jwt(token, jwks, typ=REPORT_TYP, issuer=str(report.get("origin")),
                               require=["iss", "iat"], code="erasure_report_invalid")
    if claims.get("report_digest") != digest_text(canonical_json(body)):
        raise IntegrityError("the report differs from what was signed",
                             code="erasure_report_invalid")
    return claims
