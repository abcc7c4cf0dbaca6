"""`GET /metrics`: the Prometheus scrape of this process, plus the queue read from the database.

`install` also makes each request record its events into the app's metrics (see
`app.observability`), so an API process counts what its handlers do.
"""

import asyncio
import logging
from typing import Any

from fastapi import APIRouter, FastAPI, Request, Response
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4

from app import observability
from app.api.auth import AdminDep
from app.api.deps import DatabaseDep, JobsDep
from app.api.problems import responses
from app.metrics import Metrics, QueueGauges, exposition
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


class _RecordInto:
    """ASGI middleware: events raised while handling a request count into `metrics`."""

    def __init__(self, app: Any, metrics: Metrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        with observability.recording(self.metrics):
            await self.app(scope, receive, send)


def install(app: FastAPI, metrics: Metrics) -> None:
    """Serve `GET /metrics` from `metrics`, and count the requests' events into them."""
    app.state.metrics = metrics
    app.add_middleware(_RecordInto, metrics=metrics)
    app.include_router(router)
