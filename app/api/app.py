"""The FastAPI application: routes, middlewares, and a lifespan that runs a `Runtime`.

The lifespan applies the migrations, builds the system (`app.runtime.Runtime`: database,
stores, and unless INGEST_WORKER_ENABLED is false a worker and a webhook sender), starts it,
and stops it in reverse. Nothing is created at import time.
"""

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI
from fastapi.routing import APIRoute
from fastapi_offline import FastAPIOffline

import app as package
from app.api import problems
from app.api.dashboard import crawls as dashboard_crawls
from app.api.dashboard import routes as dashboard
from app.api.middleware.body_limit import BodyLimit
from app.api.middleware.cross_site import CrossSiteGuard
from app.api.middleware.framing import NoFraming
from app.api.middleware.hosts import AllowedHosts, HostNames
from app.api.middleware.submit_rate import SubmitRate
from app.api.routes import content, crawls, deliveries, domains, jobs, metrics, ops
from app.api.routes.diffs import DiffLimits, Diffs
from app.clock import Clock, utc_now
from app.fetch.guard import Resolver, system_resolver
from app.observability.metrics import Metrics
from app.runtime import Runtime
from app.settings import Settings

log = logging.getLogger("ingest.api")

TAGS = [
    {"name": "jobs", "description": "Submit URLs, follow their jobs, retry, cancel, delete."},
    {"name": "content", "description": "What a succeeded job fetched."},
    {"name": "crawls", "description": "Crawl or map a site: its pages as jobs."},
    {"name": "domains", "description": "Per-domain pauses and limits (admin)."},
    {"name": "operations", "description": "Counts, health, readiness, metrics."},
]
"""Swagger UI shows the tags in this order: what clients use first, operations last."""


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
        if not settings.api_keys:
            log.warning("INGEST_API_KEYS is empty: the API is open to anyone who can reach it")
        runtime = Runtime.build(
            settings,
            run_worker=settings.worker_enabled,
            in_a_process=settings.worker_process,
            clock=clock,
            resolver=resolver,
        )
        app.state.runtime = runtime
        # The diff processes start on the first diff; stopping kills any still at work.
        diffs = app.state.diffs = Diffs(DiffLimits.of(settings))
        try:
            await runtime.database.upgrade()
            await runtime.start(app_metrics)
            yield
        finally:
            try:
                await asyncio.to_thread(diffs.close)
            finally:
                await runtime.stop()

    # Swagger UI and ReDoc assets come from the installed package, not a CDN.
    app = FastAPIOffline(
        title="ingest",
        version=package.__version__,
        summary="Hand it URLs; it fetches them reliably and keeps every job's state visible.",
        lifespan=lifespan,
        generate_unique_id_function=_operation_id,
        openapi_tags=TAGS,
    )
    # Each API process counts its keys' submits (`app.api.middleware.submit_rate` says why per
    # process).
    app.state.submit_rate = SubmitRate.from_settings(settings)
    problems.install(app)
    # Each added middleware wraps the ones before: a request for a host this service does
    # not answer to is refused first; the body limit runs before anything reads or parses a
    # body, and before any route looks at the API key; the metrics wrap them all, so their
    # refusals are counted too, and every answer says not to frame it.
    app.add_middleware(CrossSiteGuard)
    app.add_middleware(BodyLimit, max_bytes=settings.max_request_bytes)
    app.add_middleware(AllowedHosts, hosts=HostNames.of(settings))
    metrics.install(app, app_metrics, settings.access_log)
    app.add_middleware(NoFraming)
    app.include_router(jobs.router, responses=problems.unavailable())
    app.include_router(deliveries.router, responses=problems.unavailable())
    app.include_router(content.router, responses=problems.unavailable())
    app.include_router(crawls.router, responses=problems.unavailable())
    app.include_router(ops.router)
    app.include_router(domains.router, responses=problems.unavailable())
    app.include_router(dashboard.router)
    app.include_router(dashboard_crawls.router)
    return app


def _operation_id(route: APIRoute) -> str:
    # Route names are stable, so the committed openapi.yaml does not churn.
    return route.name
