"""``ledger serve``: the HTTP service (FastAPI on uvicorn; see docs/http.md).

Exit codes: 2 usage (bad option, no ledger signing key, bad JWKS); 4 could not
run (database unreachable, ledger not initialized).  Stops on SIGINT/SIGTERM
after in-flight requests and queued appends are done.  The HTTP protocol is
uvicorn's httptools one with the request head capped (431 beyond 32 KiB), head and body
read timeouts and a connection cap below the descriptor limit (see ledger.api.limits),
named by import string like the app.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from typing import Any

import click

from ledger.cli.serve_ops import ops_options, ops_settings, uvicorn_logging
from ledger.cli.signing import keys_dir_option
from ledger.cli.state import CommandObj
from ledger.ops.limits import ACCEPT_BACKLOG, MIN_CONNECTIONS, RESERVED_FDS, descriptor_cap

SETTINGS_ENV = "LEDGER_SERVE_SETTINGS"  # read by ledger.api.settings.Settings.from_env
HEAD_PROTOCOL = "ledger.api.limits:GuardedHttpToolsProtocol"  # loaded by uvicorn by name
MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"  # read by prometheus-client in every worker


@click.command()
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Interface to listen on (0.0.0.0: every interface).")
@click.option("--port", type=click.IntRange(0, 65535), default=8080, show_default=True)
@click.option("--workers", type=click.IntRange(1, 64), default=1, show_default=True,
              help="Worker processes (each with its own group committer; the database "
                   "lock serializes their commits).")
@keys_dir_option()
@click.option("--read-db", "read_db", default=None, metavar="URL",
              help="A PostgreSQL hot standby of --db that answers the reads (queries, "
                   "proofs, exports, history, tiles); appends and signing stay on --db.")
@click.option("--issuer", default=None, metavar="ISS",
              help="Accepted token issuer (default: the ledger origin).")
@click.option("--audience", default=None, metavar="AUD",
              help="Accepted token audience (default: the ledger origin).")
@click.option("--jwks", "external_jwks", default=None, metavar="FILE|URL",
              help="Verify access tokens with this external issuer's JWKS instead of the "
                   "ledger key (needs --issuer).")
@click.option("--role-claim", default="role", show_default=True,
              help="Claim holding the role in external tokens.")
@click.option("--group-wait-ms", type=click.FloatRange(0, 1000), default=0.0,
              show_default=True, help="Group commit: longest wait for more appends.")
@click.option("--group-max", type=click.IntRange(1, 10_000), default=256, show_default=True,
              help="Group commit: largest batch.")
@click.option("--queue-max", type=click.IntRange(1, 1_000_000), default=4096,
              show_default=True, help="Appends allowed to wait; beyond: 503 overloaded.")
@click.option("--quarantine-max-rows", type=click.IntRange(min=0), default=None,
              help="Quarantine rows kept in all; beyond, rejects are only counted "
                   "(default: $LEDGER_QUARANTINE_MAX_ROWS or 10000).")
@click.option("--quarantine-max-per-producer", type=click.IntRange(min=0), default=None,
              help="Quarantine rows kept per producer "
                   "(default: $LEDGER_QUARANTINE_MAX_PER_PRODUCER or 1000).")
@click.option("--no-checkpoint-on-demand", is_flag=True,
              help="?proof=true answers 404 not_checkpointed instead of signing a "
                   "checkpoint when none covers the entry yet.")
@click.option("--checkpoint-on-demand-interval", default="30s", show_default=True,
              metavar="DURATION",
              help="At most one checkpoint signed for proof requests per DURATION, for the "
                   "whole ledger (at least 1s); inside it they answer 404 not_checkpointed "
                   "with Retry-After.")
@click.option("--checkpoint-every", default=None, metavar="SECONDS|ENTRIES",
              help="Sign, witness and time-stamp a checkpoint on a schedule: 30s, 5m, 1h, "
                   "or 1000e (entries); in the background, never blocking appends.")
@click.option("--anchors", "anchors_file", default=None, metavar="FILE",
              type=click.Path(exists=True, dir_okay=False),
              help="Witnesses and TSA of the scheduled checkpoints (docs/anchoring.md).")
@click.option("--head-timeout", default="10s", show_default=True, metavar="DURATION",
              help="A request head must be complete within this (else 408).")
@click.option("--body-timeout", default="30s", show_default=True, metavar="DURATION",
              help="A request body must be complete within this of its head (else 408).")
@click.option("--max-connections", type=click.IntRange(min=MIN_CONNECTIONS), default=None,
              help="Connections held per worker; beyond, the longest idle one is closed "
                   "(default: the open-files limit less a reserve).")
@click.option("--log-level", type=click.Choice(["critical", "error", "warning", "info",
                                                "debug"]), default="info", show_default=True)
@click.option("--access-log/--no-access-log", default=True, show_default=True,
              help="Log one `request` event per request (route template, status, latency).")
@ops_options
@click.pass_obj
def serve(obj: CommandObj, /, host: str, port: int, workers: int, keys_dir: str,
          read_db: str | None, issuer: str | None,
          audience: str | None, external_jwks: str | None, role_claim: str,
          group_wait_ms: float, group_max: int, queue_max: int,
          quarantine_max_rows: int | None, quarantine_max_per_producer: int | None,
          no_checkpoint_on_demand: bool, checkpoint_on_demand_interval: str,
          checkpoint_every: str | None, anchors_file: str | None, head_timeout: str,
          body_timeout: str, max_connections: int | None, log_level: str,
          access_log: bool, **ops: Any) -> None:
    """Serve the ledger over HTTP (OpenAPI document at /openapi.json, with a token).

    Needs an initialized ledger (`ledger init`) and an active ledger signing key
    (`ledger keys generate`): it signs receipts and self-issued tokens.
    """
    import uvicorn

    if external_jwks and not issuer:
        raise click.UsageError("--jwks needs --issuer (the iss its tokens carry)")
    settings = {
        "db_url": obj["db_url"], "read_db_url": read_db, "keys_dir": keys_dir,
        "issuer": issuer, "audience": audience,
        "external_jwks": external_jwks, "role_claim": role_claim,
        "group_wait_ms": group_wait_ms, "group_max_items": group_max, "queue_max": queue_max,
        "checkpoint_on_demand": not no_checkpoint_on_demand,
        "checkpoint_on_demand_interval": checkpoint_on_demand_interval,
        "quarantine_max_rows": quarantine_max_rows,
        "quarantine_max_per_producer": quarantine_max_per_producer,
        "checkpoint_every": checkpoint_every,
        "anchors_file": os.path.abspath(anchors_file) if anchors_file else None,
        "access_log": access_log, "head_timeout": head_timeout,
        "body_timeout": body_timeout, "max_connections": max_connections,
        **ops_settings(ops)}
    from ledger.core.schedule import on_demand_interval

    on_demand_interval(checkpoint_on_demand_interval)  # a usage error here, not in the worker
    check_connection_bounds(head_timeout, body_timeout, max_connections)
    if checkpoint_every:
        from ledger.core.schedule import parse_every

        parse_every(checkpoint_every)  # a usage error here, not in the worker
    origin = _preflight(settings)
    # one runtime directory per start: prometheus-client's multiprocess files (every
    # worker's counters, summed by whichever worker answers /metrics) and the lock that
    # makes one worker the watch's leader; removed when the service stops
    runtime = tempfile.mkdtemp(prefix="ledger-serve-")
    settings["runtime_dir"] = runtime
    os.environ[MULTIPROC_ENV] = os.path.join(runtime, "metrics")
    os.mkdir(os.environ[MULTIPROC_ENV])
    os.environ[SETTINGS_ENV] = json.dumps(settings)
    click.echo(f"serving {origin} on http://{host}:{port}"
               + (f" with {workers} workers" if workers > 1 else ""), err=True)
    # by import string: the CLI and the HTTP layer never import each other
    # the protocol caps the request line + headers (431 beyond 32 KiB, ledger.api.limits)
    try:
        uvicorn.run("ledger.api.app:app_from_env", factory=True, workers=workers, host=host,
                    port=port, log_level=log_level, access_log=False,
                    log_config=uvicorn_logging(ops["log_format"], log_level),
                    timeout_graceful_shutdown=30, http=HEAD_PROTOCOL,
                    backlog=ACCEPT_BACKLOG)
    finally:
        shutil.rmtree(runtime, ignore_errors=True)


def check_connection_bounds(head_timeout: str, body_timeout: str,
                            max_connections: int | None) -> None:
    """Usage errors (exit 2) here, not in the workers: a bad duration, or more connections
    than the descriptor limit leaves room for."""
    from ledger.core.schedule import parse_duration

    parse_duration(head_timeout, "head_timeout")
    parse_duration(body_timeout, "body_timeout")
    cap = descriptor_cap()
    if max_connections is not None and max_connections > cap:
        raise click.UsageError(
            f"--max-connections {max_connections} is above what the open-files limit allows"
            f" ({cap}: the limit less {RESERVED_FDS} descriptors the process needs besides"
            " connections); raise LimitNOFILE / ulimit -n or give fewer")


def _preflight(settings: dict[str, Any]) -> str:
    """Fail here, with the CLI's exit codes, on what would keep the service from starting:
    no ledger or an unreachable --read-db (4), a --read-db of another ledger, no active
    signing key or an unreadable JWKS (2).  Returns the origin."""
    from ledger.crypto.jwks import JwksSource
    from ledger.crypto.keys import Keyring
    from ledger.crypto.tokens import ledger_signer
    from ledger.facade import Ledger

    with Ledger.open(settings["db_url"]) as ledger:
        origin = ledger.meta.origin
        if settings["read_db_url"]:
            with Ledger.open(settings["read_db_url"]) as replica:
                ledger.check_replica(replica)
    ledger_signer(Keyring.load(settings["keys_dir"]), origin)
    if settings["external_jwks"]:
        JwksSource(location=settings["external_jwks"])
    return origin


COMMANDS = [serve]
