"""``ledger token issue``: access tokens for the HTTP service, signed with the ledger key.

For self-hosted set-ups; with an external identity provider configure
``ledger serve --jwks`` instead and let it mint the tokens.
"""

from __future__ import annotations

import time

import click

from ledger.cli.output import emit_mapping, format_option
from ledger.cli.signing import keys_dir_option
from ledger.cli.state import CommandObj
from ledger.ops.tokens import ROLES


@click.group()
def token() -> None:
    """Access tokens for `ledger serve` (EdDSA JWTs signed by the ledger key)."""


@token.command()
@click.option("--role", required=True,
              type=click.Choice(list(ROLES)),
              help="producer: append only; auditor: everything (layers 1-3); developer: "
                   "reads, layers 1-2; agent: reads, layer 1 (status, agent_message); "
                   "custodian: redactions and legal holds only; operator: GET /metrics only.")
@click.option("--subject", required=True, metavar="NAME",
              help="Who the token is for; a producer's subject is recorded on each entry "
                   "it appends.")
@click.option("--tenant", default=None, metavar="TENANT",
              help="Scope the token to one tenant: it appends to that tenant's chain and "
                   "reads only its entries (docs/http.md, Tenants). Without it the token "
                   "is operator-level (appends to 'default', reads every tenant). Not for "
                   "--role operator.")
@click.option("--ttl", default="1h", show_default=True, metavar="DURATION",
              help="Lifetime: seconds, or 30m, 12h, 7d (at most 366d).")
@click.option("--issuer", default=None, metavar="ISS",
              help="iss claim (default: the ledger origin, what `ledger serve` expects).")
@click.option("--audience", default=None, metavar="AUD",
              help="aud claim (default: the ledger origin).")
@keys_dir_option()
@format_option(default="text", choices=("text", "json"))
@click.pass_obj
def issue(obj: CommandObj, role: str, subject: str, tenant: str | None, ttl: str,
          issuer: str | None, audience: str | None, keys_dir: str, fmt: str) -> None:
    """Mint an access token; prints the token (text) or {token, role, sub, tenant, exp}
    (json; tenant null for an operator-level token).

    Exit 2 when the keyring has no active key named after the ledger origin
    (run `ledger keys generate`) or an option is invalid.
    """
    from ledger.crypto.keys import Keyring
    from ledger.crypto.tokens import ledger_signer
    from ledger.facade import Ledger
    from ledger.ops.tokens import check_subject, check_token_tenant, mint_access_token, parse_ttl

    ttl_s = parse_ttl(ttl)
    check_subject(subject)
    check_token_tenant(tenant, role)
    with Ledger.open(obj["db_url"]) as ledger:
        origin = ledger.meta.origin
    signer = ledger_signer(Keyring.load(keys_dir), origin)
    now = int(time.time())
    jwt = mint_access_token(signer, role=role, subject=subject, ttl_s=ttl_s,
                            issuer=issuer or origin, audience=audience or origin, now_s=now,
                            tenant=tenant)
    if fmt == "json":
        emit_mapping({"token": jwt, "role": role, "sub": subject, "tenant": tenant,
                      "exp": now + ttl_s, "kid": signer.kid}, "json")
    else:
        click.echo(jwt)
    scope = f"tenant {tenant!r}" if tenant is not None else "operator-level"
    click.echo(f"{role} token for {subject!r} ({scope}), valid {ttl_s} s", err=True)


COMMANDS = [token]
