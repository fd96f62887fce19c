"""``ledger witness serve | keys generate``, and the anchoring options other commands share
(docs/anchoring.md).

* request options (``ledger checkpoint``): ``--witness NAME=URL`` (repeatable),
  ``--witness-key FILE`` (vkeys), ``--tsa URL``, ``--tsa-certs FILE``, ``--anchors FILE``;
* policy options (``audit``, ``verify-checkpoint``, ``verify-proof``, ``verify-export``):
  ``--witness-key FILE``, ``--quorum N``, ``--tsa-certs FILE``, ``--tsa-policy OID``.

Exit codes: 0 success / checkpoint valid under the policy; 1 it is not (reasons on
stderr); 2 usage (bad config, key or option); 4 could not run.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import click

from ledger.cli.output import emit_mapping, format_option

_REQUEST = ("witnesses", "witness_keys", "tsa_url", "tsa_certs", "anchors_file",
            "witness_timeout")
_POLICY = ("witness_keys", "quorum", "tsa_certs", "tsa_policy")


def _witness_key_option() -> Any:
    return click.option("--witness-key", "witness_keys", multiple=True, metavar="FILE",
                        type=click.Path(exists=True, dir_okay=False),
                        help="Witness verifier keys (C2SP vkeys, one a line; repeatable).")


def _tsa_certs_option() -> Any:
    return click.option("--tsa-certs", type=click.Path(exists=True, dir_okay=False),
                        default=None, metavar="FILE",
                        help="PEM bundle of trusted TSA certificates (root CA first).")


def anchor_request_options(f: Callable[..., Any]) -> Callable[..., Any]:
    """Add the request options; the command receives them as one ``anchors`` argument
    (an ``AnchorConfig``)."""
    @functools.wraps(f)
    def wrapper(*args: Any, **kw: Any) -> Any:
        kw["anchors"] = anchor_config({k: kw.pop(k) for k in _REQUEST})
        return f(*args, **kw)

    for option in reversed([
        click.option("--witness", "witnesses", multiple=True, metavar="NAME=URL",
                     help="Ask this witness to cosign (repeatable; NAME is its key name)."),
        _witness_key_option(),
        click.option("--tsa", "tsa_url", default=None, metavar="URL",
                     help="Ask this RFC 3161 time-stamping authority for a token."),
        _tsa_certs_option(),
        click.option("--anchors", "anchors_file", default=None, metavar="FILE",
                     type=click.Path(exists=True, dir_okay=False),
                     help="Witnesses and TSA from a JSON file (docs/anchoring.md)."),
        click.option("--witness-timeout", type=click.FloatRange(0.1, 120), default=5.0,
                     show_default=True, help="Seconds to wait for each witness and the TSA."),
    ]):
        wrapper = option(wrapper)
    return wrapper


def anchor_config(opts: dict[str, Any]) -> Any:
    """An ``AnchorConfig`` from the request options (``--anchors`` first, options added)."""
    from ledger.ops.checkpoint import anchor_config_from

    return anchor_config_from(opts["anchors_file"], list(opts["witnesses"]),
                              list(opts["witness_keys"]), opts["tsa_url"], opts["tsa_certs"],
                              opts["witness_timeout"])


def anchor_policy_options(f: Callable[..., Any]) -> Callable[..., Any]:
    """Add the policy options; the command receives ``anchor_policy`` (an ``AnchorPolicy``,
    or None when none of them is given)."""
    @functools.wraps(f)
    def wrapper(*args: Any, **kw: Any) -> Any:
        kw["anchor_policy"] = anchor_policy({k: kw.pop(k) for k in _POLICY})
        return f(*args, **kw)

    for option in reversed([
        _witness_key_option(),
        click.option("--quorum", type=click.IntRange(min=0), default=None,
                     help="Valid cosignatures needed from the --witness-key witnesses "
                          "(default: all of them)."),
        _tsa_certs_option(),
        click.option("--tsa-policy", default=None, metavar="OID",
                     help="Timestamp tokens must carry this TSA policy OID."),
    ]):
        wrapper = option(wrapper)
    return wrapper


def anchor_policy(opts: dict[str, Any]) -> Any:
    from ledger.ops.checkpoint import anchor_policy_from

    return anchor_policy_from(list(opts["witness_keys"]), opts["quorum"], opts["tsa_certs"],
                              opts["tsa_policy"])


def report_anchoring(report: Any) -> None:
    """The anchoring outcome, one line each, on stderr."""
    for name in report.cosigned:
        click.echo(f"witness {name}: cosigned size {report.size}", err=True)
    for name, why in report.failed.items():
        click.echo(f"witness {name}: not cosigned ({why}); retried at the next checkpoint",
                   err=True)
    if report.timestamp is not None:
        click.echo(f"timestamp: {report.timestamp.gen_time.isoformat()}", err=True)
    elif report.tsa_error:
        click.echo(f"timestamp: failed ({report.tsa_error})", err=True)


def write_sidecar(out: str, ledger: Any, size: int) -> None:
    """``<out>.tsr``: the first stored token of that size, if any."""
    ledger.write_timestamp_sidecar(out, size)


# --- the witness service -------------------------------------------------------------------

@click.group()
def witness() -> None:
    """A C2SP tlog-witness: cosigns checkpoints that extend what it saw before."""


@witness.command("serve")
@click.option("--config", "config_path", required=True, metavar="FILE",
              type=click.Path(exists=True, dir_okay=False), help="Witness config (JSON).")
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", type=click.IntRange(0, 65535), default=7380, show_default=True)
@click.option("--log-level", default="warning", show_default=True,
              type=click.Choice(["critical", "error", "warning", "info", "debug"]))
def serve(config_path: str, host: str, port: int, log_level: str) -> None:
    """Serve POST /add-checkpoint and GET /<origin hash>/checkpoint (c2sp.org/tlog-witness)
    for the configured logs."""
    import uvicorn

    from ledger.ops.limits import ACCEPT_BACKLOG
    from ledger.witness.config import load_config
    from ledger.witness.service import create_witness_app

    config = load_config(config_path)
    app = create_witness_app(config)
    click.echo(f"witness {config.name} ({len(config.logs)} log(s)) on http://{host}:{port}"
               f" — {config.vkey}", err=True)
    # the service's guarded protocol: head cap, head/body timeouts, connection cap
    uvicorn.run(app, host=host, port=port, log_level=log_level, access_log=False,
                http="ledger.api.limits:GuardedHttpToolsProtocol", backlog=ACCEPT_BACKLOG)


@witness.group("keys")
def keys() -> None:
    """Witness keys."""


@keys.command("generate")
@click.option("--name", required=True, metavar="NAME",
              help="Witness name (a schema-less URL, e.g. witness.example/w1).")
@click.option("--out", "out_dir", required=True, type=click.Path(file_okay=False),
              metavar="DIR", help="Write witness.pem (0600) and witness.vkey here.")
@format_option(choices=("table", "json"))
def generate(name: str, out_dir: str, fmt: str) -> None:
    """Generate an Ed25519 witness key; prints its verifier key (give it to the logs)."""
    from ledger.witness.config import generate_witness_key

    pem, vkey = generate_witness_key(out_dir, name)
    emit_mapping({"name": name, "private_key": str(pem), "vkey": vkey}, fmt)


COMMANDS = [witness]
