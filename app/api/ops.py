"""Operational endpoints: stats, liveness, readiness."""

import asyncio
import logging

from fastapi import APIRouter, HTTPException

from app.api.auth import CallerDep
from app.api.deps import DatabaseDep, JobsDep
from app.api.problems import responses
from app.api.schemas import Health
from app.wire import StatsOut, StatusCounts

router = APIRouter(tags=["operations"])
log = logging.getLogger("ingest.api")

READY_TIMEOUT_SECONDS = 2.0


@router.get("/stats", name="get_stats")
async def get_stats(jobs: JobsDep, caller: CallerDep) -> StatsOut:
    """Jobs per status and the age of the oldest pending job (of the caller's tenant)."""
    stats = await jobs.stats(caller.tenant)
    return StatsOut(
        counts=StatusCounts(**stats.counts),
        oldest_pending_age_seconds=stats.oldest_pending_age_seconds,
    )


@router.get("/healthz", name="healthz")
async def healthz() -> Health:
    """The process is up."""
    return Health(status="ok")


@router.get("/readyz", name="readyz", responses=responses(503))
async def readyz(database: DatabaseDep) -> Health:
    """The database answers; 503 otherwise."""
    try:
        async with asyncio.timeout(READY_TIMEOUT_SECONDS):
            await database.ping()
    except Exception as exc:
        log.warning("not ready: database unreachable: %s", exc)
        raise HTTPException(503, "database unreachable") from None
    return Health(status="ok")
