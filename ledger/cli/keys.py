"""``ledger keys``: the producer trust store (key_event entries) and ledger signing keys."""

from __future__ import annotations

import json
from typing import Any

import click

from ledger.cli.output import dumps, emit_rows, format_option
from ledger.cli.state import CommandObj
from ledger.clock import format_us, parse_rfc3339
from ledger.errors import UsageError
from ledger.facade import Ledger


@click.group()
def keys() -> None:
    """Trusted producer keys (recorded in the chain) and the ledger's own signing keys."""


def _emit(results: list[Any]) -> None:
    for r in results:
        click.echo(dumps(r.to_dict()))


@keys.command()
@click.option("--issuer", required=True, help="Issuer (the token's iss), e.g. did:qwed:node:x.")
@click.option("--jwks", "jwks_path", required=True, type=click.Path(dir_okay=False,
              allow_dash=True), help="JWKS file with the issuer's ES256 public keys.")
@click.option("--reason", default=None, help="Why these keys are trusted (recorded).")
@click.option("--producer", default=None, help="Who made the change (recorded).")
@click.pass_obj
def trust(obj: CommandObj, issuer: str, jwks_path: str, reason: str | None,
          producer: str | None) -> None:
    """Trust the issuer's keys: appends one key_event per new key."""
    try:
        with click.open_file(jwks_path, "r", encoding="utf-8") as fh:
            jwks = json.load(fh)
    except (OSError, ValueError) as exc:
        raise UsageError(f"cannot read JWKS {jwks_path}: {exc}", field="jwks") from None
    with Ledger.open(obj["db_url"]) as ledger:
        results = ledger.trust_issuer(issuer, jwks, reason=reason, producer=producer)
    _emit(results)
    if not results:
        click.echo("no new keys: every key of the JWKS is already trusted", err=True)


@keys.command()
@click.option("--kid", required=True, help="The key id to retire.")
@click.option("--thumbprint", default=None, help="Only the key with this RFC 7638 thumbprint.")
@click.option("--reason", default=None)
@click.option("--producer", default=None)
@click.pass_obj
def retire(obj: CommandObj, kid: str, thumbprint: str | None, reason: str | None,
           producer: str | None) -> None:
    """Stop accepting a key for new rows (routine rotation); older rows stay valid."""
    with Ledger.open(obj["db_url"]) as ledger:
        _emit(ledger.end_key("retire", kid, reason=reason, producer=producer,
                             thumbprint=thumbprint))


@keys.command()
@click.option("--kid", required=True, help="The key id to revoke.")
@click.option("--thumbprint", default=None, help="Only the key with this RFC 7638 thumbprint.")
@click.option("--reason", required=True, help="Why (recorded).")
@click.option("--compromised-since", default=None, metavar="RFC3339",
              help="The key was compromised from this time: rows recorded since then that "
                   "rely on it fail the audit.")
@click.option("--producer", default=None)
@click.pass_obj
def revoke(obj: CommandObj, kid: str, thumbprint: str | None, reason: str,
           compromised_since: str | None, producer: str | None) -> None:
    """Revoke a key (with a reason; optionally compromised since a time)."""
    since = None
    if compromised_since is not None:
        try:
            since = parse_rfc3339(compromised_since)
        except ValueError:
            raise UsageError("must be an RFC 3339 time, e.g. 2026-11-01T00:00:00Z",
                             field="compromised-since") from None
    with Ledger.open(obj["db_url"]) as ledger:
        _emit(ledger.end_key("revoke", kid, reason=reason, producer=producer,
                             compromised_since_us=since, thumbprint=thumbprint))


@keys.command(name="trusted")
@format_option()
@click.pass_obj
def trusted(obj: CommandObj, fmt: str) -> None:
    """List every producer key ever trusted, with the seq range it is accepted for."""
    with Ledger.open(obj["db_url"]) as ledger:
        store = ledger.trust_store()
    rows = [{"issuer": k.issuer, "kid": k.kid, "thumbprint": k.thumbprint,
             "trusted_at_seq": k.since_seq, "ended_at_seq": k.until_seq,
             "compromised_since": format_us(k.compromised_since_us)
             if k.compromised_since_us is not None else None} for k in store.keys]
    emit_rows(rows, fmt, ["issuer", "kid", "thumbprint", "trusted_at_seq", "ended_at_seq",
                          "compromised_since"])
    if not rows:
        click.echo("no trusted producer keys", err=True)


def _attach_signing() -> None:
    try:
        from ledger.cli.signing import SIGNING_COMMANDS
    except ImportError:  # pragma: no cover - signing keys arrive with checkpoints
        return
    for command in SIGNING_COMMANDS:
        keys.add_command(command)


_attach_signing()

COMMANDS = [keys]

