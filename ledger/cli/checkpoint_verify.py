"""``ledger verify-checkpoint``: one signed checkpoint, verified alone (no database).

A checkpoint an auditor keeps is evidence by itself: this checks its syntax, its signature by
a trusted ledger key and, optionally, that it names the expected origin, size and root.

Exit codes: 0 valid; 1 invalid (no valid signature by a trusted key, or an asserted value
differs: one finding-style line on stderr); 2 usage (bad option, unreadable key file) or a
malformed checkpoint file.
"""

from __future__ import annotations

import base64
import binascii
import sys
from typing import Any, NoReturn

import click

from ledger.cli.output import emit_json, emit_mapping, format_option
from ledger.cli.witness import anchor_policy_options
from ledger.core.note import HASH_SIZE, MAX_NOTE_BYTES
from ledger.errors import UsageError

_HEX = frozenset("0123456789abcdefABCDEF")


def parse_root(text: str) -> bytes:
    """A root hash as `ledger checkpoint` prints it (64 hex digits, optionally ``sha256:``
    first) or as the note writes it (standard base64 of 32 bytes).  Raises UsageError."""
    hex_text = text.removeprefix("sha256:")
    if len(hex_text) == 2 * HASH_SIZE and set(hex_text) <= _HEX:
        return bytes.fromhex(hex_text)
    try:
        raw = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raw = b""
    if len(raw) == HASH_SIZE and base64.b64encode(raw).decode() == text:
        return raw
    raise UsageError(f"--root {text[:80]!r} is neither 64 hex digits (optionally after "
                     "'sha256:') nor the base64 of 32 bytes", code="bad_root", field="root")


def _read_note(path: str) -> bytes:
    """At most one byte more than a note may have (the parser reports the excess)."""
    if path == "-":
        return sys.stdin.buffer.read(MAX_NOTE_BYTES + 1)
    try:
        with open(path, "rb") as fh:
            return fh.read(MAX_NOTE_BYTES + 1)
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror}", field="file") from None


def _mismatch(what: str, actual: Any, expected: Any) -> dict[str, Any]:
    return {"valid": False, "code": f"checkpoint_{what}_mismatch",
            "message": f"the checkpoint's {what} is {actual!r}, expected {expected!r}",
            "expected": {what: expected}, "actual": {what: actual}}


def _invalid(finding: dict[str, Any], fmt: str) -> NoReturn:
    if fmt == "json":
        emit_json(finding)
    click.echo(f"invalid: {finding['code']}: {finding['message']}", err=True)
    sys.exit(1)


@click.command("verify-checkpoint")
@click.argument("file", type=click.Path(exists=True, dir_okay=False, allow_dash=True))
@click.option("--key", "key_files", multiple=True, required=True, metavar="PUB",
              type=click.Path(exists=True, dir_okay=False),
              help="Trusted ledger public key: PEM file or JWKS (repeatable).  Signatures by"
                   " other keys are ignored.")
@click.option("--origin", default=None, metavar="ORIGIN", help="Assert the origin.")
@click.option("--size", type=click.IntRange(min=0), default=None, metavar="N",
              help="Assert the tree size.")
@click.option("--root", "root_text", default=None, metavar="HASH",
              help="Assert the root hash: hex as `ledger checkpoint` prints it (a 'sha256:'"
                   " prefix is allowed) or the note's base64.")
@anchor_policy_options
@format_option(choices=("table", "json"))
def verify_checkpoint(file: str, key_files: tuple[str, ...], origin: str | None,
                      size: int | None, root_text: str | None, anchor_policy: Any,
                      fmt: str) -> None:
    """Verify a signed checkpoint offline: exit 0 valid, 1 invalid (reason on stderr),
    2 usage or a malformed file.  With the anchoring options also the witness quorum and
    the timestamp in FILE.tsr (docs/anchoring.md)."""
    from ledger.core.note import parse_checkpoint_body, parse_note
    from ledger.crypto.keys import known_keys, load_public_keys
    from ledger.crypto.note_sign import open_checkpoint
    from ledger.errors import NoteSignatureError

    want_root = parse_root(root_text) if root_text is not None else None
    keys = [ref for path in key_files for ref in load_public_keys(path)]
    data = _read_note(file)
    unverified = parse_checkpoint_body(parse_note(data).text)  # NoteError: exit 2
    try:  # unnamed (PEM) keys are taken as named after the checkpoint's origin
        cp, signers = open_checkpoint(data, known_keys(keys, unverified.origin))
    except NoteSignatureError as exc:
        _invalid({"valid": False, "code": "checkpoint_signature_invalid",
                  "message": exc.message}, fmt)
    for what, actual, expected in (("origin", cp.origin, origin), ("size", cp.size, size),
                                   ("root", cp.root_hash.hex(),
                                    want_root.hex() if want_root is not None else None)):
        if expected is not None and actual != expected:
            _invalid(_mismatch(what, actual, expected), fmt)
    anchors: dict[str, Any] = {}
    if anchor_policy is not None:
        from ledger.ops.checkpoint import checkpoint_anchors

        anchors, findings = checkpoint_anchors(file, data, cp.size, anchor_policy)
        for f in findings[1:]:
            click.echo(f"invalid: {f['code']}: {f['message']}", err=True)
        if findings:
            _invalid({"valid": False, **{k: findings[0][k] for k in
                                         ("code", "message", "expected", "actual")}}, fmt)
    emit_mapping({"valid": True, "origin": cp.origin, "size": cp.size,
                  "root_hash": cp.root_hash.hex(), "signed_by": ", ".join(signers),
                  **anchors}, fmt)


COMMANDS = [verify_checkpoint]
