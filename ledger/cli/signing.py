"""``ledger keys generate | list | retire-signing``: the ledger's own signing keys.

These commands are attached to the ``keys`` group (owned by ``ledger/cli/keys``);
``SIGNING_COMMANDS`` lists them.  Keys live in a keyring directory
(``--keys DIR``, default ``$LEDGER_KEYS_DIR`` or ``./ledger-keys``) and are named
after the ledger origin; see ``ledger/crypto/keys.py`` for the layout.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click
from click.decorators import FC

from ledger.cli.output import emit_mapping, emit_rows, format_option
from ledger.clock import SystemClock
from ledger.crypto.keys import DEFAULT_KEYS_DIR, Keyring, file_stem

COLUMNS = ["key_name", "note_key_id", "kid", "status", "created", "retired", "private_key"]


def keys_dir_option(*names: str) -> Callable[[FC], FC]:
    return click.option(*(names or ("--keys",)), "keys_dir", envvar="LEDGER_KEYS_DIR",
                        default=DEFAULT_KEYS_DIR, show_default=True, metavar="DIR",
                        type=click.Path(file_okay=False),
                        help="Keyring directory (default: $LEDGER_KEYS_DIR, else ./ledger-keys).")


def _db_url(ctx: click.Context) -> str:
    from ledger.ops.lifecycle import default_url

    obj = ctx.find_root().obj or ctx.obj
    return (obj or {}).get("db_url") or default_url()


def _row(ring: Keyring, jwk: dict[str, Any]) -> dict[str, Any]:
    row = {c: jwk.get(c) for c in COLUMNS[:-1]}
    pem = ring.path / (file_stem(jwk.get("key_name", ""), jwk.get("note_key_id", "")) + ".pem")
    row["private_key"] = str(pem) if pem.exists() else None
    return row


@click.command()
@keys_dir_option("--out", "--keys")
@click.option("--name", default=None, metavar="NAME",
              help="Key name (default: the origin of the ledger at --db).")
@format_option(choices=("table", "json"))
@click.pass_context
def generate(ctx: click.Context, keys_dir: str, name: str | None, fmt: str) -> None:
    """Generate an Ed25519 checkpoint signing key in DIR.

    Writes <name>-<note key id>.pem (private, mode 0600), .pub.pem and adds the
    public key to DIR/jwks.json.  Rotation: generate a new key (all active keys
    sign checkpoints), then `ledger keys retire-signing` the old one; retired public
    keys stay in jwks.json so old checkpoints remain verifiable.
    """
    if name is None:
        from ledger.facade import Ledger

        with Ledger.open(_db_url(ctx)) as ledger:
            name = ledger.meta.origin
    ring = Keyring.load(keys_dir)
    jwk = ring.generate(name, SystemClock().now_us())
    emit_mapping(_row(ring, jwk), fmt)
    others = [k["note_key_id"] for k in ring.active(name) if k is not jwk]
    if others:
        click.echo(f"note: {len(others) + 1} active keys now sign checkpoints; retire the"
                   f" old one(s) with `ledger keys retire-signing {others[0]}`", err=True)


@click.command("list")
@keys_dir_option()
@format_option(choices=("table", "json", "jsonl", "csv"))
def list_(keys_dir: str, fmt: str) -> None:
    """List the keys of the keyring (active and retired)."""
    ring = Keyring.load(keys_dir)
    emit_rows([_row(ring, k) for k in ring.jwks], fmt, COLUMNS)


@click.command("retire-signing")
@click.argument("key", metavar="KEY")
@keys_dir_option()
@format_option(choices=("table", "json"))
def retire_signing(key: str, keys_dir: str, fmt: str) -> None:
    """Stop signing checkpoints with KEY (its kid or note key id); its public key stays
    in jwks.json so the checkpoints it signed remain verifiable.  A kid may start
    with '-': give it after '--' (ledger keys retire-signing -- KID)."""
    ring = Keyring.load(keys_dir)
    jwk = ring.retire(key, SystemClock().now_us())
    emit_mapping(_row(ring, jwk), fmt)


SIGNING_COMMANDS = [generate, list_, retire_signing]
