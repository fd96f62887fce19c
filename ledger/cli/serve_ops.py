"""The operations options of ``ledger serve`` (docs/operations.md): log format, metrics,
background audits and alerts.  ``ops_options`` decorates the command; ``ops_settings``
turns the parsed values into ``ledger.api.settings.Settings`` fields."""

from __future__ import annotations

from typing import Any

import click

from ledger.core.schedule import parse_duration

DURATION = "DURATION"  # 500ms, 30s, 5m, 1h, 1d


def _duration(ctx: click.Context, param: click.Parameter, value: Any) -> Any:
    if value is None:
        return None
    try:
        parse_duration(value, param.name or "duration")
    except Exception as exc:  # noqa: BLE001 - a UsageError, shown as Click's bad parameter
        raise click.BadParameter(str(exc)) from None
    return value


def _webhooks(ctx: click.Context, param: click.Parameter, value: Any) -> Any:
    for url in value or ():
        if not str(url).startswith(("http://", "https://")):
            raise click.BadParameter(f"{url!r} is not an http(s) URL")
    return value


OPTIONS = [
    click.option("--log-format", type=click.Choice(["text", "json"]), default="text",
                 show_default=True, help="json: one JSON object per line (docs/operations.md"
                 "#logs); never tokens, payloads or evidence."),
    click.option("--metrics/--no-metrics", "metrics", default=True, show_default=True,
                 help="Serve GET /metrics (Prometheus text format) to role operator."),
    click.option("--audit-every", default=None, metavar=DURATION, callback=_duration,
                 help="Run the audit in the background when the last complete audit is "
                      "older than this (recorded like `ledger audit --record`)."),
    click.option("--audit-since-last", is_flag=True,
                 help="Background audits cover only what is new since the last recorded "
                      "passed audit."),
    click.option("--alert-webhook", "alert_webhooks", multiple=True, metavar="URL",
                 callback=_webhooks,
                 help="POST a signed JSON alert here (docs/format-alert.md); repeatable."),
    click.option("--alert-retries", type=click.IntRange(0, 20), default=5, show_default=True,
                 help="Retries of a failed alert delivery (exponential backoff)."),
    click.option("--alert-backoff", default="500ms", show_default=True, metavar=DURATION,
                 callback=_duration, help="First retry delay of an alert; doubles."),
    click.option("--checkpoint-overdue", default=None, metavar=DURATION, callback=_duration,
                 help="Alert when entries have waited this long for a checkpoint."),
    click.option("--witness-overdue", default=None, metavar=DURATION, callback=_duration,
                 help="Alert when a witness of --anchors has not cosigned the latest "
                      "checkpoint this long after it was signed."),
    click.option("--store-down-after", default="60s", show_default=True, metavar=DURATION,
                 callback=_duration,
                 help="Alert when the database has been unreachable this long."),
    click.option("--watch-poll", default="1s", show_default=True, metavar=DURATION,
                 callback=_duration, help="How often the alert conditions are checked."),
]
NAMES = ("log_format", "metrics", "audit_every", "audit_since_last", "alert_webhooks",
         "alert_retries", "alert_backoff", "checkpoint_overdue", "witness_overdue",
         "store_down_after", "watch_poll")


def ops_options(f: Any) -> Any:
    for option in reversed(OPTIONS):
        f = option(f)
    return f


def ops_settings(values: dict[str, Any]) -> dict[str, Any]:
    """The Settings fields of the parsed operations options."""
    out = {n: values[n] for n in NAMES}
    out["alert_webhooks"] = list(values["alert_webhooks"])
    return out


def uvicorn_logging(log_format: str, log_level: str) -> dict[str, Any]:
    """uvicorn's ``log_config``: every logger of the service through ledger.api.logs
    (named by import string: the CLI never imports the HTTP layer)."""
    formatter = {"()": f"ledger.api.logs.{'Json' if log_format == 'json' else 'Text'}"
                       "Formatter"}
    lvl = log_level.upper()
    main = {"handlers": ["main"], "level": lvl, "propagate": False}
    return {
        "version": 1, "disable_existing_loggers": False,
        "formatters": {"main": formatter},
        "handlers": {"main": {"class": "logging.StreamHandler", "formatter": "main",
                              "stream": "ext://sys.stderr"}},
        "loggers": {"uvicorn": main, "uvicorn.error": main, "ledger": main,
                    "uvicorn.access": {"handlers": [], "level": "CRITICAL",
                                       "propagate": False}},
    }
