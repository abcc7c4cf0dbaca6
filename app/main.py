"""The FastAPI application and its lifespan.

The lifespan builds everything in order (database, migrations, stores, fetcher, worker)
and tears it down in reverse. Nothing is created at import time.
"""

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI
from fastapi.routing import APIRoute
from fastapi_offline import FastAPIOffline

import app as package
from app import observability
from app.api import content, dashboard, deliveries, domains, jobs, metrics, ops, problems
from app.api.body_limit import BodyLimit
from app.api.cross_site import CrossSiteGuard
from app.clock import Clock, utc_now
from app.fetcher import Fetcher
from app.guard import Resolver, system_resolver
from app.metrics import Metrics
from app.settings import Settings
from app.store.database import Database
from app.store.deliveries import DeliveryStore
from app.store.domains import DomainStore
from app.store.jobs import JobStore
from app.store.queue import Queue
from app.webhooks import Deliverer
from app.worker import Worker

log = logging.getLogger("ingest.api")


def create_app(
    settings: Settings | None = None,
    clock: Clock = utc_now,
    resolver: Resolver = system_resolver,
) -> FastAPI:
    """`clock` and `resolver` (the SSRF guard's DNS) are there for tests to replace."""
    settings = settings or Settings()
    app_metrics = Metrics()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        database = Database(settings.database_url)
        await database.upgrade()
        app.state.settings = settings
        if not settings.api_keys:
            log.warning("INGEST_API_KEYS is empty: the API is open to anyone who can reach it")
        app.state.database = database
        app.state.jobs = JobStore(database, clock)
        app.state.domains = DomainStore(database, clock)
        app.state.deliveries = DeliveryStore(database)
        worker, task, fetcher = None, None, None
        deliverer, sending = None, None
        if settings.worker_enabled:
            fetcher = Fetcher(settings, resolver=resolver)
            worker = Worker(Queue(database, settings), fetcher, settings, clock)
            app.state.jobs.on_submit = worker.notify
            recording = observability.recording_into(app_metrics)
            task = asyncio.create_task(worker.run(), name="worker", context=recording)
            deliverer = Deliverer(app.state.deliveries, app.state.jobs, settings, clock, resolver)
            sending = asyncio.create_task(deliverer.run(), name="webhooks")
        app.state.worker = worker
        app.state.deliverer = deliverer
        try:
            yield
        finally:
            if deliverer is not None and sending is not None:
                deliverer.stop()
                await sending
            if worker is not None and task is not None:
                worker.stop()
                await task
            if fetcher is not None:
                await fetcher.aclose()
            await database.dispose()

    # Swagger UI and ReDoc assets come from the installed package, not a CDN.
    app = FastAPIOffline(
        title="ingest",
        version=package.__version__,
        summary="Hand it URLs; it fetches them reliably and keeps every job's state visible.",
        lifespan=lifespan,
        generate_unique_id_function=_operation_id,
    )
    problems.install(app)
    metrics.install(app, app_metrics)
    # Each added middleware wraps the ones before: the body limit runs first, before anything
    # reads or parses a body, and before any route looks at the API key.
    app.add_middleware(CrossSiteGuard)
    app.add_middleware(BodyLimit, max_bytes=settings.max_request_bytes)
    app.include_router(jobs.router)
    app.include_router(deliveries.router)
    app.include_router(content.router)
    app.include_router(ops.router)
    app.include_router(domains.router)
    app.include_router(dashboard.router)
    return app


def _operation_id(route: APIRoute) -> str:
    # Route names are stable, so the committed openapi.yaml does not churn.
    return route.name
