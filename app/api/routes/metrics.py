"""`GET /metrics`: the Prometheus scrape of this process, plus the queue read from the database.

`install` also wraps every request (`_Observed`, the outermost middleware): its events count
into the app's metrics (see `app.observability.events`), so an API process counts what its
handlers do; it is counted and timed by method, route template and status; and with
INGEST_ACCESS_LOG it is one line of the `ingest.access` logger.

The route label is the matched route's template (`/jobs/{job_id}`), read from the scope
after routing, never the path a client sent: a label per job id would grow without bound.
A request no route took (a 404, or one refused before routing: 413, a cross-site 403) is
`unmatched`; a method outside the standard ones is `other`.
"""

import asyncio
import logging
import time
from dataclasses import dataclass
from typing import Any

from fastapi import APIRouter, FastAPI, Request, Response
from prometheus_client import Counter, Histogram
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4

from app.api.auth import AdminDep
from app.api.deps import DatabaseDep, JobsDep
from app.api.problems import responses
from app.observability import events as observability
from app.observability.metrics import Metrics, QueueGauges, exposition
from app.store.reads import queue_state

router = APIRouter(tags=["operations"])
log = logging.getLogger("ingest.api")

SCRAPE_DB_TIMEOUT_SECONDS = 2.0


@router.get(
    "/metrics",
    name="metrics",
    response_class=Response,
    responses={
        200: {
            "description": "Prometheus text format 0.0.4",
            "content": {CONTENT_TYPE_PLAIN_0_0_4: {"schema": {"type": "string"}}},
        },
        **responses(401, 403),
    },
)
async def metrics(
    request: Request, jobs: JobsDep, database: DatabaseDep, _admin: AdminDep
) -> Response:
    """This process's counters and histograms, and the queue's gauges (needs an admin key)."""
    gauges = None
    try:
        async with asyncio.timeout(SCRAPE_DB_TIMEOUT_SECONDS):
            stats = await jobs.stats()
            state = await queue_state(database, jobs.clock())
    except Exception as exc:
        # The process's own counts are still worth a scrape; ingest_database_up says 0.
        log.warning("metrics: database unreadable, serving no queue gauges: %s", exc)
    else:
        due_age = None
        if state.oldest_due_at is not None:
            due_age = max((jobs.clock() - state.oldest_due_at).total_seconds(), 0.0)
        gauges = QueueGauges(stats.counts, due_age, state.paused_domains)
    body = exposition(request.app.state.metrics, gauges)
    return Response(body, media_type=CONTENT_TYPE_PLAIN_0_0_4)


# From a cached read to a scrape that waits out SCRAPE_DB_TIMEOUT_SECONDS.
HTTP_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
UNMATCHED = "unmatched"

access = logging.getLogger("ingest.access")


@dataclass(frozen=True)
class _Instruments:
    """The API's own instruments, on the app's registry (a worker process has none)."""

    metrics: Metrics
    requests: Counter
    duration: Histogram

    @classmethod
    def on(cls, metrics: Metrics) -> "_Instruments":
        requests = Counter(
            "ingest_http_requests",
            "HTTP requests answered, by method, route template and status.",
            ["method", "route", "status"],
            registry=metrics.registry,
        )
        duration = Histogram(
            "ingest_http_request_duration_seconds",
            "Time from a request's arrival to the end of its answer, by method and route template.",
            ["method", "route"],
            buckets=HTTP_BUCKETS,
            registry=metrics.registry,
        )
        return cls(metrics, requests, duration)


class _Observed:
    """ASGI middleware: a request's events count into the app's metrics; the request itself
    is counted, timed, and (with `access_log`) logged once answered."""

    def __init__(self, app: Any, instruments: _Instruments, access_log: bool) -> None:
        self.app = app
        self.metrics = instruments.metrics
        self.requests = instruments.requests
        self.duration = instruments.duration
        self.access_log = access_log

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            with observability.counting(self.metrics):
                await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status: int | None = None

        async def answering(message: Any) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            with observability.counting(self.metrics):
                await self.app(scope, receive, answering)
        except Exception:
            # Answered 500 by the server-error middleware outside this one.
            status = status or 500
            raise
        finally:
            if status is not None:  # None: the client left before any answer
                self._answered(scope, status, time.perf_counter() - started)

    def _answered(self, scope: Any, status: int, seconds: float) -> None:
        method = scope["method"] if scope["method"] in METHODS else "other"
        route = getattr(scope.get("route"), "path", None) or UNMATCHED
        self.requests.labels(method, route, str(status)).inc()
        self.duration.labels(method, route).observe(seconds)
        if self.access_log:
            _log_access(scope, route, status, seconds)


def _log_access(scope: Any, route: str, status: int, seconds: float) -> None:
    # The target as sent (percent-encoded): a decoded one could carry a line break.
    target = (scope.get("raw_path") or scope["path"].encode()).decode("ascii", "replace")
    if scope.get("query_string"):
        target += "?" + scope["query_string"].decode("ascii", "replace")
    client = scope.get("client")
    duration_ms = round(seconds * 1000, 1)
    access.info(
        "%s %s %d %sms",
        scope["method"],
        target,
        status,
        duration_ms,
        extra=observability.carrying(
            {
                "event": "http.request",
                "method": scope["method"],
                "target": target,
                "route": route,
                "status": status,
                "duration_ms": duration_ms,
                "client": None if client is None else client[0],
            }
        ),
    )


def install(app: FastAPI, metrics: Metrics, access_log: bool = False) -> None:
    """Serve `GET /metrics` from `metrics`; count, time and (with `access_log`) log every
    request. Call it after adding the other middlewares, so it wraps them too."""
    app.state.metrics = metrics
    app.add_middleware(_Observed, instruments=_Instruments.on(metrics), access_log=access_log)
    app.include_router(router)
