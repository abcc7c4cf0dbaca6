"""Per-domain state shared by every worker: see pauses and limits, resume a domain by hand."""

from datetime import datetime

from fastapi import APIRouter, HTTPException
from pydantic import BaseModel, Field

from app.api.auth import AdminDep
from app.api.deps import DomainsDep
from app.api.problems import responses
from app.store.domains import DomainOverview

router = APIRouter(prefix="/domains", tags=["domains"], responses=responses(401, 403))


class DomainOut(BaseModel):
    domain: str
    paused_until: datetime | None
    pause_reason: str | None
    consecutive_failures: int
    in_flight: int
    pending: int
    oldest_pending_age_seconds: float | None
    scheduled: int = Field(description="Of the pending: not due yet.")
    oldest_due_age_seconds: float | None = Field(
        description="How long its longest-waiting due pending job has been due."
    )

    @classmethod
    def of(cls, domain: DomainOverview) -> "DomainOut":
        return cls.model_validate(domain, from_attributes=True)


class DomainList(BaseModel):
    items: list[DomainOut]


@router.get("", name="list_domains")
async def list_domains(domains: DomainsDep, _: AdminDep) -> DomainList:
    """Domains with pending or running jobs, a pause or a failure streak (admin)."""
    return DomainList(items=[DomainOut.of(d) for d in await domains.overview(domains.clock())])


@router.post("/{domain}/resume", name="resume_domain", responses=responses(404))
async def resume_domain(domain: str, domains: DomainsDep, _: AdminDep) -> DomainOut:
    """Clear a domain's pause and failure streak now; its jobs are due again (admin)."""
    if not await domains.resume(domain):
        raise HTTPException(404, f"no domain {domain}")
    (resumed,) = await domains.overview(domains.clock(), domain=domain)
    return DomainOut.of(resumed)
