"""``ledger checkpoint``, ``ledger prove``, ``ledger verify-proof``.

Exit codes: 0 success / proof valid; 1 the proof is invalid, or signing would
contradict an earlier checkpoint; 2 usage (bad arguments, unreadable key
file, no signing key); 4 could not run.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import click

from ledger.cli.output import emit_mapping, format_option
from ledger.cli.signing import keys_dir_option
from ledger.cli.state import CommandObj
from ledger.cli.witness import anchor_policy_options, anchor_request_options
from ledger.errors import ProofError, UsageError


def _write(out: str | None, text: str) -> None:
    if out is None or out == "-":
        click.echo(text, nl=not text.endswith("\n"))
        return
    with open(out, "w", encoding="utf-8") as fh:
        fh.write(text)


def _read(path: str) -> str:
    if path == "-":
        return sys.stdin.read()
    with open(path, encoding="utf-8") as fh:
        return fh.read()


@click.command()
@keys_dir_option()
@click.option("--out", type=click.Path(dir_okay=False, allow_dash=True), default=None,
              metavar="FILE", help="Write the signed note to FILE (instead of stdout).")
@format_option(default="text", choices=("text", "json"))
@anchor_request_options
@click.pass_obj
def checkpoint(obj: CommandObj, keys_dir: str, out: str | None, fmt: str, anchors: Any) -> None:
    """Sign and store a checkpoint (origin, size, Merkle root) of the whole ledger.

    Every active key of the keyring named after the ledger origin signs.
    Refuses (exit 1) if the ledger is not a consistent extension of the
    latest stored checkpoint.  Prints the signed note (text) or
    {origin, size, root_hash, note} (json).  With witnesses or a TSA the checkpoint
    is then cosigned and time-stamped (docs/anchoring.md): the note printed carries
    the cosignature lines, --out FILE also writes the token to FILE.tsr; a witness
    or TSA that fails is reported on stderr and does not change the exit code.
    """
    from ledger.cli.witness import report_anchoring, write_sidecar
    from ledger.core.note import parse_checkpoint_body, parse_note
    from ledger.crypto.keys import Keyring
    from ledger.facade import Ledger

    with Ledger.open(obj["db_url"]) as ledger:
        anchored = ledger.anchored_checkpoint(Keyring.load(keys_dir), anchors)
        note = anchored.note
        if out not in (None, "-"):
            _write(out, note)
            write_sidecar(out, ledger, anchored.size)
    report_anchoring(anchored)
    cp = parse_checkpoint_body(parse_note(note).text)
    if fmt == "json":
        emit_mapping({"origin": cp.origin, "size": cp.size, "root_hash": cp.root_hash.hex(),
                      "note": note}, "json")
    elif out in (None, "-"):
        _write(None, note)
    click.echo(f"checkpoint: size {cp.size}, root {cp.root_hash.hex()}", err=True)


def _note_arg(ledger: Any, arg: str, what: str) -> str:
    """A checkpoint argument: a note file, or the tree size of a stored checkpoint."""
    from ledger.ops.checkpoint import refuse_empty_old

    if os.path.isfile(arg) or arg == "-":
        return _read(arg)
    if arg.isdigit():
        if what == "OLD":
            refuse_empty_old(int(arg))
        row = ledger.checkpoint_at(int(arg))
        if row is None:
            raise UsageError(f"no stored checkpoint of size {arg}", code="no_checkpoint",
                             field=what)
        note: str = row.note
        return note
    raise click.BadParameter(f"{arg!r} is neither a file nor a checkpoint size",
                             param_hint=what)


@click.command()
@click.argument("seq", type=click.IntRange(min=0), required=False)
@click.option("--checkpoint", "checkpoint_file", default=None, metavar="FILE",
              type=click.Path(exists=True, dir_okay=False, allow_dash=True),
              help="Prove against this signed checkpoint (default: the latest stored one;"
                   " a new one is signed if none covers SEQ).")
@click.option("--consistency", nargs=2, default=None, metavar="OLD NEW",
              help="Consistency proof between two checkpoints (files or stored sizes).")
@keys_dir_option()
@click.option("--out", type=click.Path(dir_okay=False, allow_dash=True), default=None,
              metavar="FILE", help="Write the proof to FILE (default: stdout).")
@click.pass_obj
def prove(obj: CommandObj, seq: int | None, checkpoint_file: str | None,
          consistency: tuple[str, str] | None, keys_dir: str, out: str | None) -> None:
    """Write a self-contained inclusion proof for the entry at SEQ (JSON, format
    ledger-inclusion-proof/1: envelope, payloads, audit path, signed checkpoint),
    or with --consistency OLD NEW a ledger-consistency-proof/1 between two
    checkpoints (OLD not empty: every tree extends the empty one).  Verify either
    with `ledger verify-proof`, no database needed.
    """
    from ledger.crypto.keys import Keyring
    from ledger.facade import Ledger

    if (seq is None) == (consistency is None):
        raise click.UsageError("give either SEQ or --consistency OLD NEW")
    with Ledger.open(obj["db_url"]) as ledger:
        if consistency is not None:
            old, new = (_note_arg(ledger, a, n)
                        for a, n in zip(consistency, ("OLD", "NEW"), strict=False))
            bundle = ledger.prove_consistency(old, new)
            what = "consistency proof"
        else:
            note = _read(checkpoint_file) if checkpoint_file else None
            keyring = Keyring.load(keys_dir) if note is None else None
            bundle = ledger.prove(seq, note, keyring)  # type: ignore[arg-type]
            what = f"inclusion proof for seq {seq}"
    _write(out, json.dumps(bundle, indent=2, ensure_ascii=False) + "\n")
    click.echo(f"{what} written to {out or 'stdout'}", err=True)


@click.command("verify-proof")
@click.argument("file", type=click.Path(exists=True, dir_okay=False, allow_dash=True))
@click.option("--key", "key_files", multiple=True, required=True, metavar="PUB",
              type=click.Path(exists=True, dir_okay=False),
              help="Trusted public key: PEM file or JWKS (repeatable).  Signatures by"
                   " other keys are ignored.")
@anchor_policy_options
@format_option(choices=("table", "json"))
def verify_proof(file: str, key_files: tuple[str, ...], anchor_policy: Any, fmt: str) -> None:
    """Verify a proof bundle offline: exit 0 valid, 1 invalid (reason on stderr), 2 usage.
    With the anchoring options the bundle's checkpoint must also meet the witness quorum
    and carry a valid timestamp (docs/anchoring.md)."""
    from ledger.crypto.keys import load_public_keys
    from ledger.verify.proof import verify_bundle

    keys = [ref for path in key_files for ref in load_public_keys(path)]
    data = _read(file)
    try:
        result = verify_bundle(data, keys)
    except ProofError as exc:
        click.echo(f"invalid: {exc}", err=True)
        sys.exit(1)
    summary: dict[str, Any] = {"valid": True, "kind": result.kind, "origin": result.origin,
                               "tree_size": result.tree_size,
                               "root_hash": result.root_hash.hex(),
                               "signed_by": ", ".join(result.signers)}
    if result.kind == "inclusion":
        summary.update(seq=result.seq, entry_hash=result.entry_hash.hex())  # type: ignore[union-attr]
        if result.withheld:
            summary["payloads_withheld"] = ", ".join(result.withheld)
    else:
        summary["old_size"] = result.old_size
    if anchor_policy is not None:
        from ledger.verify.proof_anchor import check_bundle_anchors

        summary.update(check_bundle_anchors(data, anchor_policy))
    emit_mapping(summary, fmt)
    if summary.get("findings"):
        sys.exit(1)


COMMANDS = [checkpoint, prove, verify_proof]
