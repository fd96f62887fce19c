"""``ledger get``: read one entry from a ledger service and verify it (docs/reader.md).

Exit codes: 0 the entry verified (printed as JSON on stdout); 1 a verification failed (the
error names the check: rolled_back, forked, consistency_invalid, wrong_tree_size,
column_mismatch, ...); 2 usage (bad arguments, no trust anchor, unusable state file, no
such entry or none checkpointed yet); 4 the ledger could not be reached.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from ledger.errors import UsageError


def _jwks(path: str | None) -> dict[str, Any] | None:
    if path is None:
        return None
    try:
        doc = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise UsageError(f"cannot read the JWKS {path}: {exc}", code="bad_jwks",
                         field="key") from None
    if not isinstance(doc, dict):
        raise UsageError(f"{path} is not a JWKS (a JSON object)", code="bad_jwks", field="key")
    return doc


def _vkeys(path: str | None) -> tuple[str, ...]:
    if path is None:
        return ()
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"cannot read witness keys {path}: {exc}", code="bad_vkey",
                         field="witness_key") from None
    return tuple(x.strip() for x in lines if x.strip() and not x.lstrip().startswith("#"))


@click.command("get")
@click.argument("seq", type=click.IntRange(min=0, max=2**53 - 1))
@click.option("--url", required=True, metavar="URL",
              help="The ledger service; with --tiles a tile prefix: a ledger serve, the URL of"
                   " a `ledger tiles write` directory, or the directory itself.")
@click.option("--state", "state_file", required=True, metavar="FILE",
              type=click.Path(dir_okay=False),
              help="The trusted-state file (created on first use, updated as it advances).")
@click.option("--token", envvar="LEDGER_TOKEN", default=None, metavar="TOKEN",
              help="Bearer token (default $LEDGER_TOKEN); auditor: every value is checked.")
@click.option("--key", "key_file", default=None, metavar="JWKS",
              type=click.Path(exists=True, dir_okay=False),
              help="The ledger's JWKS: the trust anchor of a first use (no state file yet).")
@click.option("--trust-on-first-use", is_flag=True,
              help="With no state file and no --key: trust the keys the server publishes now.")
@click.option("--witness-key", "witness_file", default=None, metavar="FILE",
              type=click.Path(exists=True, dir_okay=False),
              help="Witness verifier keys (one per line) for the first state.")
@click.option("--quorum", type=click.IntRange(min=0), default=0, show_default=True,
              help="Valid witness cosignatures every new checkpoint needs (first state).")
@click.option("--tiles", is_flag=True,
              help="Read C2SP tlog-tiles at URL: the checkpoint, the tiles and the entry"
                   " bundle; every proof is computed from tiles checked against the root.")
def get(seq: int, url: str, state_file: str, token: str | None, key_file: str | None,
        trust_on_first_use: bool, witness_file: str | None, quorum: int, tiles: bool) -> None:
    """Read entry SEQ from the service at URL and verify it against the trusted checkpoint
    in FILE: its inclusion proof to that checkpoint, a consistency proof before a newer
    checkpoint is trusted, and (auditor token) every value against what was hashed.
    With --tiles, URL is a tile prefix and the entry is its entry bundle's record, proven
    from tiles (layer "tiles"; a tile that does not check is refused: tile_hash_mismatch,
    tile_size_mismatch, tile_missing).

    Prints {seq, layer, verified: {entry_hash, tree_size, root_hash, values_checked,
    redacted}, entry} and exits 0; exits 1 naming the check that failed.  A first use (no
    state file) needs --key or --trust-on-first-use."""
    from ledger.client.reader import LedgerReader

    if key_file and trust_on_first_use:
        raise click.UsageError("give --key or --trust-on-first-use, not both")
    with LedgerReader(url, token, state_file, keys=_jwks(key_file),
                      trust_on_first_use=trust_on_first_use, witnesses=_vkeys(witness_file),
                      quorum=quorum, tiles=tiles) as reader:
        got = reader.get(seq)
    click.echo(json.dumps(got.to_dict(), ensure_ascii=False, indent=2))
    values = "checked" if got.values_checked else "not served to this layer"
    click.echo(f"verified: entry {seq} in the checkpoint of size {got.tree_size} (root"
               f" {got.root_hash.hex()}; values {values})", err=True)


COMMANDS = [get]
