"""The service process's machinery, beside the HTTP layer that wires it (``ledger serve``).

What runs in a ``ledger serve`` process besides answering requests: the background audits,
the alert conditions and the leader election among workers (``watch``), the scheduled
checkpoints with their witnesses and time-stamps (``anchoring``), the signed alerts POSTed to
webhooks (``alerts``) and the process's Prometheus series (``metrics``, served by
``GET /metrics``).  ``ledger.api`` builds the application and starts these; nothing here
knows HTTP routes, and this package reaches a ledger through the facade (docs/architecture.md).
"""
