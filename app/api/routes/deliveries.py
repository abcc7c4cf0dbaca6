"""A job's webhook deliveries: what was POSTed to its `callback_url`, and how it went."""

from fastapi import APIRouter

from app.api.auth import CallerDep
from app.api.deps import DeliveriesDep, JobsDep
from app.api.problems import responses
from app.api.schemas import DeliveryList, DeliveryOut

router = APIRouter(prefix="/jobs", tags=["jobs"], responses=responses(401))


@router.get("/{job_id}/deliveries", name="list_deliveries", responses=responses(404))
async def list_deliveries(
    job_id: str, jobs: JobsDep, deliveries: DeliveriesDep, caller: CallerDep
) -> DeliveryList:
    """The job's callback deliveries, oldest first (none without a `callback_url`)."""
    await jobs.get(job_id, caller.tenant)  # 404 for unknown ids and other tenants' jobs
    return DeliveryList(items=[DeliveryOut.of(d) for d in await deliveries.for_job(job_id)])
