"""The header of a bundle: ``jwks.json``, ``manifest.jwt``, ``manifest.json`` and
``checkpoint.txt`` (docs/export.md, checks 1-3).

:func:`read_header` checks the two signatures against the verifier's trusted keys (or,
without them, the bundle's own ``jwks.json``: then they abstain) and returns the context
the row steps read: the manifest, the checkpoint and the signature dispositions.
"""

from __future__ import annotations

import hashlib
from dataclasses import replace
from typing import Any

from ledger.core.bundle import (
    CHECKPOINT,
    EXPORT_FORMATS,
    JWKS,
    MANIFEST,
    MANIFEST_JWT,
    dump_line,
)
from ledger.core.finding import Disposition, FindingClass
from ledger.core.note import Checkpoint
from ledger.core.strict import StrictError, loads
from ledger.crypto.bundle_sign import check_note
from ledger.crypto.jws import SignatureCheck, check_manifest_jwt
from ledger.crypto.keys import PublicKeyRef, load_public_keys
from ledger.errors import LedgerError
from ledger.verify.bundle.context import BundleContext
from ledger.verify.bundle.sink import FindingSink

MANIFEST_KEYS = ("ledger_id", "origin", "range", "counts", "checkpoint", "files", "filters")


def read_header(ctx: BundleContext, sink: FindingSink) -> BundleContext:
    """``ctx`` with the manifest, checkpoint and signatures read and checked."""
    bundle_keys = _bundle_keys(ctx, sink)
    keys = ctx.trusted if ctx.trusted is not None else bundle_keys
    trusted = ctx.trusted is not None
    token, body = ctx.files.small(MANIFEST_JWT, sink), ctx.files.small(MANIFEST, sink)
    signatures: dict[str, Disposition] = {}
    claims: dict[str, Any] | None = None
    if token is not None:
        jwt_check = check_manifest_jwt(token, keys, trusted)
        signatures["manifest"] = _signature("manifest", jwt_check, MANIFEST_JWT, sink)
        claims = jwt_check.parsed
    manifest = _manifest(body, claims, sink) if body is not None else {}
    checkpoint: Checkpoint | None = None
    data = ctx.files.small(CHECKPOINT, sink)
    if data is not None:
        note_check = check_note(data, keys, trusted)
        signatures["checkpoint"] = _signature("checkpoint", note_check, CHECKPOINT, sink)
        checkpoint = note_check.parsed
        _checkpoint_matches(manifest, checkpoint, sink)
    return replace(ctx, manifest=manifest, checkpoint=checkpoint, signatures=signatures,
                   bundle_keys=bundle_keys)


def _bundle_keys(ctx: BundleContext, sink: FindingSink) -> list[PublicKeyRef]:
    if ctx.files.small(JWKS, sink) is None:
        return []
    try:
        return load_public_keys(ctx.dir / JWKS)
    except (LedgerError, ValueError) as exc:  # keys.py lets binascii.Error through
        sink.fail("jwks_malformed", FindingClass.PAYLOAD_MODIFIED, str(exc), JWKS)
        return []


def _signature(what: str, check: SignatureCheck[Any], file: str, sink: FindingSink) -> Disposition:
    if check.disposition is Disposition.FAILED:
        sink.fail(check.code, FindingClass.SIGNATURE_INVALID, check.message, file)
    elif check.disposition is Disposition.ABSTAINED:
        sink.abstain(f"{what}_signature", check.code, check.message, file)
    return check.disposition


def _manifest(body: bytes, claims: dict[str, Any] | None, sink: FindingSink) -> dict[str, Any]:
    """The manifest document ({} when it cannot be used: a finding)."""
    digest = "sha256:" + hashlib.sha256(body).hexdigest()
    if claims is not None and claims.get("manifest_sha256") != digest:
        sink.fail("manifest_digest_mismatch", FindingClass.PAYLOAD_MODIFIED, "manifest.json "
                  "does not hash to the signed manifest_sha256", MANIFEST,
                  expected=claims.get("manifest_sha256"), actual=digest)
    try:
        doc = loads(body)
        if not isinstance(doc, dict) or doc.get("format") not in EXPORT_FORMATS:
            raise StrictError(f"format is not one of {', '.join(EXPORT_FORMATS)}")
        if "tenant" in doc and doc["format"] != EXPORT_FORMATS[1]:
            raise StrictError(f"a tenant export is {EXPORT_FORMATS[1]}")
        if body != dump_line(doc):
            raise StrictError("not in canonical form")
        for key in MANIFEST_KEYS:
            if key not in doc:
                raise StrictError(f"{key} is missing")
    except StrictError as exc:
        sink.fail("manifest_malformed", FindingClass.PAYLOAD_MODIFIED, exc.message, MANIFEST)
        return {}
    if claims is not None and (claims.get("sub"), claims.get("iss")) != (
            doc["ledger_id"], doc["origin"]):
        sink.fail("manifest_claims_mismatch", FindingClass.PAYLOAD_MODIFIED, "the JWT's "
                  "sub/iss are not the manifest's ledger_id/origin", MANIFEST_JWT)
    return doc


def _checkpoint_matches(manifest: dict[str, Any], cp: Checkpoint | None, sink: FindingSink) -> None:
    want = manifest.get("checkpoint") or {}
    if cp is not None and (want.get("size"), want.get("root_hash"), manifest.get(
            "origin")) != (cp.size, cp.root_hash.hex(), cp.origin):
        sink.fail("checkpoint_manifest_mismatch", FindingClass.PAYLOAD_MODIFIED,
                  "checkpoint.txt is not the checkpoint the manifest names (origin, size, "
                  "root)", CHECKPOINT, expected=want,
                  actual={"size": cp.size, "root_hash": cp.root_hash.hex()})
