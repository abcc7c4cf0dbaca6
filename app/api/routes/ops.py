"""Operational endpoints: stats, workers, liveness, readiness."""

import asyncio
import logging

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from app.api.auth import AdminDep, CallerDep
from app.api.deps import DatabaseDep, JobsDep, SettingsDep, WorkersDep
from app.api.problems import responses, service_unavailable, unavailable
from app.api.schemas import Health, WorkerList
from app.store.workers import silence
from app.text.wording import error_line
from app.wire import StatsOut, WorkerOut

router = APIRouter(tags=["operations"])
log = logging.getLogger("ingest.api")

READY_TIMEOUT_SECONDS = 2.0


@router.get("/stats", name="get_stats", responses={**responses(401), **unavailable()})
async def get_stats(jobs: JobsDep, settings: SettingsDep, caller: CallerDep) -> StatsOut:
    """Jobs per status; of the pending, how long the oldest due one has been due and how
    many are not due yet; each tenant's jobs pending and running, its weight, the bytes of
    content it keeps, and the quotas (of the caller's tenant)."""
    stats, tenants = await jobs.stats(caller.tenant), await jobs.tenant_loads(caller.tenant)
    return StatsOut.of(stats, tenants, settings, await jobs.bytes_kept(caller.tenant))


@router.get("/workers", name="list_workers", responses={**responses(401, 403), **unavailable()})
async def list_workers(workers: WorkersDep, settings: SettingsDep, _: AdminDep) -> WorkerList:
    """Every worker process seen in the last day: live, stopped, or gone (silent for twice
    INGEST_LEASE_SECONDS without saying it stopped). Admin."""
    seen = await workers.list(workers.clock(), silence(settings.lease_seconds))
    return WorkerList(items=[WorkerOut.of(worker) for worker in seen])


@router.get("/healthz", name="healthz")
async def healthz() -> Health:
    """The process is up."""
    return Health(status="ok")


@router.get("/readyz", name="readyz", responses=unavailable(), response_model=Health)
async def readyz(database: DatabaseDep) -> Health | JSONResponse:
    """The database answers within 2 seconds, and on SQLite a write commits (a full disk or
    a read-only file leaves reads working); 503 otherwise."""
    try:
        async with asyncio.timeout(READY_TIMEOUT_SECONDS):
            await database.check_ready()
    except Exception as exc:
        log.warning("not ready: the database cannot serve: %s", error_line(exc))
        return service_unavailable("the database cannot serve")
    return Health(status="ok")
