"""Operators' routes: liveness, readiness (no token) and ``/metrics`` (role ``operator``).

``/v1/health/live`` answers 200 while the process serves HTTP at all.
``/v1/health/ready`` answers 200 only when the store is reachable, the ledger key is
loaded, the append queue is below ``--queue-max`` and the database schema is at the
packaged migrations' head; else 503 with ``Retry-After`` and which check failed.
Neither discloses the ledger's contents (booleans, the queue depth, revisions).
"""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response
from starlette.concurrency import run_in_threadpool

from ledger.api.auth import Principal, require
from ledger.api.schemas import READ_ERRORS
from ledger.service import metrics

health_router = APIRouter(tags=["operations"])  # without /metrics (--no-metrics)
router = APIRouter(tags=["operations"])


@health_router.get("/v1/health/live", summary="The process answers (no token)")
def live() -> JSONResponse:
    return JSONResponse({"status": "live"})


@health_router.get("/v1/health/ready", summary="Ready to serve appends (no token)",
            responses={503: READ_ERRORS[503]})
def ready(request: Request) -> JSONResponse:
    service = request.app.state.service
    r = service.ledger.readiness(key_loaded=service.key_loaded(),
                                 pending=service.committer.pending,
                                 queue_max=service.committer.max_queue)
    if r.ok:
        return JSONResponse({"status": "ready", "checks": r.checks})
    failed = sorted(k for k, v in r.checks.items() if not v["ok"])
    return JSONResponse({"status": "not_ready", "failed": failed, "checks": r.checks},
                        status_code=503, headers={"Retry-After": "1"})


router.include_router(health_router)


@router.get("/metrics", summary="Prometheus metrics (role operator)", tags=["metrics"],
            responses={200: {"content": {"text/plain": {}}}, **READ_ERRORS})
async def scrape(request: Request, principal: Principal = require("metrics")) -> Response:
    service = request.app.state.service
    body, ctype = await run_in_threadpool(metrics.exposition, service.ledger, service.replica)
    return Response(body, media_type=ctype)
